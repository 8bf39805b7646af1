"""The ``webagent-r1`` command line.

Errors a user can hit (bad config, missing browser, missing model, malformed task file) are
printed as one line without a traceback; ``WEBAGENT_R1_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import importlib.util
import inspect
import json
import os
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from webagent_r1 import __version__
from webagent_r1.browser import BrowserNotFoundError
from webagent_r1.checks.tasks import check_tasks, pick_check_tasks
from webagent_r1.config import Config, ConfigError, ObservationConfig, load_config
from webagent_r1.errors import LoadError, RequestError
from webagent_r1.evaluation.run import EvalRequest
from webagent_r1.experiment import PlanError, load_plan, run_experiment
from webagent_r1.experiment.eval_run import EvalOutcome, run_eval
from webagent_r1.experiment.guard import TestSplitError
from webagent_r1.grading.base import EnvError
from webagent_r1.policy.models import (
    REGISTRY,
    GGUFSource,
    ModelNotFoundError,
    is_prepared,
    prepare_model,
)
from webagent_r1.quickstart import run_quickstart
from webagent_r1.report import ReportError, build_report_files
from webagent_r1.report.arms import arms_to_json, compare_arms, render_arms_markdown
from webagent_r1.report.compare import compare_runs, render_markdown, save_comparison
from webagent_r1.report.failures import COLUMNS, FAILURE_KINDS, LOOP_REPEATS, row_cells
from webagent_r1.report.load import collect_failures
from webagent_r1.report.paired import (
    compare_files,
    render_paired_markdown,
    to_json,
    write_outcomes,
)
from webagent_r1.report.viewer import build_viewer
from webagent_r1.rollout.budget_rollout import BudgetReport, BudgetRequest, page_budget
from webagent_r1.rollout.demos import write_demos
from webagent_r1.rollout.ray_pool import RayNotInstalledError
from webagent_r1.rollout.trajectories import TrajectoryFileError
from webagent_r1.sites.server import serve_forever
from webagent_r1.sources.embedded.guess import baseline_line, template_rows
from webagent_r1.sources.embedded.suite import build_suite, select, spec_for
from webagent_r1.tasks import TaskError, write_tasks
from webagent_r1.tasks.budget import DEFAULT_BUDGETS
from webagent_r1.train.memory_plan import format_plan, plan_memory

app = typer.Typer(
    name="webagent-r1",
    help="Train web agents with end-to-end multi-turn RL (WebAgent-R1).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
model_app = typer.Typer(help="Prepare and inspect policy models.", no_args_is_help=True)
sites_app = typer.Typer(help="The embedded web sites.", no_args_is_help=True)
app.add_typer(model_app, name="model")
tasks_app = typer.Typer(help="The embedded task suite.", no_args_is_help=True)
app.add_typer(sites_app, name="sites")
app.add_typer(tasks_app, name="tasks")

console = Console(stderr=True)


def _table_console() -> Console:
    """A console for tables on stdout. Piped into a file or a pager, rich would squeeze them
    into 80 columns and cut the headers to one character; a pipe gets 160 columns."""
    out = Console()
    return out if out.is_terminal else Console(width=max(out.width, 160))


ConfigOpt = Annotated[
    str | None, typer.Option("--config", "-c", help="YAML recipe (see configs/).")
]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(help="Config overrides as section.key=value, e.g. env.max_turns=5."),
]


def _takes(options: type) -> Callable[[Callable[[Any], None]], Callable[..., None]]:
    """Give a command the fields of the dataclass ``options`` as its parameters (each typed
    with its ``typer.Option`` or ``typer.Argument``) and call it with them as one
    ``options`` object: a command with many options keeps a short signature."""
    hints = get_type_hints(options, include_extras=True)
    params = [
        inspect.Parameter(
            f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name]
        )
        for f in dataclasses.fields(options)
    ]

    def wrap(command: Callable[[Any], None]) -> Callable[..., None]:
        @functools.wraps(command)
        def run(**values: Any) -> None:
            command(options(**values))

        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return wrap


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        print(__version__)
        raise typer.Exit()


@model_app.command("prepare")
def model_prepare(
    name: Annotated[str, typer.Argument(help="Registry name of a bundled model.")] = (
        "smollm2-135m-instruct"
    ),
    force: Annotated[bool, typer.Option(help="Convert again even if cached.")] = False,
) -> None:
    """Convert the bundled offline model to a cached Hugging Face folder (once)."""
    path = prepare_model(name, force=force, progress=lambda m: console.print(f"[bold]{escape(m)}"))
    print(path)


@model_app.command("list")
def model_list() -> None:
    """List registry models and whether they are prepared."""
    for name, src in REGISTRY.items():
        where = "bundled (offline)" if isinstance(src, GGUFSource) else f"hub: {src}"
        ready = "prepared" if is_prepared(name) else ""
        print(f"{name:28s} {where:30s} {ready}")


@sites_app.command("serve")
def sites_serve(
    host: Annotated[str, typer.Option(help="Interface to bind (keep it local).")] = "127.0.0.1",
    port_offset: Annotated[int, typer.Option(help="Added to every site's default port.")] = 0,
    only: Annotated[
        list[str] | None, typer.Option("--site", help="Serve only these sites.")
    ] = None,
    latency_ms: Annotated[
        float, typer.Option(min=0, help="Delay every page response (a slower server).")
    ] = 0.0,
) -> None:
    """Serve the embedded sites until Ctrl-C and print their URLs."""
    serve_forever(
        site_names=only or None, host=host, port_offset=port_offset, latency_ms=latency_ms
    )


def _renamed_sample(value: int | None) -> int | None:
    if value is not None:
        raise typer.BadParameter(
            "--sample was renamed --subset (N tasks; --samples k is episodes a task)"
        )
    return value


RenamedSample = Annotated[
    int | None, typer.Option("--sample", hidden=True, callback=_renamed_sample)
]
"""The old name of ``--subset``: an error that names the new one."""

SplitOpt = Annotated[
    str | None,
    typer.Option(
        "--split",
        help="train, test, heldout, val (up to 14 more unseen instances per training template, "
        "for choosing settings and checkpoints; extra is its older name) or wide (test plus "
        "val). Default: train, test and heldout.",
    ),
]
SiteOpt = Annotated[str | None, typer.Option("--site", help="Only tasks of this site.")]
TemplateOpt = Annotated[str | None, typer.Option("--template", help="Only this template.")]


def _suite(split: str | None, site: str | None, template: str | None) -> list:
    return select(build_suite(spec_for(split)), split=split, site=site, template=template)


@tasks_app.command("list")
def tasks_list(
    split: SplitOpt = None,
    site: SiteOpt = None,
    template: TemplateOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Count tasks per site, template and split.

    The "top answer" column is the share of a template's test tasks that its most common
    training answer passes (the constant-answer baseline, docs/grading.md); n/a for templates
    graded on the page or the site's state and for held-out ones.
    """

    tasks = _suite(split, site, template)
    rows = template_rows(tasks)
    if as_json:
        print(json.dumps({"templates": rows, "total": len(tasks)}, indent=1))
        return
    _table_console().print(_templates_table(rows, len(tasks)))
    per_site = Counter((t.sites[0] if len(t.sites) == 1 else "cross-site", t.split) for t in tasks)
    for (s, sp), n in sorted(per_site.items()):
        print(f"{s:16s} {'val' if sp == 'extra' else sp:6s} {n}")
    print(
        "top answer: test tasks of the template that its most common training answer passes "
        "(a policy that ignores the page scores this; docs/grading.md)"
    )


