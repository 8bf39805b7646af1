"""The exception types that mean "the user must fix something" (shown as one line)."""

from __future__ import annotations

import re

MAX_MESSAGE = 1000
"""Longest error message of a ``LoadError`` (the rest of a quoted value is cut)."""
_NEWLINES = re.compile(r"\s*[\r\n\u2028\u2029]+\s*")


class LoadError(ValueError):
    """A file or value the user gave is malformed (a task file, a trajectory file, a config).

    The message is always one line (newlines are folded, and a message that quotes a huge
    value is cut at ``MAX_MESSAGE`` characters), ``<file>:<line>: <field>: <what is wrong and
    how to fix it>`` where the file and line are known; subclasses say which kind of input it
    was (``ConfigError``, ``TaskError``, ``TrajectoryFileError``).
    """

    def __init__(self, message: object = "") -> None:
        text = _NEWLINES.sub(" ", str(message)).strip()
        if len(text) > MAX_MESSAGE:
            text = text[: MAX_MESSAGE - 3] + "..."
        super().__init__(text)


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exceptions the CLI prints as a one-line error instead of a traceback."""
    from webagent_r1.browser import BrowserNotFoundError
    from webagent_r1.config import ConfigError
    from webagent_r1.env import EnvError
    from webagent_r1.policy.models import ModelNotFoundError
    from webagent_r1.policy.vllm import VLLMUnavailableError
    from webagent_r1.rollout.ray_pool import RayNotInstalledError
    from webagent_r1.rollout.trajectories import TrajectoryFileError
    from webagent_r1.train.recipe import RunExistsError

    types: list[type[BaseException]] = [
        LoadError,  # every malformed input: configs, task files, trajectory files
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
