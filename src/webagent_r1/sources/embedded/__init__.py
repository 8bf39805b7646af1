"""The ``embedded`` task source: the embedded suite on our own sites.

- ``source.py``: ``EmbeddedSource``, the ``TaskSource`` (graded by ``grading/embedded.py``).
- ``suite.py``: the suite, sampled from the task templates (``tasks/templates/``), by split.
- ``guess.py``: the constant-answer baseline of the suite's answer-graded tasks.
"""
