"""Evaluation: running a policy on a set of tasks and scoring it (``run.py``:
``evaluate_policy``, ``run_evaluation``, ``webagent-r1 eval``)."""