def _templates_table(rows: list[dict[str, Any]], total: int) -> Table:
    """The rows of ``template_rows`` as a table (a val column when a row has val tasks)."""
    table = Table(title=f"{total} tasks")
    cols = ["template", "kind", "steps", "heldout", "train", "test"]
    if any(r["extra"] for r in rows):
        cols.append("val")
    cols.append("top answer")
    for col in cols:
        right = col in ("train", "test", "val", "top answer")
        table.add_column(col, justify="right" if right else "left")
    for r in rows:
        top = r["top_answer"]
        table.add_row(
            r["template"],
            r["kind"],
            r["steps"],
            "yes" if r["heldout"] else "",
            str(r["train"]),
            str(r["test"]),
            *([str(r["extra"])] if "val" in cols else []),
            f"{top['test_successes']}/{top['test_tasks']}" if top else "n/a",
        )
    return table


@tasks_app.command("check")
def tasks_check(
    split: SplitOpt = None,
    site: SiteOpt = None,
    template: TemplateOpt = None,
    subset: Annotated[
        int | None,
        typer.Option("--subset", help="Check a random subset of N tasks."),
    ] = None,
    _sample: RenamedSample = None,
    concurrency: Annotated[int, typer.Option(help="Parallel episodes.")] = 4,
    seed: Annotated[int, typer.Option(help="Sampling seed.")] = 0,
    observation_format: Annotated[str, typer.Option(help="compact or html.")] = "compact",
) -> None:
    """Run the scripted experts in real Chromium; report success and every failure."""

    try:
        tasks = pick_check_tasks(_suite(split, site, template), subset, seed)
    except RequestError as e:
        raise typer.BadParameter(str(e)) from None
    obs_cfg = ObservationConfig(format=observation_format)
    with _success_bar("experts", len(tasks)) as on_result:
        results = asyncio.run(
            check_tasks(tasks, concurrency=concurrency, on_result=on_result, obs_cfg=obs_cfg)
        )
    fails = [r for r in results if r.reward != 1.0]
    for r in fails:
        print(f"FAIL {r.task_id} [{r.status}] {r.error or r.explanation}")
        for i, st in enumerate(r.steps, 1):
            print(f"    {i}. {st.action}")
    n = len(results)
    print(f"expert success: {n - len(fails)}/{n} = {100 * (n - len(fails)) / n:.1f}%")
    if fails:
        raise typer.Exit(1)


@contextlib.contextmanager
def _success_bar(label: str, total: int) -> Iterator[Callable[[Any], None]]:
    """A progress bar of ``total`` episodes with their successes; yields what to call with
    each episode's result (anything with a ``reward``)."""
    with Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[ok]}"),
        console=console,
    ) as bar:
        job = bar.add_task("check", total=total, ok="")
        ok = 0

        def on_result(r: Any) -> None:
            nonlocal ok
            ok += r.reward == 1.0
            bar.update(job, advance=1, ok=f"success {ok}")

        yield on_result


def _fail(message: str) -> typer.Exit:
    """Print a one-line error; the caller raises the returned ``Exit(2)``."""
    console.print(f"[red]error:[/red] {escape(message)}", soft_wrap=True)
    return typer.Exit(2)


_BudgetsOpt = Annotated[
    str,
    typer.Option("--budgets", help="Budgets (tokens) to show fit shares for, e.g. 300,600."),
]
_RolloutTokensOpt = Annotated[
    int,
    typer.Option(
        "--rollout-tokens",
        help="observation.max_tokens of the rollout: large, so no page is cut.",
    ),
]


@tasks_app.command("budget")
def tasks_budget(
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
    split: Annotated[str, typer.Option("--split", help="train, test or heldout.")] = "train",
    subset: Annotated[
        int | None, typer.Option("--subset", help="A random subset of N tasks.")
    ] = None,
    template: TemplateOpt = None,
    budgets: _BudgetsOpt = ",".join(str(b) for b in DEFAULT_BUDGETS),
    rollout_tokens: _RolloutTokensOpt = 4000,
    concurrency: Annotated[int, typer.Option(help="Parallel episodes.")] = 4,
    json_out: Annotated[
        str | None, typer.Option("--json", help="Also write the rows and every turn here.")
    ] = None,
) -> None:
    """Observation tokens the experts' steps need, per template: where on the page the element
    acted on (or the answer read) ends, with fit shares for given observation.max_tokens."""
    request = BudgetRequest(
        config, overrides or [], split, subset, template, budgets, rollout_tokens, concurrency
    )
    request.json_out = json_out
    try:
        report = page_budget(request)
    except RequestError as e:
        raise _fail(str(e)) from None
    _print_budget_report(report)
    if json_out:
        print(f"wrote {json_out}")


def _print_budget_report(report: BudgetReport) -> None:
    """The table, the episodes not measured, turns on a cut page, and a summary line."""
    _table_console().print(_budget_table(report))
    run, tokens = report.run, report.request.rollout_tokens
    for task_id, why in run.failures:
        console.print(f"[red]not measured[/red] {escape(task_id)}: {escape(why)}")
    cut = sum(n.cut for n in run.needs)
    if cut:
        console.print(
            f"[yellow]{cut} turns acted on a page cut at {tokens} tokens: "
            "raise --rollout-tokens[/yellow]"
        )
    print(
        f"{len(run.needs)} turns of {report.tasks - len(run.failures)} expert episodes measured "
        f"(rollout budget {tokens} tokens); {len(run.failures)} not measured; "
        f"env errors retried {run.env_errors}; {run.wall_s:.0f} s"
    )


