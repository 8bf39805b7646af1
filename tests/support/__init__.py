"""Stand-ins shared by tests of several folders: a tokenizer, engines, envs and an env pool
(``fakes``), tiny models and trajectories (``tiny``), a stand-in for vLLM's AsyncLLM
(``fake_vllm``)."""
