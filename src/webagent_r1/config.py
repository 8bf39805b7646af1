"""Typed configuration: dataclasses with documented fields, YAML recipes, CLI overrides.

Every field has a default that runs on a laptop CPU. A recipe (``configs/*.yaml``) sets the
fields it changes; ``section.key=value`` on the command line overrides both. An unknown key is
an error that names the closest valid key, and ``__post_init__`` checks say how to fix a value.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from webagent_r1.errors import LoadError
from webagent_r1.inputs import json_depth_ok, read_text, show


class ConfigError(LoadError):
    """A configuration value or key is invalid; the message says how to fix it."""


INT_LIMIT = 2**63 - 1
"""Largest magnitude of an integer setting (what a 64-bit seed or counter holds)."""


def home_dir() -> Path:
    """Where webagent-r1 caches models and site databases (``$WEBAGENT_R1_HOME``)."""
    return Path(os.environ.get("WEBAGENT_R1_HOME", Path.home() / ".cache" / "webagent-r1"))


def _check(cond: bool, msg: str) -> None:
    if not cond:
        raise ConfigError(msg)


@dataclass
class BrowserConfig:
    """Headless Chromium driven by Playwright."""

    executable: str | None = None
    """Chromium binary; None finds one ($WEBAGENT_R1_CHROMIUM, Debian's, Playwright's)."""
    headless: bool = True
    """Run without a window."""
    viewport_width: int = 1280
    """Viewport width in CSS pixels."""
    viewport_height: int = 1080
    """Viewport height in CSS pixels."""
    action_timeout_ms: int = 10000
    """Timeout of one browser action (click, type, navigation) in milliseconds."""
    navigation_timeout_ms: int = 15000
    """Timeout of a page load in milliseconds."""
    hang_timeout_s: float = 60.0
    """How often a browser exchange that is still running (opening an episode's context and
    first page, or an action with the observation after it) checks that Chromium is alive:
    every this many seconds it is probed with a DevTools round trip, and a Chromium that
    does not answer within this time is hung: the episode ends as an env error (retried,
    never trained on) and Chromium is relaunched. A slow machine's Chromium answers and the
    exchange goes on; one still running after 5 times this is given up all the same.
    Chromium killed mid-call can leave a call that never returns; this bounds it."""
    extra_args: list[str] = field(default_factory=list)
    """Extra Chromium command-line flags, added to the safe defaults."""
    concurrency: int = 0
    """Browser exchanges (opening an episode: context, site state, first page and its
    observation; or an action with the observation after it) that run at once on one
    Chromium; the others wait their turn, and the wait counts against no timeout. Chromium
    shares its time among the pages loading at once, so on a small machine 48 start pages
    loaded together all outlast ``navigation_timeout_ms``; a few at a time finish as fast
    and within it. 0 = 4 per CPU core."""
    context_pool: int = 16
    """Browser contexts kept open for reuse. A finished episode's context is cleaned in the
    background (a fresh tab replaces its tabs, so history and session storage go; cookies,
    local storage, IndexedDB, cache storage and the HTTP cache of the sites it could visit
    are cleared) and handed to a later episode, which then skips opening a context and
    installing its routes. A context whose page crashed, that was closed, or whose cleaning
    failed or left a second tab is closed, never reused. 0 opens and closes a context per
    episode."""
    context_max_uses: int = 200
    """Episodes one pooled context serves before it is closed and replaced (bounds whatever
    a long-lived context accumulates)."""

    def __post_init__(self) -> None:
        _check(
            self.viewport_width >= 200 and self.viewport_height >= 200,
            "browser.viewport_width/height must be at least 200 pixels",
        )
        _check(self.action_timeout_ms > 0, "browser.action_timeout_ms must be positive")
        _check(self.navigation_timeout_ms > 0, "browser.navigation_timeout_ms must be positive")
        _check(self.hang_timeout_s > 0, "browser.hang_timeout_s must be positive")
        _check(self.concurrency >= 0, "browser.concurrency must be 0 (4 per core) or more")
        _check(self.context_pool >= 0, "browser.context_pool must be 0 (off) or more")
        _check(self.context_max_uses >= 1, "browser.context_max_uses must be at least 1")


@dataclass
class ObservationConfig:
    """How a page is turned into text for the model."""

    format: str = "compact"
    """'html' (simplified HTML, WebRL/WebAgent-R1 style) or 'compact' (one line per node)."""
    viewport_only: bool = False
    """Only elements inside the viewport (WebAgent-R1 shows the viewport) vs the full page."""
    max_tokens: int = 1500
    """Token budget of one observation; longer pages are truncated with a marker."""
    page_through: bool = True
    """When a full-page observation is cut by ``max_tokens``, "Scroll Down" shows the next
    budget's worth of lines (from the first line cut) and "Scroll Up" the previous one, so all
    of a long page is reachable, even one too short to scroll. False: both scroll the viewport
    alone, and the text starts at the scroll position (content between the cut and the next
    screen, or past the cut of a page that does not scroll, is never shown)."""

    def __post_init__(self) -> None:
        _check(
            self.format in ("html", "compact"),
            f"observation.format must be 'html' or 'compact', got {self.format!r}",
        )
        _check(self.max_tokens >= 50, "observation.max_tokens must be at least 50")


@dataclass
class AgentConfig:
    """Prompting and dynamic context compression."""

    thinking: bool = True
    """Thinking prompt (<think> then <answer>) or the no-thinking variant (<answer> only)."""
    keep_last_observations: int = 1
    """How many of the latest observations stay in full; earlier ones become a placeholder."""
    strip_earlier_thinking: bool = False
    """Remove <think> blocks from earlier turns' responses in the prompt."""

    def __post_init__(self) -> None:
        _check(
            self.keep_last_observations >= 1,
            "agent.keep_last_observations must be >= 1 (the current page is always shown)",
        )


@dataclass
class EnvConfig:
    """One episode over one browser context."""

    max_turns: int = 15
    """Episode ends after this many agent turns (the paper uses 15)."""
    allow_origins: list[str] = field(default_factory=list)
    """Origins the agent may visit besides the task's sites (e.g. 'http://127.0.0.1:9000')."""
    screenshot_dir: str | None = None
    """Save a PNG of the page after every action here (the trajectory viewer shows them);
    None: no screenshots (they cost ~50 ms a step)."""
    grade_at_turns: list[int] = field(default_factory=list)
    """Turns after which a still-running episode is also graded as if its budget ended
    there (trajectory ``info.graded_at``); ``eval --max-turns 4,8,16`` sets it to score every
    budget from one rollout at the longest. Empty: graded only at the end."""
    early_stop_after: int = 0
    """End an episode after this many unparsable actions in a row, or this many identical
    actions in a row, graded as if its turn budget ran out (info ``early_stop`` says why):
    the paper's evaluation stops at 5. 0: never (the turn budget alone)."""

    def __post_init__(self) -> None:
        _check(self.max_turns >= 1, "env.max_turns must be >= 1")
        _check(
            self.early_stop_after >= 0,
            "env.early_stop_after must be >= 0 (0 = never; the paper's evaluation uses 5)",
        )
        _check(
            all(isinstance(t, int) and t >= 1 for t in self.grade_at_turns),
            f"env.grade_at_turns must be turn numbers >= 1, got {self.grade_at_turns!r}",
        )