def _budget_table(report: BudgetReport) -> Table:
    """A row per template and the ``all`` row: turns, the tokens they need, fit shares."""
    table = Table(
        title=f"observation tokens the experts' steps need ({report.request.split}, "
        f"{report.tasks} tasks, {report.format}, {report.model})"
    )
    cols = ["template", "episodes", "turns", "measured", "median", "p90", "max"]
    cols += [f"≤{b}" for b in report.budgets] + ["scrolls", "not on page"]
    for col in cols:
        table.add_column(col, justify="left" if col == "template" else "right")
    for r in report.rows:
        if r.name == "all":
            table.add_section()
        table.add_row(
            r.name,
            str(r.episodes),
            str(r.turns),
            str(r.measured),
            *("-" if v is None else str(v) for v in (r.median, r.p90, r.max)),
            *(f"{100 * r.fits[b]:.0f}%" if r.fits else "-" for b in report.budgets),
            str(r.scrolls),
            str(r.not_on_page),
        )
    return table


@tasks_app.command("export")
def tasks_export(
    out: Annotated[str, typer.Option("--out", help="JSONL file to write.")] = "data/tasks.jsonl",
    split: SplitOpt = None,
    site: SiteOpt = None,
    template: TemplateOpt = None,
) -> None:
    """Write tasks as JSONL in the WebArena config format."""
    n = write_tasks(_suite(split, site, template), out)
    print(f"wrote {n} tasks to {out}")


@app.command()
def quickstart(
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
) -> None:
    """The whole pipeline at toy scale on this machine (about 20 min on 2 cores):
    demonstrations, base model, BC, M-GRPO, report, viewer. Replaces runs/quickstart."""
    run_quickstart(config, overrides or [])


@app.command("plan-memory")
def plan_memory_cmd(
    config: ConfigOpt = None,
    gpus: Annotated[int, typer.Option(help="Training processes, one GPU each.")] = 1,
    gpu_mem_gb: Annotated[
        float, typer.Option(help="Memory of one GPU in GiB (an 80 GB card: about 79).")
    ] = 79.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
    overrides: OverridesArg = None,
) -> None:
    """Per-GPU memory of a recipe (weights, gradients, optimizer, reference, sampler, vLLM,
    activations at the token budget) and whether it fits; exits 1 when it does not."""

    cfg = load_config(config, overrides or [])
    try:
        plan = plan_memory(cfg, gpus, gpu_mem_gb)
    except ValueError as e:
        console.print(f"[red]error:[/red] {e}")
        raise typer.Exit(2) from None
    print(json.dumps(plan.to_dict(), indent=1) if as_json else format_plan(plan))
    if not plan.fits:
        raise typer.Exit(1)


_CotOpt = Annotated[
    bool,
    typer.Option(
        "--cot",
        help="Longer rationales: the experts' templated step-by-step text (task, page, "
        "element, next step), not a model's chain of thought.",
    ),
]


@app.command()
def demos(
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
    split: Annotated[str, typer.Option("--split", help="train, test or heldout.")] = "train",
    out: Annotated[str, typer.Option("--out", help="JSONL file to write.")] = "data/demos.jsonl",
    cot: _CotOpt = False,
    subset: Annotated[
        int | None, typer.Option("--subset", help="A random subset of N tasks.")
    ] = None,
    _sample: RenamedSample = None,
    concurrency: Annotated[int, typer.Option(help="Parallel episodes.")] = 4,
    template: TemplateOpt = None,
) -> None:
    """Roll the scripted experts out like the policy and write SFT-ready trajectories."""
    cfg = load_config(config, overrides or [])
    try:
        n, turns, report = write_demos(cfg, out, split, subset, template, cot, concurrency)
    except RequestError as e:
        raise typer.BadParameter(str(e)) from None
    table = Table(title=f"demonstrations ({split}{', cot' if cot else ''})")
    for col in ("template", "kept", "dropped"):
        table.add_column(col, justify="left" if col == "template" else "right")
    for name in sorted(set(report.kept) | set(report.dropped)):
        table.add_row(name, str(report.kept[name]), str(report.dropped[name]))
    _table_console().print(table)
    for task_id, why in report.failures:
        console.print(f"[red]dropped[/red] {escape(str(task_id))}: {escape(str(why))}")
    print(
        f"wrote {n} demonstrations ({turns} turns, all reward 1) to {out}; dropped "
        f"{report.total_dropped}; env errors retried {report.env_errors}; {report.wall_s:.0f} s"
    )


ResumeOpt = Annotated[
    bool, typer.Option("--resume", help="Continue from the newest checkpoint of run_dir.")
]


@app.command()
def sft(
    config: ConfigOpt = None, overrides: OverridesArg = None, resume: ResumeOpt = False
) -> None:
    """Behaviour cloning on expert demonstrations (bc.data), into <run_dir>/bc."""
    # heavy: keeps torch, transformers off the import path
    from webagent_r1.train.recipe import run_sft

    res = run_sft(load_config(config, overrides or []), resume=resume)
    held = f"{res.heldout_loss:.4f}" if res.heldout_loss is not None else "n/a"
    print(
        f"BC done: {res.steps} steps, held-out loss {held}, {res.wall_s:.0f} s; "
        f"model: {res.checkpoint / 'model'}"
    )


@app.command()
def train(
    config: ConfigOpt = None, overrides: OverridesArg = None, resume: ResumeOpt = False
) -> None:
    """Run a recipe: demonstrations, base eval, BC warm-up, M-GRPO (see configs/r1*.yaml)."""
    # heavy: keeps torch off the import path
    from webagent_r1.train.recipe import paired_line, run_recipe

    cfg = load_config(config, overrides or [])
    summary = run_recipe(cfg, resume=resume)
    print(json.dumps({"success": summary["success"], "wall_s": summary["wall_s"]}, indent=1))
    if line := paired_line(summary):
        print(line)
    print(f"summary: {os.path.join(cfg.run_dir, 'summary.json')}")


