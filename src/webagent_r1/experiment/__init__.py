"""Experiments: arms of a recipe over seeds, trained, evaluated and compared by one plan
(``webagent-r1 experiment PLAN.yaml``; ``docs/experiments.md``)."""

from webagent_r1.experiment.page import RunRecord, build_results, write_results
from webagent_r1.experiment.plan import Comparison, EvalSettings, Plan, PlanError, load_plan
from webagent_r1.experiment.run import ExperimentOutcome, run_experiment

__all__ = [
    "Comparison",
    "EvalSettings",
    "ExperimentOutcome",
    "Plan",
    "PlanError",
    "RunRecord",
    "build_results",
    "load_plan",
    "run_experiment",
    "write_results",
]