@dataclass
class ModelConfig:
    """The policy model."""

    name: str = "smollm2-135m-instruct"
    """Registry name, a local Hugging Face folder, or a hub id (when the hub is reachable)."""
    dtype: str = "float32"
    """Master weight dtype: 'float32' (CPU default), 'bfloat16' or 'float16' (GPU)."""
    autocast_bf16: bool | str = "auto"
    """bf16 autocast over the master weights: 'auto', true or false. true and false are
    obeyed as written (true on a CPU without native bf16 runs emulated bf16, several times
    slower). 'auto': on a GPU, bf16 where it is supported; on a CPU, a forward and backward
    of the model's own layer shapes is timed once per machine in fp32 and under bf16 autocast
    (cached in ``$WEBAGENT_R1_HOME/precision.json``) and the faster is used; the choice and
    both timings are printed once."""
    device: str = "auto"
    """'auto' (cuda if available, else cpu), 'cpu' or 'cuda'."""

    def __post_init__(self) -> None:
        _check(
            self.autocast_bf16 in (True, False, "auto"),
            f"model.autocast_bf16 must be auto, true or false, got {self.autocast_bf16!r}",
        )
        _check(
            self.dtype in ("float32", "bfloat16", "float16"),
            f"model.dtype must be float32, bfloat16 or float16, got {self.dtype!r}",
        )
        _check(
            self.device in ("auto", "cpu", "cuda"),
            f"model.device must be auto, cpu or cuda, got {self.device!r}",
        )


ENV_POOLS = ("local", "ray")
"""Env pools by name (``rollout.env_pool``; ``rollout.pool.make_env_pool`` builds them)."""


@dataclass
class RolloutConfig:
    """Asynchronous rollout of groups of trajectories (``rollout.collect``)."""

    mode: str = "async"
    """'async' (episodes run independently, slots refilled at once) or 'lockstep' (baseline)."""
    group_size: int = 4
    """Trajectories per task (G in M-GRPO); 1 for expert demonstrations."""
    max_concurrent_episodes: int = 8
    """Episodes in flight at once (= browser contexts open at once)."""
    max_env_retries: int = 2
    """Times an episode that hit an env error (browser crash, dead site) is run again."""
    temperature: float = 1.0
    """Sampling temperature of rollouts (0 = greedy)."""
    top_p: float = 1.0
    """Nucleus sampling mass of rollouts."""
    max_new_tokens: int = 256
    """Upper bound on one turn's completion length."""
    max_batch_size: int = 16
    """Most prompts the HF engine decodes in one batch (requests of many episodes merged)."""
    batch_wait_ms: float = 5.0
    """How long the HF engine waits for more requests before decoding a partial batch."""
    batch_wait_fraction: float = 0.05
    """... or longer: up to this fraction of the previous batch's decode time. On CPU a batch
    takes tens of seconds while an env step takes a fraction of one, so waiting a little for
    the episodes still in their env step fills the batch (fewer, larger decodes) at a bounded
    cost; on a fast engine the wait stays a few milliseconds."""
    prefix_cache: bool = True
    """HF engine: keep finished requests' KV caches, keyed by their token ids, so that a prompt
    extending one (an episode's next turn up to where context compression changed its text,
    another episode of the same task) prefills only the rest; emptied whenever the weights
    change. Off, the engine samples the same tokens (up to float rounding)."""
    prefix_cache_mb: float = 2048.0
    """Most MiB the prefix cache holds (least recently used entries go first). Room for one
    entry per episode in flight pays: 46 KB a token for SmolLM2-135M in fp32 (half under bf16
    autocast), so 32 episodes of 1,000 tokens take about 1.5 GB."""
    env_pool: str = "local"
    """Where the episodes' browsers run: 'local' (Chromium on this machine) or 'ray' (browser
    workers as Ray actors, each with its own Chromium and sites; ``pip install
    'webagent-r1[ray]'``). Same episodes either way (``rollout.pool.make_env_pool``)."""
    ray_workers: int = 2
    """Ray browser workers (env_pool 'ray'); ``max_concurrent_episodes`` is spread over them."""
    ray_address: str = ""
    """Ray cluster to join (env_pool 'ray'), e.g. 'auto' or 'ray://head:10001'; empty uses
    $RAY_ADDRESS, or starts a local Ray for this run when that is unset too."""

    def __post_init__(self) -> None:
        _check(
            self.mode in ("async", "lockstep"),
            f"rollout.mode must be 'async' or 'lockstep', got {self.mode!r}",
        )
        _check(self.group_size >= 1, "rollout.group_size must be >= 1 (M-GRPO needs >= 2)")
        _check(
            self.max_concurrent_episodes >= 1,
            "rollout.max_concurrent_episodes must be >= 1 (one browser context per episode)",
        )
        _check(self.max_env_retries >= 0, "rollout.max_env_retries must be >= 0")
        _check(self.temperature >= 0, "rollout.temperature must be >= 0 (0 = greedy)")
        _check(0 < self.top_p <= 1, "rollout.top_p must be in (0, 1]")
        _check(self.max_new_tokens >= 1, "rollout.max_new_tokens must be >= 1")
        _check(self.max_batch_size >= 1, "rollout.max_batch_size must be >= 1")
        _check(
            self.batch_wait_ms >= 0,
            "rollout.batch_wait_ms must be >= 0 (0 decodes whatever is queued at once)",
        )
        _check(
            0 <= self.batch_wait_fraction <= 1,
            "rollout.batch_wait_fraction must be in [0, 1] (0: wait batch_wait_ms only)",
        )
        _check(
            self.prefix_cache_mb > 0,
            "rollout.prefix_cache_mb must be > 0 (use rollout.prefix_cache=false to turn it off)",
        )
        _check(
            self.env_pool in ENV_POOLS,
            f"rollout.env_pool must be one of {', '.join(map(repr, ENV_POOLS))}, got "
            f"{self.env_pool!r} ('ray' runs the browsers on Ray actors)",
        )
        _check(
            self.ray_workers >= 1,
            "rollout.ray_workers must be >= 1 (each worker is one Ray actor with its own Chromium)",
        )


GENERATION_ENGINES = ("hf", "vllm")
"""Engines M-GRPO can sample with (``train.generation_engine``)."""

SHARDING_MODES = ("none", "fsdp")
"""How the trainer's weights are laid out over processes (``train.sharding``)."""