@dataclass
class EvalOptions:
    """The options of ``webagent-r1 eval`` (``_takes`` makes them the command's)."""

    config: ConfigOpt = None
    overrides: OverridesArg = None
    model: Annotated[
        str | None, typer.Option(help="Model folder or checkpoint model/ (default: config).")
    ] = None
    engine: Annotated[
        str,
        typer.Option(
            help="hf (a local model), vllm (a local model on a CUDA GPU, settings in vllm.*), "
            "expert (scripted experts) or openai."
        ),
    ] = "hf"
    tasks_source: Annotated[
        str | None,
        typer.Option(
            "--tasks",
            help="Task source: embedded, miniwob or webarena-lite (default: tasks.source).",
        ),
    ] = None
    split: Annotated[
        str | None,
        typer.Option(
            help="train, test, val (MiniWoB++ and embedded: where settings and checkpoints are "
            "chosen), heldout, wide or extra (embedded only; wide is test plus val, extra the "
            "older name of val)."
        ),
    ] = None
    final: Annotated[
        bool,
        typer.Option(
            "--final",
            help="Allow --split test: the one measurement of a configuration fixed beforehand "
            "(choices are made on val, the default split where the tasks have one); logged in "
            "<run_dir>/test-evaluations.jsonl.",
        ),
    ] = False
    site: Annotated[str | None, typer.Option(help="Only tasks of this site.")] = None
    subset: Annotated[
        int | None,
        typer.Option(
            "--subset", help="A fixed subset of N tasks, stratified over templates and sites."
        ),
    ] = None
    _sample: RenamedSample = None
    samples: Annotated[int, typer.Option(help="Episodes per task (pass@k; k > 1 samples).")] = 1
    max_turns: Annotated[
        str | None,
        typer.Option(help="Turn budget(s), e.g. 5,10,15,20,30 for a test-time-scaling sweep."),
    ] = None
    temperature: Annotated[
        float | None, typer.Option(help="Sampling temperature (default: greedy for k = 1).")
    ] = None
    thinking: Annotated[
        bool | None, typer.Option("--thinking/--no-thinking", help="Prompt (default: config).")
    ] = None
    out_dir: Annotated[
        str | None,
        typer.Option(
            help="Write eval.json and the trajectories here (each task's episodes as they end)."
        ),
    ] = None
    resume: Annotated[
        bool,
        typer.Option(
            help="Continue the unfinished evaluation in --out-dir (same command): its finished "
            "tasks are kept, the others run with the seeds they would have had."
        ),
    ] = False
    out: Annotated[
        str | None, typer.Option(help="Also write the (largest budget's) trajectories here.")
    ] = None
    screenshots: Annotated[
        bool, typer.Option(help="Save a screenshot after every action (for the viewer).")
    ] = False
    openai_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server, e.g. http://host:8000/v1.")
    ] = None
    openai_model: Annotated[str | None, typer.Option(help="The served model's name.")] = None
    openai_token_ids: Annotated[
        bool, typer.Option(help="Send token-id prompts (vLLM/SGLang completions endpoint).")
    ] = False

    def load_config(self) -> Config:
        """The recipe with the overrides, ``--thinking`` and ``--tasks`` last."""
        extra = [] if self.thinking is None else [f"agent.thinking={str(self.thinking).lower()}"]
        if self.tasks_source is not None:
            extra.append(f"tasks.source={self.tasks_source}")
        return load_config(self.config, [*(self.overrides or []), *extra])

    def request(self) -> EvalRequest:
        """The evaluation these options ask for (``--max-turns`` read as integers)."""
        budgets = None
        if self.max_turns:
            try:
                budgets = [int(x) for x in self.max_turns.split(",") if x.strip()]
            except ValueError:
                raise typer.BadParameter(
                    f"--max-turns takes integers separated by commas, got {self.max_turns!r}"
                ) from None
        return EvalRequest(
            engine=self.engine,
            model_path=self.model,
            split=self.split,
            final=self.final,
            site=self.site,
            subset=self.subset,
            samples=self.samples,
            max_turns=budgets,
            temperature=self.temperature,
            out_dir=self.out_dir,
            resume=self.resume,
            out=self.out,
            screenshots=self.screenshots,
            openai_url=self.openai_url,
            openai_model=self.openai_model,
            openai_token_ids=self.openai_token_ids,
        )


@app.command("eval")
@_takes(EvalOptions)
def eval_cmd(options: EvalOptions) -> None:
    """Evaluate a model, the experts or an API model on embedded tasks or MiniWoB++.

    Success overall, per site and per template kind with 95% Wilson intervals; pass@k with
    --samples k; a test-time-scaling sweep with --max-turns 5,10,15; eval.json and the
    trajectories in --out-dir (then `webagent-r1 report DIR` plots them). --tasks miniwob
    evaluates on MiniWoB++ seeds (docs/miniwob.md), with a row per MiniWoB++ task.
    """
    cfg = options.load_config()
    try:
        outcome = run_eval(cfg, options.request())
    except RequestError as e:
        raise typer.BadParameter(str(e)) from None
    if outcome.ledger is not None:
        console.print(f"test evaluation logged in {outcome.ledger}", markup=False, soft_wrap=True)
    stdout = _table_console()
    for res in outcome.summary["results"]:
        _print_budget(stdout, outcome, res, options.samples)
    guess = outcome.summary.get("guess_baseline")
    if guess:  # the embedded suite only
        stdout.print(baseline_line(guess["successes"], guess["tasks"]), highlight=False)
    if outcome.out_dir:
        print(f"results: {Path(outcome.out_dir) / 'eval.json'}")
    if outcome.trajectories:
        print(f"trajectories: {outcome.trajectories}")


def _print_budget(stdout: Console, outcome: EvalOutcome, res: dict[str, Any], samples: int) -> None:
    """One turn budget's results: success per site (a MiniWoB++ task per row for MiniWoB++,
    one site) with intervals, pass@k, tasks no episode scored, the commonest failures."""
    table = Table(
        title=f"{outcome.summary['engine']} on {outcome.tasks} {outcome.split} tasks, "
        f"max_turns {res['max_turns']}, {samples} sample(s) each"
    )
    key = "template" if outcome.source == "miniwob" else "site"
    for col in (key, "success", "95% CI", "episodes"):
        table.add_column(col, justify="left" if col == key else "right")
    for name, r in [*res[f"by_{key}"].items(), ("all", res)]:
        n = r.get("n", r.get("episodes"))
        table.add_row(name, f"{r['success']:.3f}", f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]", str(n))
    stdout.print(table)
    if res.get("ci_method") == "task-bootstrap":
        stdout.print("95% CI: bootstrap over tasks (a task's samples resampled together)")
    if res["pass_at_k"] is not None:
        stdout.print(f"pass@{samples} (unbiased): {res['pass_at_k']:.3f}")
    if res.get("unscored_tasks"):
        stdout.print(
            f"{len(res['unscored_tasks'])} task(s) with no scored episode (env errors "
            f"only), not in the rates: {', '.join(res['unscored_tasks'][:10])}"
        )
    for reason, n in list(res["failures"].items())[:5]:
        stdout.print(f"  [dim]{n} x {reason}[/dim]", highlight=False)


