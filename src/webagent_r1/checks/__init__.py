"""Checks that run the whole stack, apart from the test suite.

- ``tasks.py``: every embedded task's expert solves it (``webagent-r1 tasks check``).
- ``vllm.py``: the vLLM engine and weight sync against Hugging Face on a GPU
  (``python -m webagent_r1.checks.vllm``).
"""
