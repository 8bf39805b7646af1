"""Tasks: WebArena-compatible configs, evaluators, the embedded task suite and its experts."""

from webagent_r1.tasks.io import EVAL_TYPES, TaskError, load_tasks, validate_task_dict, write_tasks

__all__ = ["EVAL_TYPES", "TaskError", "load_tasks", "validate_task_dict", "write_tasks"]