@app.command()
def experiment(
    plan: Annotated[str, typer.Argument(help="The plan, e.g. configs/experiments/NAME.yaml.")],
) -> None:
    """Run what a plan misses (train and evaluate each arm and seed; resumable), then write
    its results page: per-arm success, paired intervals, Holm-adjusted p (docs/experiments.md)."""
    done = run_experiment(load_plan(plan))
    print(f"trained {done.trained} run(s), evaluated {done.evaluated}; results: {done.results}")


@app.command()
def view(
    run_dir: Annotated[str, typer.Argument(help="Run folder (trajectory **/*.jsonl files).")],
    out: Annotated[
        str | None, typer.Option("--out", help="HTML file (default: RUN_DIR/viewer.html).")
    ] = None,
) -> None:
    """Write a self-contained HTML page to browse a run's episodes (opens from disk)."""
    path = build_viewer(run_dir, out, on_note=lambda m: console.print(f"note: {m}", markup=False))
    print(path)
    print(path.resolve().as_uri())


@app.command()
def report(
    run_dir: Annotated[
        str,
        typer.Argument(
            metavar="RUN_DIR", help="A run folder (runs/<name>) or an `eval --out-dir` folder."
        ),
    ],
) -> None:
    """Rebuild RUN_DIR/report.md and RUN_DIR/plots/*.png from the folder's logs."""
    if not os.path.isdir(run_dir):
        raise typer.BadParameter(f"no such folder: {run_dir!r}", param_hint="RUN_DIR")
    try:
        res = build_report_files(run_dir)
    except ReportError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    print(f"report: {res.report}")
    for p in res.plots:
        print(f"plot: {p}")
    for s in res.skipped:
        console.print(f"skipped {s}", markup=False)


@app.command()
def compare(
    run_dirs: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN_DIR",
            help="Two or more run folders (runs/<name>), e.g. the same recipe with different "
            "rl.curriculum.",
        ),
    ],
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="A name per RUN_DIR, in order (default: folder names)."),
    ] = None,
    out_dir: Annotated[
        str, typer.Option("--out-dir", help="Where compare.md and the plots go.")
    ] = "runs/compare",
) -> None:
    """Compare RL runs: eval success gained per hour, groups with mixed rewards (compare.md)."""
    for d in run_dirs:
        if not os.path.isdir(d):
            raise typer.BadParameter(f"no such folder: {d!r}", param_hint="RUN_DIR")
    try:
        c = compare_runs(run_dirs, label)
    except ReportError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    print(render_markdown(c))
    paths = save_comparison(c, out_dir, on_note=lambda m: console.print(m, markup=False))
    print(f"comparison: {paths[0]}")
    for p in paths[1:]:
        print(f"plot: {p}")


_SweepTurns = Annotated[
    int | None,
    typer.Option(help="Which turn budget of a --max-turns sweep (default: the largest)."),
]
_RequireExit = Annotated[
    bool,
    typer.Option(
        "--require-exit",
        help="Count a success only if its episode ended by itself (the agent's exit, or the "
        "page ending it, e.g. MiniWoB++); one that reached the right end state and ran on to "
        "the turn limit counts as a failure (as rl.reward_requires_exit trains).",
    ),
]
_MarkdownOut = Annotated[
    str | None, typer.Option("--out", help="Also write the markdown here (and .json).")
]


def _check_markdown_out(out: str | None, example: str) -> None:
    if out and (Path(out).suffix == ".json" or Path(out).is_dir()):
        raise typer.BadParameter(
            f"--out takes a markdown file such as runs/compare/{example} (the .json goes next "
            "to it)",
            param_hint="--out",
        )


def _exit_mode(md: str, require_exit: bool, problems: list[str]) -> str:
    """Say under the title when only successes that ended by themselves were counted, and
    how many each evaluation lost."""
    if not require_exit:
        return md
    title, _, rest = md.partition("\n")
    lost = [p for p in problems if p.endswith("(--require-exit)")]
    note = (
        "Successes counted only when the episode ended by itself (`--require-exit`): one "
        "that reached the right end state and ran on to the turn limit is a failure here."
        + "".join(f"\n- {p}" for p in lost)
    )
    return f"{title}\n\n{note}\n{rest}"


def _print_and_save(md: str, data: Any, out: str | None) -> None:
    """Print a comparison's markdown; with ``out``, also write it there and the JSON beside."""
    print(md)
    if not out:
        return
    path = Path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(md)
        path.with_suffix(".json").write_text(json.dumps(data, indent=1))
    except OSError as e:
        console.print(f"[red]error:[/red] cannot write {escape(out)}: {escape(str(e))}")
        raise typer.Exit(2) from None
    print(f"comparison: {path} (and {path.with_suffix('.json').name})")


@app.command("compare-evals")
def compare_evals(
    evals: Annotated[
        list[str],
        typer.Argument(
            metavar="EVAL",
            help="The baseline first, then the others: `eval --out-dir` folders or trajectory "
            "JSONL files (e.g. RUN/rl/eval/step-000012.jsonl) of the same tasks.",
        ),
    ],
    label: Annotated[
        list[str] | None,
        typer.Option("--label", help="A name per EVAL, in order (default: folder names)."),
    ] = None,
    max_turns: _SweepTurns = None,
    require_exit: _RequireExit = False,
    out: _MarkdownOut = None,
) -> None:
    """Paired comparison, task by task: B − A with a bootstrap interval, sign tests, per site."""

    _check_markdown_out(out, "paired.md")
    try:
        comparisons, problems = compare_files(evals, label, max_turns, require_exit=require_exit)
    except ReportError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    for p in problems:
        console.print(f"note: {p}", markup=False)
    md = _exit_mode(render_paired_markdown(comparisons), require_exit, problems)
    _print_and_save(md, to_json(comparisons), out)