@dataclass
class VLLMConfig:
    """The vLLM engine (``--engine vllm``, ``train.generation_engine: vllm``); CUDA GPUs only."""

    dtype: str = "bfloat16"
    """Weight and activation dtype inside vLLM: 'bfloat16', 'float16' or 'auto'."""
    gpu_memory_utilization: float = 0.3
    """Share of the GPU's memory vLLM may take (weights + KV cache); leave the rest to the
    trainer when both share a GPU."""
    tensor_parallel_size: int = 1
    """GPUs one vLLM engine spans."""
    max_model_len: int | None = None
    """Longest prompt + completion in tokens (None: the recipe's train.token_budget)."""
    enable_sleep_mode: bool = False
    """Put vLLM to sleep during each update (frees its GPU memory for the trainer) and wake
    it before the weight sync."""
    sleep_level: int = 2
    """2: weights and KV cache dropped (the weight push after waking overwrites the weights
    anyway); 1: weights offloaded to pinned CPU memory and copied back on waking."""
    enable_prefix_caching: bool = True
    """Reuse the KV cache of shared prompt prefixes (the system prompt, a group's task);
    reset after every weight sync."""
    enforce_eager: bool = False
    """Skip torch.compile and CUDA-graph capture: starts in seconds instead of about a
    minute, decodes slower."""
    logprobs_mode: str = "processed_logprobs"
    """Which log-probs vLLM returns, where the installed version has the option:
    'processed_logprobs' (after temperature, like the HF engine) or 'raw_logprobs'."""
    weight_dir: str | None = None
    """Where weight shards are staged for the engine to load (None: /dev/shm when it has
    room, else the temporary folder)."""
    shard_mb: int = 512
    """Largest weight shard staged at once, in MB (bounds the staging space); also the
    largest chunk handed over at once by the in-GPU weight transfer."""
    weight_transfer: str = "auto"
    """How pushed weights reach the engine: 'ipc' (vLLM's weight-transfer API with CUDA IPC
    handles of the trainer's tensors: no file, no copy through the host), 'files'
    (safetensors shards staged on the host), or 'auto' (ipc where the installed vLLM has the
    API and the engine spans one GPU, else files). Files stay the fallback when a transfer
    fails."""

    def __post_init__(self) -> None:
        _check(
            self.dtype in ("bfloat16", "float16", "auto"),
            f"vllm.dtype must be bfloat16, float16 or auto, got {self.dtype!r}",
        )
        _check(
            0 < self.gpu_memory_utilization <= 1,
            "vllm.gpu_memory_utilization must be in (0, 1], e.g. 0.3 next to a trainer",
        )
        _check(self.tensor_parallel_size >= 1, "vllm.tensor_parallel_size must be >= 1")
        _check(
            self.max_model_len is None or self.max_model_len >= 64,
            "vllm.max_model_len must be >= 64 tokens (or null for the model's limit)",
        )
        _check(self.sleep_level in (1, 2), "vllm.sleep_level must be 1 or 2")
        _check(
            self.logprobs_mode in ("processed_logprobs", "raw_logprobs"),
            f"vllm.logprobs_mode must be processed_logprobs or raw_logprobs, "
            f"got {self.logprobs_mode!r}",
        )
        _check(self.shard_mb >= 1, "vllm.shard_mb must be >= 1")
        _check(
            self.weight_transfer in ("auto", "ipc", "files"),
            f"vllm.weight_transfer must be auto, ipc or files, got {self.weight_transfer!r}",
        )


