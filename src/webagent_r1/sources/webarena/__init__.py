"""WebArena-Lite: the 165 WebArena-Lite tasks on user-hosted WebArena sites, through our env.

Typical use (what the ``webarena-lite`` task source does)::

    from webagent_r1.sources import webarena

    tasks = webarena.load_tasks("test")               # 165 Tasks, evaluator attached
    sites = webarena.WebArenaSites.from_env()         # WA_* URLs, WA_JUDGE_*, reset hook
    webarena.check_configured(sites, tasks)           # before any browser starts
    sites.reset()                                     # optional, between runs
    env = WebEnv(browser, backend=sites, evaluator=webarena.evaluate)

Public API:

- ``load_tasks(split, path=None) -> list[Task]``: ``"test"`` = the 165 Lite configs (from
  ``path``, an installed ``browsergym-webarenalite``, or ``path="webagent-r1"``: WebAgent-R1's
  revised file, shipped and checksummed); ``"train"`` = WebArena's 812 minus
  the 165 (``path`` = WebArena's ``config_files/test.raw.json``). Raises
  ``WebArenaDataError`` (a ``TaskError``) saying how to get the file.
- ``WebArenaSites``: the env's ``SiteBackend`` (``resolve_url``, ``origins``, ``begin`` =
  automatic login per site in the episode's context, ``end``), plus ``reset()``, the judge
  and accounts. ``WebArenaSites.from_env()`` reads ``WA_SHOPPING``, ``WA_SHOPPING_ADMIN``,
  ``WA_REDDIT``, ``WA_GITLAB``, ``WA_MAP``, ``WA_WIKIPEDIA``, ``WA_HOMEPAGE``.
- ``evaluate(ctx) -> EvalResult``: WebArena's evaluators (string_match, url_match,
  program_html with its helper functions; fuzzy_match through the judge), by the rules of
  ``WebArenaSites.scoring``: ``"vab"`` (VisualAgentBench's, the paper's) or ``"webarena"``.
- ``headline(tasks, trajectories)``: success over every episode (env errors are failures),
  per site in the paper's columns; ``shared_state_warning`` / ``SharedStateWarning``: runs
  whose episodes of state-graded tasks share the sites.
- ``check_configured(sites=None, tasks=None)``: raises ``SitesNotConfiguredError`` naming
  missing ``WA_*`` variables or unreachable sites, ``JudgeNotConfiguredError`` when tasks use
  fuzzy_match without a judge.
- ``OpenAIJudge``: the fuzzy_match judge over an OpenAI-compatible endpoint
  (``WA_JUDGE_BASE_URL``, ``WA_JUDGE_MODEL``, ``WA_JUDGE_API_KEY``).
- ``summarize(tasks)``: counts by site and by eval types.
- ``task_source(cfg)``: the ``webarena-lite`` ``TaskSource`` (``webarena/source.py``), which
  ``webagent_r1.sources.SOURCES`` dispatches to.

See docs/webarena-lite.md.
"""

from __future__ import annotations

from webagent_r1.sources.webarena.data import (
    LITE_OLD_TASK_IDS,
    SCORINGS,
    SITES,
    WebArenaDataError,
    find_lite_file,
    load_configs,
    needs_judge,
    sites_used,
    summarize,
)
from webagent_r1.sources.webarena.grading import evaluate
from webagent_r1.sources.webarena.helpers import HelperError
from webagent_r1.sources.webarena.judge import JudgeError, JudgeNotConfiguredError, OpenAIJudge
from webagent_r1.sources.webarena.login import DEFAULT_ACCOUNTS, Account, LoginError
from webagent_r1.sources.webarena.results import (
    SharedStateWarning,
    headline,
    shared_state_warning,
    state_graded,
)
from webagent_r1.sources.webarena.sites import (
    ENV_VARS,
    ResetError,
    SitesNotConfiguredError,
    WebArenaSites,
    check_configured,
)
from webagent_r1.sources.webarena.source import WebArenaSource, load_tasks, task_source

__all__ = [
    "DEFAULT_ACCOUNTS",
    "ENV_VARS",
    "LITE_OLD_TASK_IDS",
    "SITES",
    "Account",
    "HelperError",
    "JudgeError",
    "JudgeNotConfiguredError",
    "LoginError",
    "OpenAIJudge",
    "ResetError",
    "SCORINGS",
    "SharedStateWarning",
    "SitesNotConfiguredError",
    "WebArenaDataError",
    "WebArenaSites",
    "WebArenaSource",
    "check_configured",
    "evaluate",
    "find_lite_file",
    "headline",
    "load_configs",
    "load_tasks",
    "needs_judge",
    "shared_state_warning",
    "sites_used",
    "state_graded",
    "summarize",
    "task_source",
]