@app.command("compare-arms")
def compare_arms_cmd(
    arm_a: Annotated[
        list[str],
        typer.Option(
            "-a",
            "--arm-a",
            help="An evaluation of a run of the baseline arm (`eval --out-dir` folder or "
            "trajectory JSONL); repeat for each run.",
        ),
    ],
    arm_b: Annotated[
        list[str],
        typer.Option("-b", "--arm-b", help="An evaluation of a run of the other arm; repeat."),
    ],
    label_a: Annotated[str, typer.Option("--label-a", help="Name of arm A.")] = "A",
    label_b: Annotated[str, typer.Option("--label-b", help="Name of arm B.")] = "B",
    max_turns: _SweepTurns = None,
    require_exit: _RequireExit = False,
    out: _MarkdownOut = None,
) -> None:
    """Arms of training runs on the same tasks: B − A with an interval over runs and tasks."""
    _check_markdown_out(out, "arms.md")
    try:
        c = compare_arms(arm_a, arm_b, label_a, label_b, max_turns, require_exit=require_exit)
    except ReportError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}")
        raise typer.Exit(2) from None
    for p in c.problems:
        console.print(f"note: {p}", markup=False)
    md = _exit_mode(render_arms_markdown(c), require_exit, c.problems)
    _print_and_save(md, arms_to_json(c), out)


@app.command()
def outcomes(
    source: Annotated[
        str,
        typer.Argument(
            metavar="EVAL",
            help="An `eval --out-dir` folder or a trajectory JSONL file.",
        ),
    ],
    out: Annotated[
        str, typer.Option("--out", help="The JSONL file to write (e.g. docs/results/x.jsonl).")
    ],
    max_turns: _SweepTurns = None,
) -> None:
    """Keep of an evaluation only what a paired comparison reads: a small file to publish.

    One row per episode (task, reward, how it ended, turns taken); `compare-evals` and
    `compare-arms` accept the file in place of the evaluation.
    """
    dest = Path(out)
    if dest.suffix != ".jsonl" or dest.is_dir():
        raise typer.BadParameter(f"--out takes a .jsonl file, not {out!r}", param_hint="--out")
    try:
        rows = write_outcomes(source, out, max_turns)
    except ReportError as e:
        raise _fail(str(e)) from None
    except OSError as e:
        raise _fail(f"cannot write {out}: {e}") from None
    ok = sum(r["reward"] == 1.0 for r in rows)
    tasks = len({r["task_id"] for r in rows})
    print(f"outcomes: {dest} ({len(rows)} episodes of {tasks} tasks, {ok} successes)")


_LoopRepeatsOpt = Annotated[
    int,
    typer.Option("--loop-repeats", help="Times the same action from the same state makes a loop."),
]