@dataclass
class TrainConfig:
    """What BC and M-GRPO share: batching, memory options, checkpoints, logging."""

    token_budget: int = 4096
    """Most tokens (padded) in one forward/backward micro-batch; larger batches accumulate."""
    share_prompts: bool = True
    """M-GRPO updates: turn samples with identical prompt ids (a group's first turns, and
    later turns where episodes took the same actions) share one row, the prompt computed
    once, with a block attention mask; the log-probs are those of separate rows. Needs
    'sdpa' or 'eager' attention (otherwise one sample per row)."""
    share_prefix: bool = True
    """BC and M-GRPO: the prompt prefix all samples of a micro-batch share (the system prompt)
    is run once and its KV cache repeated for every row (the log-probs and gradients of whole
    rows; with dropout the prefix draws once for all rows). Needs 'sdpa' or 'eager' attention
    and no sliding-window layers; off under gradient checkpointing and sharding."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (less memory, ~30% slower)."""
    lora_r: int = 0
    """LoRA rank; 0 trains every weight (LoRA matters for 3B+ on GPU)."""
    lora_alpha: int = 32
    """LoRA scaling numerator (scale = alpha / r)."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA input."""
    lora_target_modules: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )
    """Module names that get LoRA adapters."""
    merge_lora_on_save: bool = False
    """Also save a merged full model next to the adapters in each checkpoint."""
    trainable_layers: int = 0
    """Train only the top N decoder layers and the final norm (0: every weight). The frozen
    layers run without autograd, so the update costs about a forward plus the backward of N
    layers: on a CPU the cheapest way to more updates per hour. Not with LoRA."""
    checkpoint_every: int = 0
    """Save a checkpoint every N optimizer steps (0: only at the end)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (oldest removed first; the final one is always kept)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.99])
    """AdamW (beta1, beta2)."""
    max_grad_norm: float = 1.0
    """Gradient clipping by global norm (0: off)."""
    schedule: str = "constant"
    """Learning-rate schedule after warm-up: constant, linear or cosine (decay to 10%)."""
    tensorboard: bool = True
    """Also write TensorBoard event files (when the tensorboard package is installed)."""
    wandb_project: str | None = None
    """Log to this Weights & Biases project too (needs ``wandb`` and a login)."""
    generation_engine: str = "hf"
    """What M-GRPO samples with: 'hf' (the trainer's own model object, no copy) or 'vllm'
    (an in-process vLLM engine on the GPU, settings in ``vllm``, given the new weights after
    every update by ``train/weight_sync.py``)."""
    sharding: str = "none"
    """'none': every process holds the whole model, gradients are summed once per step (DDP
    style); 'fsdp': parameters, gradients and optimizer state are split over the processes
    (PyTorch FSDP2, the ZeRO-3 layout; ``train/sharding.py``), for models whose training
    state does not fit one GPU. Checkpoints stay Hugging Face folders. Full fine-tuning only;
    one process works too (nothing is split). With 'hf' generation each process samples from
    its own full copy of the weights, refreshed after every update."""

    memory_check: bool = True
    """``train`` on a GPU: before any stage, check the recipe's memory plan (``plan-memory``)
    against the GPU (its total less what other processes hold) and refuse, with the plan's
    table, when the peak does not fit. The plan is an upper bound: false starts anyway."""

    def __post_init__(self) -> None:
        _check(
            self.sharding in SHARDING_MODES,
            f"train.sharding must be one of {', '.join(SHARDING_MODES)}, got {self.sharding!r}",
        )
        _check(
            not (self.sharding == "fsdp" and self.lora_r),
            "train.sharding=fsdp trains every weight and does not shard LoRA adapters: set "
            "train.lora_r=0, or keep LoRA with train.sharding=none",
        )
        _check(
            not (self.sharding == "fsdp" and self.trainable_layers),
            "train.sharding=fsdp trains every weight: set train.trainable_layers=0, or use "
            "train.sharding=none",
        )
        _check(
            self.generation_engine in GENERATION_ENGINES,
            f"train.generation_engine must be one of {', '.join(GENERATION_ENGINES)}, "
            f"got {self.generation_engine!r}",
        )
        _check(self.token_budget >= 64, "train.token_budget must be >= 64 tokens")
        _check(self.lora_r >= 0, "train.lora_r must be >= 0 (0 = full fine-tuning)")
        _check(self.trainable_layers >= 0, "train.trainable_layers must be >= 0 (0 = all)")
        _check(
            not (self.trainable_layers and self.lora_r),
            "train.trainable_layers and train.lora_r are exclusive: pick one way to train less",
        )
        _check(self.checkpoint_every >= 0, "train.checkpoint_every must be >= 0 (0 = at the end)")
        _check(self.keep_checkpoints >= 1, "train.keep_checkpoints must be >= 1")
        _check(len(self.adam_betas) == 2, "train.adam_betas must be two numbers, e.g. [0.9, 0.99]")
        _check(self.max_grad_norm >= 0, "train.max_grad_norm must be >= 0 (0 = no clipping)")
        _check(
            self.schedule in ("constant", "linear", "cosine"),
            f"train.schedule must be constant, linear or cosine, got {self.schedule!r}",
        )


@dataclass
class DistConfig:
    """Several training processes (``accelerate launch``): the process group, the
    gradient all-reduce."""

    timeout_min: int = 60
    """Minutes a collective may wait for the slowest process before the job aborts
    (``init_process_group``'s timeout; NCCL's default is 10, shorter than an evaluation
    share can take)."""
    grad_bucket_mb: int = 256
    """Unsharded training (``train.sharding: none``): gradients are summed over the
    processes in buckets of at most this many MB, in place (one bucket's copy at a time)."""

    def __post_init__(self) -> None:
        _check(self.timeout_min >= 1, "dist.timeout_min must be >= 1 (minutes, e.g. 60)")
        _check(self.grad_bucket_mb >= 1, "dist.grad_bucket_mb must be >= 1 (MB, e.g. 256)")


@dataclass
class BCConfig:
    """Behaviour cloning (SFT) on expert demonstrations (``webagent-r1 sft``)."""

    data: str = "data/demos.jsonl"
    """Demonstration JSONL (``webagent-r1 demos``); created by recipes when missing."""
    cot: bool = False
    """Demonstrations with longer rationales (the R1-CoT variant): the scripted experts'
    templated step-by-step text (task, page, element, next step), not a model's reasoning."""
    demo_tasks: int | None = 400
    """Training tasks to make demonstrations of when ``data`` is missing (None: all)."""
    demo_concurrency: int | None = None
    """Browser contexts at once while recipes make demonstrations (None: as many as
    ``rollout.max_concurrent_episodes``). The experts answer at once, so every context keeps
    the browser busy: more contexts than the cores serve make actions time out and lose
    demonstrations."""
    steps: int = 80
    """Optimizer steps (0 skips BC: R1-Zero). Budget BC by steps and data, not epochs."""
    batch_size: int = 8
    """Turn samples per optimizer step."""
    lr: float = 1e-4
    """Peak learning rate."""
    warmup_steps: int = 5
    """Linear warm-up steps."""
    heldout_fraction: float = 0.05
    """Share of demonstrations (whole trajectories) kept out for the held-out loss."""
    eval_every: int = 20
    """Held-out loss every N steps (0: only at the end)."""

    def __post_init__(self) -> None:
        _check(self.steps >= 0, "bc.steps must be >= 0 (0 skips behaviour cloning)")
        _check(self.batch_size >= 1, "bc.batch_size must be >= 1")
        _check(
            self.demo_concurrency is None or self.demo_concurrency >= 1,
            "bc.demo_concurrency must be >= 1 (or null: rollout.max_concurrent_episodes)",
        )
        _check(self.lr > 0, "bc.lr must be > 0")
        _check(self.warmup_steps >= 0, "bc.warmup_steps must be >= 0")
        _check(0 <= self.heldout_fraction < 1, "bc.heldout_fraction must be in [0, 1)")
        _check(self.eval_every >= 0, "bc.eval_every must be >= 0")


@dataclass
class RLConfig:
    """M-GRPO (``webagent-r1 train``); group size and sampling come from ``rollout``."""

    steps: int = 14
    """Training steps (each: roll out, then update); 0 skips RL."""
    tasks_per_step: int = 8
    """Tasks sampled from the training split per step (B); each gets a group of G."""
    mu: int = 1
    """Policy iterations per batch (μ); > 1 reuses the batch and lets the clip act."""
    lr: float = 2e-5
    """Peak learning rate (small models on CPU need far more than the paper's 1e-6)."""
    warmup_steps: int = 0
    """Linear warm-up steps."""
    clip_eps: float = 0.2
    """ε of the ratio clip."""
    beta: float = 0.0
    """KL coefficient to the reference (initial) policy; 0: no reference model is loaded."""
    pg_coef: float = 1.0
    """Weight of the policy-gradient term (the M-GRPO surrogate, with its KL term) in every
    update. 0 keeps everything else of the run (BC term, optimizer, layers, steps, schedule,
    evaluations) and drops the policy gradient: the control "the same run without RL" is the
    one override ``rl.pg_coef=0``. Its rollouts could change nothing in its updates (the BC
    term's turns are drawn by step), so a run with 0 skips them; it then needs
    ``rl.bc_coef`` > 0, or it would train on nothing."""
    bc_coef: float = 0.0
    """Weight of a behaviour-cloning term in every M-GRPO update: the token-mean NLL of
    ``rl.bc_batch_size`` turns of the demonstrations in ``bc.data`` (BC's training share),
    added to the M-GRPO loss. Unlike the M-GRPO loss, it does not depend on rewards, so it also
    pulls on templates whose groups all fail and carry no advantage (a step whose groups were
    all dropped updates on it alone). 0: off."""
    bc_batch_size: int = 8
    """Demonstration turns in each update's behaviour-cloning term (``rl.bc_coef``), drawn by
    the update's step as BC draws its batches (a resumed run draws the same)."""
    normalization: str = "mgrpo"
    """Loss normalisation (``algos/mgrpo.py``): mgrpo (the paper: per action, turn,
    trajectory; every trajectory weighs the same, so a turn of a long episode weighs less),
    token_mean (every token the same), dr_grpo (a constant) or turn_mean (per action, then
    every turn of the batch the same, whatever its episode's length)."""
    advantage_scale: str = "std"
    """Advantages divided by the group std ('std', GRPO) or only centred ('none', Dr.GRPO)."""
    reward_requires_exit: bool = False
    """Train on a reward of 0 for an episode that reached the turn limit without ``exit``,
    whatever the site's state: a state-changing task then pays only when the agent also says
    it is done (evaluations, the curriculum's success estimates and the logged rollout success
    still grade the end state alone; a group counts as mixed by the rewards trained on)."""
    drop_equal_groups: bool = True
    """Skip groups whose rewards are all equal (zero advantage, zero gradient); counted. With
    ``advantage: gigpo`` such groups are skipped too; keeping them (false) lets a group of all
    successes still train on its step-level advantages (the shorter path from a shared page)."""
    advantage: str = "episode"
    """Credit assignment: 'episode' (M-GRPO: every turn gets its episode's group advantage) or
    'gigpo' (adds ``step_weight`` times a step-level advantage: turns of a group's episodes
    that acted from the same page in the same state are compared by their discounted returns;
    ``algos/gigpo.py``)."""
    step_weight: float = 1.0
    """'gigpo': ω, the weight of the step-level advantage added to the episode one (>= 0)."""
    step_gamma: float = 0.95
    """'gigpo': γ in (0, 1], the discount of a turn's return γ^(turns left after it) · reward,
    so reaching success in fewer turns from a shared page earns more."""
    old_logprobs: str = "recompute"
    """π_old: 'recompute' with the trainer's forward before updating; 'sampler', the sampler's
    log-probs as stored (one forward saved; refused where the sampler runs in bf16, whose
    log-probs differ from the trainer's); 'auto', the sampler's where it computes in fp32 as
    the trainer does, else recomputed."""
    max_staleness: int = 0
    """Most optimizer steps the weights a turn was sampled from (``Turn.weight_version``) may
    lag the weights being updated for the turn to be trained on (0: only the current ones)."""
    stale_turns: str = "drop"
    """A turn beyond ``max_staleness`` (or from weights newer than the trainer's): 'drop'
    leaves it out of the update, counted in ``train/turns_dropped_stale``; 'error' stops."""
    eval_every: int = 0
    """Evaluate on the fixed subset of ``eval_split`` every N steps (0: only before and
    after)."""
    eval_split: str = "val"
    """Split of the stage's evaluations and of the recipe's base-model evaluation: 'val' (the
    validation split, where settings, step counts and checkpoints are chosen) or 'test' (for
    a configuration fixed beforehand, e.g. the quickstart's demonstration; the protocol
    otherwise evaluates test once, with ``webagent-r1 eval --split test --final``)."""
    eval_tasks: int = 48
    """Size of the fixed evaluation subset of ``eval_split`` (0: the whole split)."""
    eval_samples: int = 1
    """Episodes per evaluation task: 1 is greedy; k > 1 samples k at ``eval_temperature``
    (with the run's seed, so every evaluation draws alike) and adds ``eval/pass_at_k``. A
    finer measure of a sampled policy, at k times the evaluation time."""
    eval_temperature: float = 0.7
    """Sampling temperature of the evaluations when ``eval_samples`` > 1."""
    eval_base: bool = True
    """Recipes: also evaluate the starting model before BC (R1-Zero's first eval is that)."""
    time_budget_min: float = 0.0
    """Stop M-GRPO early (then save and run the final evaluation) when another step would
    overrun this many minutes of the stage's wall time, and roll out no further round of a
    step ('dynamic', ``min_mixed_groups``) when a round and an update would; 0: no budget,
    run all ``steps``."""
    curriculum: str = "uniform"
    """How each step's tasks are chosen (``train/curriculum.py``): 'uniform' (B distinct
    training tasks), 'mixed' (templates weighted by p(1-p) of their estimated success) or
    'dynamic' (the 'mixed' draw, then more groups until B have mixed rewards; DAPO)."""
    curriculum_floor: float = 0.2
    """'mixed'/'dynamic': share of the sampling mass spread evenly over templates, so that none
    starves (each gets at least floor / templates); 1 draws templates uniformly."""
    curriculum_decay: float = 0.8
    """Per-step factor on old success counts of the curriculum's estimates (1: never forget)."""
    curriculum_fresh: bool = True
    """'mixed'/'dynamic': within a template, draw the training instance used least recently."""
    dynamic_max_extra: int = 8
    """'dynamic' and ``min_mixed_groups``: cap on extra groups collected per step beyond the
    first B."""
    min_mixed_groups: int = 0
    """'uniform'/'mixed': roll out further rounds of B tasks (the same policy: no update in
    between) until the step holds at least this many groups with mixed rewards (the rewards
    trained on), then one update on all of them. An update then follows at least this many
    groups (an AdamW step moves the weights by about ``lr`` however few it follows), unless
    ``dynamic_max_extra`` extra groups were spent or ``time_budget_min`` has no room for
    another round. 0: one round a step."""
    trainable_layers: int | None = None
    """M-GRPO's own ``train.trainable_layers`` (None: the same as BC). A CPU recipe can warm
    up the top layers with BC and let M-GRPO train every layer (0), which costs it more update
    time and, per ``train.token_budget`` token, the activations of every layer."""

    def __post_init__(self) -> None:
        _check(self.steps >= 0, "rl.steps must be >= 0")
        _check(self.tasks_per_step >= 1, "rl.tasks_per_step must be >= 1")
        _check(self.mu >= 1, "rl.mu must be >= 1 (policy iterations per batch)")
        _check(self.lr > 0, "rl.lr must be > 0")
        _check(self.warmup_steps >= 0, "rl.warmup_steps must be >= 0")
        _check(0 < self.clip_eps < 1, "rl.clip_eps must be in (0, 1)")
        _check(self.beta >= 0, "rl.beta must be >= 0 (0 turns the KL term off)")
        _check(self.bc_coef >= 0, "rl.bc_coef must be >= 0 (0 turns the BC term off)")
        _check(
            math.isfinite(self.pg_coef) and self.pg_coef >= 0,
            f"rl.pg_coef must be a finite number >= 0 (0: no policy gradient), got {self.pg_coef}",
        )
        _check(
            self.pg_coef > 0 or self.bc_coef > 0 or self.steps == 0,
            "rl.pg_coef=0 with rl.bc_coef=0 leaves M-GRPO nothing to train: set rl.bc_coef > 0 "
            "(the control without the policy gradient) or rl.steps=0",
        )
        _check(self.bc_batch_size >= 1, "rl.bc_batch_size must be >= 1")
        _check(
            self.normalization in ("mgrpo", "token_mean", "dr_grpo", "turn_mean"),
            "rl.normalization must be mgrpo, token_mean, dr_grpo or turn_mean, "
            f"got {self.normalization!r}",
        )
        _check(
            self.advantage_scale in ("std", "none"),
            f"rl.advantage_scale must be 'std' or 'none', got {self.advantage_scale!r}",
        )
        _check(
            self.advantage in ("episode", "gigpo"),
            f"rl.advantage must be 'episode' or 'gigpo', got {self.advantage!r}",
        )
        _check(
            math.isfinite(self.step_weight) and self.step_weight >= 0,
            f"rl.step_weight must be a finite number >= 0 (0: episode-level only), "
            f"got {self.step_weight}",
        )
        _check(
            math.isfinite(self.step_gamma) and 0 < self.step_gamma <= 1,
            f"rl.step_gamma must be in (0, 1] (1: no discount), got {self.step_gamma}",
        )
        _check(
            self.old_logprobs in ("recompute", "sampler", "auto"),
            f"rl.old_logprobs must be 'recompute', 'sampler' or 'auto', got {self.old_logprobs!r}",
        )
        _check(self.max_staleness >= 0, "rl.max_staleness must be >= 0 (0 = current weights)")
        _check(
            self.stale_turns in ("drop", "error"),
            f"rl.stale_turns must be 'drop' or 'error', got {self.stale_turns!r}",
        )
        _check(self.eval_every >= 0, "rl.eval_every must be >= 0")
        _check(self.eval_tasks >= 0, "rl.eval_tasks must be >= 0 (0 = the whole split)")
        _check(
            self.eval_split in ("val", "test"),
            f"rl.eval_split must be 'val' or 'test', got {self.eval_split!r}",
        )
        _check(self.eval_samples >= 1, "rl.eval_samples must be >= 1 (1 = greedy)")
        _check(
            self.trainable_layers is None or self.trainable_layers >= 0,
            "rl.trainable_layers must be >= 0 (0 = every layer) or null (as in train)",
        )
        _check(
            self.eval_samples == 1 or self.eval_temperature > 0,
            "rl.eval_temperature must be > 0 when rl.eval_samples > 1 (greedy repeats itself)",
        )
        _check(self.time_budget_min >= 0, "rl.time_budget_min must be >= 0 (0 = no budget)")
        _check(
            self.curriculum in ("uniform", "mixed", "dynamic"),
            f"rl.curriculum must be uniform, mixed or dynamic, got {self.curriculum!r}",
        )
        _check(
            0 <= self.curriculum_floor <= 1,
            f"rl.curriculum_floor must be in [0, 1] (share of uniform exploration), "
            f"got {self.curriculum_floor}",
        )
        _check(
            0 < self.curriculum_decay <= 1,
            f"rl.curriculum_decay must be in (0, 1] (1 = never forget), "
            f"got {self.curriculum_decay}",
        )
        _check(
            self.dynamic_max_extra >= 0,
            f"rl.dynamic_max_extra must be >= 0 (extra groups per step), "
            f"got {self.dynamic_max_extra}",
        )
        _check(
            self.min_mixed_groups >= 0,
            f"rl.min_mixed_groups must be >= 0 (0 = one round a step), got {self.min_mixed_groups}",
        )
        _check(
            self.min_mixed_groups == 0 or self.curriculum != "dynamic",
            "rl.min_mixed_groups applies to rl.curriculum uniform or mixed; 'dynamic' already "
            "collects until B groups have mixed rewards",
        )
        _check(
            self.min_mixed_groups <= self.tasks_per_step + self.dynamic_max_extra,
            f"rl.min_mixed_groups={self.min_mixed_groups} can never be reached: a step collects "
            f"at most rl.tasks_per_step + rl.dynamic_max_extra = "
            f"{self.tasks_per_step + self.dynamic_max_extra} groups",
        )


DIFFICULTIES = ("1-2", "3-5", "6-9", "10+")

TASK_SOURCES = ("embedded", "miniwob", "webarena-lite")
"""Task sources by name (``sources/__init__.py``: ``SOURCES``)."""


def _check_numbers(obj: Any, prefix: str) -> None:
    """Every number of a config (sections and lists included) is finite and within
    ``INT_LIMIT``: a config built in code gets the checks ``load_config`` makes on input."""
    for f in dataclasses.fields(obj):
        value, where = getattr(obj, f.name), f"{prefix}{f.name}"
        items = value if isinstance(value, list) else [value]
        for v in items:
            if dataclasses.is_dataclass(v):
                _check_numbers(v, f"{where}.")
            elif isinstance(v, float):
                _to_float(v, where, f.default)
            elif isinstance(v, int) and not isinstance(v, bool):
                _to_int(v, where, f.default)


def _seed_range(value: list[int], where: str) -> range:
    _check(
        len(value) == 2 and 0 <= value[0] < value[1],
        f"{where} must be [start, stop) with 0 <= start < stop, e.g. [0, 50]; got {value}",
    )
    return range(value[0], value[1])


@dataclass
class MiniWoBConfig:
    """MiniWoB++ episodes (``tasks.source: miniwob``): which tasks, which seeds, the page timer."""

    tasks: list[str] = field(default_factory=list)
    """MiniWoB++ task names (e.g. ``[click-button, enter-text]``); empty: every supported task."""
    test_seeds: list[int] = field(default_factory=lambda: [0, 50])
    """Seeds [start, stop) of the test split: one task instance per (task, seed)."""
    train_seeds: list[int] = field(default_factory=lambda: [1000, 1200])
    """Seeds [start, stop) of the train split; must not overlap ``test_seeds``."""
    val_seeds: list[int] = field(default_factory=lambda: [2000, 2050])
    """Seeds [start, stop) of the validation split (``--split val``: where settings, step
    counts and checkpoints are chosen); must overlap neither of the other two."""
    episode_max_time_ms: int = 0
    """The page's own episode timer (MiniWoB++ ends an episode after 10-30 s with reward -1);
    0 turns it off (24 h), so a slow CPU model is never cut off. The env's ``max_turns``
    bounds the episode either way."""

    def __post_init__(self) -> None:
        ranges = {
            k: _seed_range(getattr(self, f"{k}_seeds"), f"tasks.miniwob.{k}_seeds")
            for k in ("test", "train", "val")
        }
        for a, b in (("train", "test"), ("val", "test"), ("val", "train")):
            ra, rb = ranges[a], ranges[b]
            _check(
                ra.stop <= rb.start or rb.stop <= ra.start,
                f"tasks.miniwob.{a}_seeds {getattr(self, f'{a}_seeds')} overlap {b}_seeds "
                f"{getattr(self, f'{b}_seeds')}: move one range so that {a} and {b} "
                "instances differ",
            )
        _check(
            0 <= self.episode_max_time_ms <= 86_400_000,
            "tasks.miniwob.episode_max_time_ms must be in [0, 86400000] (0 = no page timer)",
        )


# The WebArena site names (``sources/webarena/data.py: SITES``; repeated so config stays light).
WEBARENA_SITES = ("shopping", "shopping_admin", "reddit", "gitlab", "map", "wikipedia")
WEBARENA_LOGINS = ("storage_state", "all", "none")
WEBARENA_SCORINGS = ("vab", "webarena")  # ``sources/webarena/data.py: SCORINGS``


@dataclass
class WebArenaConfig:
    """WebArena-Lite episodes (``tasks.source: webarena-lite``) on the user's own sites.

    Site URLs, the judge and the reset hook come from environment variables (``WA_*``,
    docs/webarena-lite.md); this section says which configs to load and how to log in.
    """

    test_file: str = ""
    """Configs of the test split (JSON list or JSONL, WebArena format); 'webagent-r1':
    WebAgent-R1's revised Lite file, shipped with this package (checksum checked); empty:
    the 165 configs of the installed ``browsergym-webarenalite``."""
    train_file: str = ""
    """WebArena's ``config_files/test.raw.json`` (812 tasks): the train and val splits are
    those minus the 165 Lite tasks. Empty: no train or val split."""
    val_fraction: float = 0.1
    """Share of those 647 tasks in the val split (by a stable hash of the task id; about 65),
    where settings and checkpoints are chosen; the rest are train. 0: the paper's 647
    training tasks and no val split."""
    sites: list[str] = field(default_factory=list)
    """Keep tasks whose sites are all in this list (empty keeps all), so that a run on some
    sites needs only their URLs."""
    login: str = "storage_state"
    """Which sites an episode logs in to: 'storage_state' (those named by the task's
    ``storage_state``, as WebArena does), 'all' (every site of the task with an account, as
    BrowserGym does) or 'none'."""
    reset: bool = True
    """Run the reset hook (``WA_RESET_COMMAND`` / ``WA_FULL_RESET``) when the source starts."""
    check: bool = True
    """Check before any browser starts that every site the tasks need is configured and
    answers, and that a judge is set when a task needs one."""
    scoring: str = "vab"
    """Grading rules: 'vab' (VisualAgentBench's evaluator, which scored the paper's and
    WebRL's numbers) or 'webarena' (WebArena's original rules, as BrowserGym's)."""

    def __post_init__(self) -> None:
        _check(
            self.scoring in WEBARENA_SCORINGS,
            f"tasks.webarena.scoring must be one of {', '.join(WEBARENA_SCORINGS)} ('vab' "
            f"scores as the paper); got {self.scoring!r}",
        )
        bad = [s for s in self.sites if s not in WEBARENA_SITES]
        _check(
            not bad,
            f"tasks.webarena.sites: unknown site(s) {bad}; known: {', '.join(WEBARENA_SITES)}",
        )
        _check(
            self.login in WEBARENA_LOGINS,
            f"tasks.webarena.login must be one of {', '.join(WEBARENA_LOGINS)}; got {self.login!r}",
        )
        _check(
            math.isfinite(self.val_fraction) and 0 <= self.val_fraction < 1,
            f"tasks.webarena.val_fraction must be in [0, 1) (0: no val split), "
            f"got {self.val_fraction}",
        )


@dataclass
class TasksConfig:
    """Which tasks a run uses: demonstrations, M-GRPO and evaluation alike.

    ``source`` says where tasks come from (the embedded suite, MiniWoB++ …). ``sites``,
    ``templates``, ``difficulty`` and ``heldout_templates`` filter the embedded suite only (so
    a recipe's filters do
    not stop ``eval --tasks miniwob`` with the same config); empty lists keep everything. A
    CPU recipe may keep the short tasks only; the test split it reports on is then the same
    filter applied to the test tasks (say so with the numbers).
    """

    source: str = "embedded"
    """Where tasks come from: 'embedded' (our sites), 'miniwob' (MiniWoB++ pages of the
    ``miniwob`` package) or 'webarena-lite' (user-hosted WebArena sites)."""
    sites: list[str] = field(default_factory=list)
    """Keep tasks whose sites are all in this list (e.g. ``[shopping, reddit]``)."""
    templates: list[str] = field(default_factory=list)
    """Keep tasks of these template names (``tasks list`` shows them)."""
    difficulty: list[str] = field(default_factory=list)
    """Keep templates of these expert step counts: ``1-2``, ``3-5``, ``6-9``, ``10+``."""
    heldout_templates: list[str] = field(default_factory=list)
    """The held-out (never trained) templates that ``--split heldout`` evaluates, in place of
    ``templates`` there (which names the trained ones) unless ``templates`` names held-out
    ones itself; empty: ``templates`` applies to that split too. Each must be a held-out
    template (``tasks list --split heldout``)."""
    miniwob: MiniWoBConfig = field(default_factory=MiniWoBConfig)
    """MiniWoB++ tasks and seeds (used when ``source`` is 'miniwob')."""
    webarena: WebArenaConfig = field(default_factory=WebArenaConfig)
    """WebArena-Lite config files, sites and login (used when ``source`` is 'webarena-lite')."""

    def __post_init__(self) -> None:
        _check(
            self.source in TASK_SOURCES,
            f"tasks.source must be one of {', '.join(TASK_SOURCES)}; got {self.source!r}",
        )
        bad = [d for d in self.difficulty if d not in DIFFICULTIES]
        _check(not bad, f"tasks.difficulty must be among {', '.join(DIFFICULTIES)}; got {bad}")


@dataclass
class Config:
    """The whole configuration of a run."""

    seed: int = 0
    """Random seed for task sampling, generation and training."""
    run_dir: str = "runs/default"
    """Folder for logs, checkpoints, trajectories and reports."""
    model: ModelConfig = field(default_factory=ModelConfig)
    browser: BrowserConfig = field(default_factory=BrowserConfig)
    observation: ObservationConfig = field(default_factory=ObservationConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    bc: BCConfig = field(default_factory=BCConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    tasks: TasksConfig = field(default_factory=TasksConfig)
    vllm: VLLMConfig = field(default_factory=VLLMConfig)
    dist: DistConfig = field(default_factory=DistConfig)
    init_from: str | None = None
    """Start from this checkpoint or model folder instead of ``model.name`` (e.g. a BC run)."""

    def __post_init__(self) -> None:
        _check_numbers(self, "")
        try:  # M-GRPO's train section must be valid too
            self.rl_train()
        except ConfigError as e:
            raise ConfigError(f"rl.trainable_layers={self.rl.trainable_layers}: {e}") from None

    def rl_train(self) -> TrainConfig:
        """The ``train`` section M-GRPO runs with: ``rl.trainable_layers`` over BC's value."""
        if self.rl.trainable_layers is None:
            return self.train
        return dataclasses.replace(self.train, trainable_layers=self.rl.trainable_layers)


# --------------------------------------------------------------------------------------
# Loading: dict / YAML / overrides -> dataclasses, with did-you-mean errors.
# --------------------------------------------------------------------------------------


def _closest(key: str, options: list[str]) -> str:
    match = difflib.get_close_matches(key, options, n=1, cutoff=0.4)
    return f"; did you mean {match[0]!r}?" if match else f"; valid keys: {', '.join(options)}"


def _fix(where: str, example: Any) -> str:
    """How to fix a bad number: an example assignment (the field's default when known)."""
    return f" (e.g. {where}={example})" if isinstance(example, (int, float)) else ""


def _to_int(value: Any, where: str, example: Any = None) -> int:
    """An integer setting: an int, or a string / whole float that reads as one, within
    ``INT_LIMIT``; NaN, infinities and ``1e400`` are refused, never a traceback."""
    bad = ConfigError(f"{where} must be an integer, got {_show(value)}{_fix(where, example)}")
    out_of_range = ConfigError(
        f"{where}={_show(value)} is out of range: integers must be within +-{INT_LIMIT}"
        f"{_fix(where, example)}"
    )
    n: Any = value
    if isinstance(value, bool):
        raise bad
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        if len(text.lstrip("+-")) > 30 and text.lstrip("+-").isdigit():
            raise out_of_range  # Python reads at most 4300 digits; far past the limit anyway
        try:
            n = int(text)
        except ValueError:
            try:
                n = float(text)
            except ValueError:
                raise bad from None
    if isinstance(n, float):
        if not math.isfinite(n) or n != int(n):
            raise bad
        n = int(n)
    if not isinstance(n, int):
        raise bad
    if abs(n) > INT_LIMIT:
        raise out_of_range
    return n


def _to_float(value: Any, where: str, example: Any = None) -> float:
    """A number setting: finite (NaN and infinities would poison a run, or pass a ``> 0``
    check that was meant to bound it); ``true``/``false`` are not numbers."""
    try:
        if isinstance(value, bool):
            raise TypeError
        f = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(
            f"{where} must be a number, got {_show(value)}{_fix(where, example)}"
        ) from None
    if not math.isfinite(f):
        raise ConfigError(
            f"{where} must be a finite number, got {_show(value)}{_fix(where, example)}"
        )
    return f


def _show(value: Any) -> str:
    """``value`` for a message, cut to 60 characters before it is written out whole."""
    return show(value)


def _coerce(value: Any, tp: Any, where: str, example: Any = None) -> Any:
    """Convert ``value`` (from YAML or a CLI string) to the annotated type ``tp``.

    ``example`` (the field's default) is shown in the message of a bad number.
    """
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        is_none = value is None or (isinstance(value, str) and value.lower() in ("none", "null"))
        if is_none and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, where, example)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: cannot read {_show(value)} as {tp}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping of keys, got {_show(value)}")
        return from_dict(tp, value, prefix=where)
    if origin is list:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()] if value else []
        if not isinstance(value, list):
            raise ConfigError(f"{where} must be a list, got {_show(value)}")
        return [_coerce(v, args[0] if args else Any, where) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where} must be a mapping, got {_show(value)}")
        return dict(value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.lower() in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{where} must be true or false, got {_show(value)}")
    if tp is int:
        return _to_int(value, where, example)
    if tp is float:
        return _to_float(value, where, example)
    if tp is str:
        if isinstance(value, (dict, list)):
            raise ConfigError(f"{where} must be a string, got {_show(value)}")
        return str(value)
    return value


def from_dict(cls: type, data: dict[str, Any], prefix: str = "") -> Any:
    """Build dataclass ``cls`` from ``data``; unknown keys raise ``ConfigError``."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    names = list(fields)
    kwargs = {}
    for key, value in data.items():
        where = f"{prefix}.{key}" if prefix else key
        if key not in names:
            raise ConfigError(f"unknown config key {_show(where)}{_closest(str(key), names)}")
        kwargs[key] = _coerce(value, hints[key], where, fields[key].default)
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except TypeError as e:
        raise ConfigError(f"{prefix or cls.__name__}: {e}") from None


def to_dict(cfg: Any) -> dict[str, Any]:
    """The config as plain data (for YAML dumps and logs)."""
    return dataclasses.asdict(cfg)


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``section.key=value`` strings to a nested dict (values parsed as YAML scalars)."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for ov in overrides:
        if "=" not in ov:
            raise ConfigError(f"override {ov!r} must look like section.key=value")
        path, raw = ov.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except (yaml.YAMLError, RecursionError, ValueError, OverflowError):  # e.g. 5000 digits
            value = raw
        node = data
        parts = path.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {ov!r}: {p!r} is not a section")
        node[parts[-1]] = value
    return data


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping (YAML itself lets the
    last one win silently, so a recipe edited in two places would run with half the edit)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *anchor" may repeat keys
                continue
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.setdefault(key, line)
            except TypeError:  # an unhashable key: SafeLoader's own error names it
                continue
            if first != line:
                raise ConfigError(
                    f"{key_node.start_mark.name}:{line}: key {_show(key)} is given twice (first "
                    f"on line {first}); keep one of them"
                )
        return super().construct_mapping(node, deep=deep)


def _key_lines(node: yaml.Node, prefix: str = "") -> dict[str, int]:
    """``section.key`` -> line of every mapping key of a composed YAML document."""
    out: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                path = prefix + str(key.value)
                out[path] = key.start_mark.line + 1
                out.update(_key_lines(value, path + "."))
    return out


MAX_YAML_VALUES = 100_000
"""Most values (scalars, lists, mappings) a YAML config may hold once its aliases are
expanded; a recipe holds a few hundred. Aliases let 287 bytes stand for billions of values
(an "alias bomb"), which took minutes and gigabytes to walk after they were built."""


def _check_expansion(root: yaml.Node, p: Path) -> None:
    """Refuse a document whose aliases expand past ``MAX_YAML_VALUES`` values, or refer to a
    node inside itself, before any value is built: the composed graph shares an aliased node,
    so its expanded size is counted once per node (memoised), in time of its own size.

    Raises:
        ConfigError: too many values, or a recursive alias.
    """
    sizes: dict[int, int] = {}
    pending = object()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # post-order without recursion: children's sizes first
        node, children_done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = 1
            continue
        kids = (
            [v for kv in node.value for v in kv]
            if isinstance(node, yaml.MappingNode)
            else node.value
        )
        if children_done:
            sizes[key] = 1 + sum(sizes[id(k)] for k in kids)
            if sizes[key] > MAX_YAML_VALUES:
                line = node.start_mark.line + 1
                raise ConfigError(
                    f"{p}:{line}: config file expands to more than {MAX_YAML_VALUES:,} values "
                    "through its aliases (&anchor / *alias): write the values out"
                )
            continue
        if sizes.get(key) is pending:
            raise ConfigError(
                f"{p}:{node.start_mark.line + 1}: config file has an alias inside the value it "
                "names (a recursive structure): write the values out"
            )
        if key in sizes:
            continue
        sizes[key] = pending  # type: ignore[assignment]
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in sizes or sizes[id(k)] is pending)


def _read_yaml(p: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """A recipe file as a dict, with the line of each key: UTF-8 (or UTF-16/32) text, valid
    YAML, no key given twice."""
    text = read_text(p, ConfigError, "config file")
    lines: dict[str, int] = {}
    try:
        loader = _StrictLoader(text)
        loader.name = str(p)  # marks (and so messages) name the file
        try:
            node = loader.get_single_node()
            if node is not None:
                _check_expansion(node, p)
            data = loader.construct_document(node) if node is not None else None
            lines = _key_lines(node) if node is not None else {}
        finally:
            loader.dispose()
    except ConfigError:
        raise
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"{p}:{mark.line + 1}" if mark is not None else str(p)
        what = e.problem or e.context or "a syntax error"
        raise ConfigError(f"{where}: config file is not valid YAML ({what})") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {str(p)!r} is not valid YAML: {e}") from None
    except RecursionError:
        raise ConfigError(f"config file {str(p)!r} nests too deeply to be a config") from None
    except (ValueError, OverflowError) as e:  # a 5000-digit integer, a "\U" escape past 0x10FFFF
        raise ConfigError(f"config file {str(p)!r} holds an unreadable value: {e}") from None
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(p)!r} must be a mapping of sections")
    if not json_depth_ok(data):
        raise ConfigError(f"config file {str(p)!r} nests too deeply to be a config")
    return data, lines


_NAMED_KEY = re.compile(r"unknown config key '([^']*)'|([A-Za-z_][\w.]*)[ =:]")
"""The key a config error is about: the one it calls unknown, or the one it starts with."""


def _located(e: ConfigError, p: Path, lines: dict[str, int], overridden: set[str]) -> ConfigError:
    """``e`` prefixed with ``file:line`` of the key it names, when that key's value came from
    the file (an override names itself: a key of the command line is never blamed on a line
    of the file, not even on a key its message suggests instead)."""
    msg = str(e)
    m = _NAMED_KEY.match(msg)
    if m:
        named = m.group(1) or m.group(2)
        from_override = named in overridden or (
            named not in lines and any(o.startswith(named + ".") for o in overridden)
        )
        if from_override:
            return e
        for key in sorted(lines, key=len, reverse=True):  # rl.lr before rl
            if named == key or named.startswith(key + "."):
                return ConfigError(f"{p}:{lines[key]}: {msg}")
        return e
    for key in sorted(lines, key=len, reverse=True):  # rl.lr before rl
        if key in overridden:
            continue
        if any(msg.startswith(key + c) for c in " =:") or f"'{key}'" in msg:
            return ConfigError(f"{p}:{lines[key]}: {msg}")
    return e


def load_config(
    path: str | Path | None = None, overrides: list[str] | None = None, cls: type = Config
) -> Any:
    """Load a YAML recipe (optional), apply overrides, validate, and return ``cls``.

    Raises:
        ConfigError: missing file, file not UTF-8, malformed YAML, a key given twice, unknown
            key or invalid value (NaN, infinite or out-of-range numbers included); a problem
            with a value of the file starts with ``<file>:<line>:``.
    """
    data: dict[str, Any] = {}
    lines: dict[str, int] = {}
    if path is not None:
        data, lines = _read_yaml(Path(path))
    data = apply_overrides(data, overrides or [])
    try:
        return from_dict(cls, data)
    except ConfigError as e:
        if path is None:
            raise
        overridden = {ov.split("=", 1)[0].strip() for ov in overrides or []}
        raise _located(e, Path(path), lines, overridden) from None
