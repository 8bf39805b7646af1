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


class RequestError(ValueError):
    """The options of a command do not fit together or match nothing (a split the tasks do
    not have, no task left by the filters, a count below 1); the command line shows the
    message as a bad parameter."""