@app.command()
def failures(
    target: Annotated[
        str,
        typer.Argument(
            metavar="DIR",
            help="A run folder (its last rl/eval and rl/rollouts step), an `eval --out-dir` "
            "folder, or one trajectory JSONL file.",
        ),
    ],
    template: Annotated[
        str | None, typer.Option("--template", help="Only the episodes of this template.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    loop_repeats: _LoopRepeatsOpt = LOOP_REPEATS,
) -> None:
    """Count the kinds of failure of the failed episodes, overall and per template."""
    try:
        tables, notes = collect_failures(target, template, loop_repeats)
    except (ReportError, FileNotFoundError) as e:
        raise _fail(str(e)) from None
    for n in notes:
        console.print(f"note: {n}", markup=False)
    if as_json:
        out = {
            "kinds": list(FAILURE_KINDS),
            "loop_repeats": loop_repeats,
            "sources": [t.to_dict() for t in tables],
        }
        print(json.dumps(out, indent=1))
        return
    for t in tables:
        _print_failures(t)


def _print_failures(t: Any) -> None:
    """One source's failures: the kinds with their shares, then the counts per template."""
    out = _table_console()
    files = ", ".join(t.files)
    title = t.label if files == t.label else f"{t.label}: {files}"
    o = t.overall
    if not o.failures:
        out.print(
            f"{title}: no failed episode ({o.successes} successes, {o.env_errors} env errors)",
            markup=False,
        )
        return
    out.print(_failure_kinds(title, o))
    out.print(_failures_per_template(t))
    left_out = sum(1 for c in t.by_template.values() if not c.failures)
    if left_out:
        out.print(f"templates without a failed episode: {left_out}", markup=False)
    if t.bad_lines:
        first = f" (first: {t.first_bad})" if t.first_bad else ""
        console.print(
            f"note: {t.label}: {t.bad_lines} line(s) that were not trajectories skipped{first}",
            markup=False,
        )


def _failure_kinds(title: str, o: Any) -> Table:
    """The kinds of failure with their shares (headers that wrap at spaces, so the table
    fits a terminal; --json has the exact names)."""
    kinds = Table(title=escape(title), caption=escape(_mean_turns(o)))
    kinds.add_column("Kind")
    kinds.add_column("Episodes", justify="right")
    kinds.add_column("Share of failed", justify="right")
    for k in FAILURE_KINDS:
        share = o.share(k) or 0.0
        last = k == FAILURE_KINDS[-1]
        kinds.add_row(k, str(o.kinds[k]), f"{100 * share:.1f}%", end_section=last)
    kinds.add_row("failed", str(o.failures), "100.0%", style="bold")
    kinds.add_row("successful", str(o.successes), "")
    kinds.add_row("env errors (not failures)", str(o.env_errors), "")
    return kinds


def _failures_per_template(t: Any) -> Table:
    """Failed episodes per template, with only the kinds that occur (the table must fit a
    terminal)."""
    o = t.overall
    keep = [i for i, c in enumerate(COLUMNS) if c not in FAILURE_KINDS or o.kinds[c]]
    rows = [row_cells(name, c, shares=False) for name, c in t.rows()]
    rows.append(row_cells("all", o, shares=False))
    rows = [[r[i] for i in keep] for r in rows]
    per = Table(title=escape(f"{t.label}: failed episodes per template"))
    header = [COLUMNS[i].replace("_", " ") for i in keep]
    widest = max(len(r[0]) for r in rows)
    per.add_column(header[0], no_wrap=True, min_width=min(widest, 48), overflow="fold")
    for col in header[1:]:
        per.add_column(col, justify="right")
    for i, cells in enumerate(rows):
        last = i == len(rows) - 1
        per.add_row(*map(escape, cells), style="bold" if last else None)
    return per


_CreditTemplateOpt = Annotated[
    bool,
    typer.Option(
        "--template",
        help="Also a table per template, and each template's rollouts: groups, trained groups, "
        "episodes, successes.",
    ),
]
_StepsOpt = Annotated[
    str | None,
    typer.Option(
        "--steps",
        help="Only these updates, as the run numbers them: 9-12, or 5 (default: all).",
    ),
]


def _step_span(text: str | None) -> tuple[int, int] | None:
    """``"9-12"`` → (9, 12), ``"5"`` → (5, 5); a one-line error otherwise."""
    if text is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text)
    if not m or int(m[1]) < 1 or int(m[2] or m[1]) < int(m[1]):
        raise typer.BadParameter(
            f"{text!r}: give updates as FIRST-LAST or one step, e.g. 9-12 or 5 (from 1)",
            param_hint="--steps",
        )
    return int(m[1]), int(m[2] or m[1])


@app.command()
def credit(
    target: Annotated[
        str, typer.Argument(metavar="RUN", help="A run folder of `webagent-r1 train` (M-GRPO).")
    ],
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
    template: _CreditTemplateOpt = False,
    steps: _StepsOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Where M-GRPO's credit went: each trained turn's share of the policy gradient (its
    advantage times its normalised weight), summed by action kind.

    Recomputed from the run's saved rollouts with the settings it trained with
    (``<run>/config.yaml``, or its newest ``config.resume-<n>.yaml``) and the overrides
    given; change rl.advantage / rl.normalization to read the same rollouts under another
    credit assignment. --config replaces the run's settings (a run from before they were
    saved needs it); settings that change the credit and differ from the run's are named.
    """
    # heavy: the credit module imports the trainer's functions (torch) when it runs
    from webagent_r1.train.credit import credit_report, credit_settings

    span = _step_span(steps)
    try:
        cfg, table = credit_report(target, config, overrides or [], span, on_note=_say)
    except (ReportError, OSError) as e:
        raise _fail(str(e)) from None
    if as_json:
        print(json.dumps({"settings": credit_settings(cfg), **table.to_dict()}, indent=1))
        return
    _print_credit(target, span, cfg, table, template)


def _say(line: str) -> None:
    """Print a note on stderr as it is (no markup, not wrapped)."""
    console.print(line, markup=False, soft_wrap=True)


def _print_credit(
    target: str, span: tuple[int, int] | None, cfg: Config, table: Any, template: bool
) -> None:
    """The credit per action kind, overall and (``template``) per template, then each
    template's rollouts."""
    rl = cfg.rl
    head = (
        f"{target}"
        + (f" (steps {span[0]}-{span[1]})" if span else "")
        + f": {table.steps} step(s), {table.groups_used} group(s) trained, "
        f"{table.groups_skipped} without gradient; rl.advantage={rl.advantage}, "
        f"rl.normalization={rl.normalization}"
        + (", rl.reward_requires_exit=true" if rl.reward_requires_exit else "")
    )
    out = _table_console()
    out.print(_credit_kinds(head, table.by_kind, table.total))
    if template:
        for name, rows in sorted(table.by_template.items()):
            out.print(_credit_kinds(name, rows, table.total))
    if template and table.rollouts:
        t = Table(
            title="rollouts per template",
            caption="trained: groups the update used (rl.drop_equal_groups: rewards not all equal)",
        )
        for col in ("Template", "Groups", "Trained", "Episodes", "Successes"):
            t.add_column(col, justify="left" if col == "Template" else "right")
        for name, r in sorted(table.rollouts.items(), key=lambda kv: (-kv[1].groups, kv[0])):
            t.add_row(
                escape(name), str(r.groups), str(r.trained), str(r.episodes), str(r.successes)
            )
        out.print(t)


def _credit_kinds(title: str, rows: dict[str, Any], total: Any) -> Table:
    """A table of credit per action kind, shares of the whole run's positive and negative."""
    t = Table(
        title=escape(title), caption="shares: of the whole run's positive and negative credit"
    )
    for col in ("Action", "Turns", "Positive", "Negative", "Net", "Share of +", "Share of -"):
        t.add_column(col, justify="left" if col == "Action" else "right")
    for kind, c in sorted(rows.items(), key=lambda kv: kv[1].net):
        t.add_row(
            escape(kind),
            str(c.turns),
            f"{c.positive:+.3f}",
            f"{c.negative:+.3f}",
            f"{c.net:+.3f}",
            f"{100 * c.positive / total.positive:.0f}%" if total.positive else "–",
            f"{100 * c.negative / total.negative + 0.0:.0f}%" if total.negative else "–",
        )
    return t


def _mean_turns(c: Any) -> str:
    """Mean turns of the failed and the successful episodes, in words."""

    def fmt(x: float | None) -> str:
        return "–" if x is None else f"{x:.1f}"

    return f"mean turns: failed {fmt(c.mean_turns_failed)}, successful {fmt(c.mean_turns_success)}"


bench_app = typer.Typer(help="Performance benchmarks (see benchmarks/).", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


def _benchmark(name: str) -> Any:
    """The module ``benchmarks/<name>.py`` of the source checkout."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} not found: run the benchmark from a source checkout of webagent-r1"
        )
    spec = importlib.util.spec_from_file_location(f"webagent_r1_bench_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@bench_app.command("rollout")
def bench_rollout(
    engine: Annotated[str, typer.Option(help="hf, fixed or both.")] = "both",
    tasks: Annotated[int | None, typer.Option(help="Tasks (default per setting).")] = None,
    group: Annotated[int | None, typer.Option(help="Group size G.")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Episodes at once.")] = None,
    max_turns: Annotated[int | None, typer.Option(help="Turn limit.")] = None,
    max_new_tokens: Annotated[int | None, typer.Option(help="Tokens per turn (hf).")] = None,
    latency_ms: Annotated[float, typer.Option(help="Fixed engine latency.")] = 50.0,
    seed: Annotated[int, typer.Option(help="Task sample and sampling seed.")] = 0,
    browsers: Annotated[int, typer.Option(help="Chromium processes the envs spread over.")] = 1,
    ray_workers: Annotated[
        int, typer.Option(help="Run the browsers in N Ray workers (0: local).")
    ] = 0,
    site_latency_ms: Annotated[
        float, typer.Option(min=0, help="Delay of every site page response.")
    ] = 0.0,
) -> None:
    """Async vs lockstep rollout throughput (runs benchmarks/rollout.py)."""
    module = _benchmark("rollout")
    out = asyncio.run(
        module.run(
            engine,
            tasks,
            group,
            concurrency,
            max_turns,
            max_new_tokens,
            latency_ms,
            seed,
            progress=True,
            browsers=browsers,
            ray_workers=ray_workers,
            site_latency_ms=site_latency_ms,
        )
    )
    print(json.dumps(out, indent=1))


@bench_app.command("rollout-step")
def bench_rollout_step(
    overrides: Annotated[
        list[str] | None, typer.Argument(help="Config overrides as section.key=value.")
    ] = None,
    config: Annotated[str, typer.Option("--config", "-c", help="YAML recipe.")] = "configs/r1.yaml",
    model: Annotated[
        str | None, typer.Option(help="Checkpoint or model folder to roll out.")
    ] = None,
    tasks: Annotated[int, typer.Option(help="Training tasks (x rollout.group_size).")] = 8,
    reps: Annotated[int, typer.Option(help="Rounds over the variants.")] = 1,
    variants: Annotated[
        str, typer.Option(help="Comma-separated: keep, drop, drop+early, cache.")
    ] = "keep,drop,drop+early",
    seed: Annotated[int, typer.Option(help="Task sample and sampling seed.")] = 0,
) -> None:
    """One M-GRPO step's rollout under HF engine decoding variants (runs
    benchmarks/rollout_step.py)."""
    module = _benchmark("rollout_step")
    names = tuple(v.strip() for v in variants.split(","))
    if any(v not in module.VARIANTS for v in names):
        raise typer.BadParameter(f"--variants among {', '.join(module.VARIANTS)}, not {variants!r}")
    try:  # sizes, the config and the task count, before anything starts
        module.prepare(config, tasks, reps, seed, tuple(overrides or ()))
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    out = asyncio.run(module.run(config, model, tasks, reps, names, seed, tuple(overrides or ())))
    print(json.dumps(out, indent=1))


@bench_app.command("decode")
def bench_decode(
    model: Annotated[str, typer.Option(help="Model name or folder.")] = "smollm2-135m-instruct",
    batch: Annotated[str, typer.Option(help="Comma-separated batch sizes.")] = "1,12,48",
    prompt_len: Annotated[int, typer.Option(help="Tokens per prompt.")] = 750,
    new_tokens: Annotated[int, typer.Option(help="Tokens decoded per row.")] = 64,
    reps: Annotated[int, typer.Option(help="Timed decodes per side.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the prompt token ids.")] = 0,
    compare: Annotated[
        str,
        typer.Option(
            help="reserve: reserved KV cache vs concatenation; drop: dropping finished rows "
            "vs keeping them (chat prompts that stop at different lengths); prefill: prompts "
            "of unequal length prefilled in length groups vs one padded batch."
        ),
    ] = "reserve",
) -> None:
    """HF engine decoding: reserved KV cache vs concatenation, dropping finished rows vs
    keeping them, or length-grouped prefill vs one padded batch (runs benchmarks/decode.py)."""
    if compare not in ("reserve", "drop", "prefill"):
        raise typer.BadParameter(f"--compare is reserve, drop or prefill, not {compare!r}")

    try:
        batches = tuple(int(x) for x in batch.split(","))
    except ValueError:
        raise typer.BadParameter(f"--batch takes integers like 1,12,48, not {batch!r}") from None
    module = _benchmark("decode")
    try:  # run() checks the sizes before it loads the model
        if compare == "drop":
            out = module.run_drop(model, batches, prompt_len, new_tokens, reps)
        elif compare == "prefill":
            out = module.run_prefill(model, batches, prompt_len, new_tokens, reps, seed)
        else:
            out = module.run(model, batches, prompt_len, new_tokens, reps, seed)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    print(json.dumps(out, indent=1))


@bench_app.command("trainer")
def bench_trainer(
    prompts: Annotated[int, typer.Option(help="B, prompts (groups).")] = 2,
    group: Annotated[int, typer.Option(help="G, completions per prompt.")] = 4,
    prompt_len: Annotated[int, typer.Option(help="P, tokens per prompt.")] = 512,
    completion_len: Annotated[int, typer.Option(help="C, tokens per completion.")] = 64,
    reps: Annotated[int, typer.Option(help="Timed updates per side.")] = 3,
    seed: Annotated[int, typer.Option(help="Seed of the token ids.")] = 0,
    trl: Annotated[bool, typer.Option(help="Include TRL's GRPOTrainer (bench extra).")] = True,
    recompute: Annotated[bool, typer.Option(help="Also time rl.old_logprobs=recompute.")] = True,
    unshared: Annotated[
        bool, typer.Option(help="Also time train.share_prompts=false and share_prefix=false.")
    ] = True,
    overrides: OverridesArg = None,
) -> None:
    """One M-GRPO update vs TRL's GRPOTrainer: tokens/s, peak memory (benchmarks/trainer.py)."""
    if trl and importlib.util.find_spec("trl") is None:
        console.print(
            "[red]error:[/red] TRL is not installed: pip install -e '.\\[bench]' (or pass --no-trl)"
        )
        raise typer.Exit(2)
    module = _benchmark("trainer")
    out = module.run(
        prompts,
        group,
        prompt_len,
        completion_len,
        reps,
        seed,
        trl,
        recompute,
        overrides,
        unshared=unshared,
    )
    print(json.dumps(out, indent=1))


def user_error_types() -> tuple[type[BaseException], ...]:
    """Exceptions the CLI prints as a one-line error instead of a traceback."""
    # heavy: policy.vllm and train.recipe import torch, kept off the CLI's import path
    from webagent_r1.policy.vllm import VLLMUnavailableError
    from webagent_r1.train.recipe import RunExistsError  # heavy: torch

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
        TaskError,
        PlanError,  # a LoadError too; named for the reader
        TestSplitError,  # eval --split test without --final
        RequestError,  # options that do not fit together or match nothing
    ]
    return tuple(types)


def main() -> None:
    """Console entry point: run the app, turning user errors into one-line messages."""
    try:
        app()
    except user_error_types() as e:
        if os.environ.get("WEBAGENT_R1_DEBUG"):
            raise
        # escaped: the message quotes user input, which must not be read as rich markup;
        # not wrapped at the terminal's width: one error, one line
        console.print(f"[red]error:[/red] {escape(str(e))}", soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        sys.exit(130)


if __name__ == "__main__":
    main()
