"""The exception types that mean "the user must fix something" (shown as one line)."""

from __future__ import annotations


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exceptions the CLI prints as a one-line error instead of a traceback."""
    from webagent_r1.browser import BrowserNotFoundError
    from webagent_r1.config import ConfigError
    from webagent_r1.env import EnvError
    from webagent_r1.policy.models import ModelNotFoundError
    from webagent_r1.policy.vllm import VLLMUnavailableError
    from webagent_r1.raypool import RayNotInstalledError
    from webagent_r1.train.recipe import RunExistsError
    from webagent_r1.trajectories import TrajectoryFileError

    types: list[type[BaseException]] = [
        ConfigError,
        ModelNotFoundError,
        BrowserNotFoundError,
        EnvError,
        FileNotFoundError,
        TrajectoryFileError,
        RunExistsError,
        RayNotInstalledError,  # rollout.env_pool: ray without the [ray] extra
        VLLMUnavailableError,  # --engine vllm / train.generation_engine: vllm without vLLM
    ]
    try:
        from webagent_r1.tasks import TaskError

        types.append(TaskError)
    except ImportError:
        pass
    return tuple(types)
