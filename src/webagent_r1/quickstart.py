"""``webagent-r1 quickstart``: the newest end-to-end path, on this machine, in minutes.

Today that is: the embedded sites on 127.0.0.1, real headless Chromium, the bundled
SmolLM2-135M-Instruct model on the CPU acting as a web agent (thinking prompt, dynamic context
compression) on a few test tasks of the embedded suite, each graded by its programmatic
evaluator; then the scripted experts on the same tasks, to show they are solvable. Every turn
is printed. Training (BC, M-GRPO) joins here when the trainer lands.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from webagent_r1.browser import Browser
from webagent_r1.config import load_config
from webagent_r1.env import WebEnv
from webagent_r1.policy.base import SamplingParams
from webagent_r1.policy.hf import HFEngine
from webagent_r1.policy.models import prepare_model
from webagent_r1.rollout import run_episode
from webagent_r1.sites.episodes import EmbeddedSites
from webagent_r1.tasks.check import run_expert
from webagent_r1.tasks.evaluators import evaluate
from webagent_r1.tasks.suite import build_suite, select
from webagent_r1.types import Task

console = Console()


def pick_tasks(n: int) -> list[Task]:
    """One test task per template, round-robin over sites, deterministic."""
    tasks = select(build_suite(), split="test")
    firsts: dict[str, Task] = {}
    for t in tasks:
        firsts.setdefault(t.extra["template"], t)
    by_site: dict[str, list[Task]] = {}
    for t in firsts.values():
        by_site.setdefault(t.sites[0], []).append(t)
    out: list[Task] = []
    while len(out) < n and any(by_site.values()):
        for lst in by_site.values():
            if lst and len(out) < n:
                out.append(lst.pop(0))
    return out


async def run_quickstart(config: str | None, overrides: list[str], episodes: int = 3) -> None:
    """Run the quickstart; writes trajectories to ``<run_dir>/quickstart.jsonl``."""
    cfg = load_config(config, ["env.max_turns=6", "run_dir=runs/quickstart", *overrides])
    torch.manual_seed(cfg.seed)
    t_start = time.perf_counter()
    console.rule("[bold]webagent-r1 quickstart")
    prepare_model(cfg.model.name, progress=lambda m: console.print(f"[dim]{m}"))
    tasks = pick_tasks(episodes)
    if not tasks:
        console.print("[red]no tasks in the embedded suite")
        return
    console.print(f"loading {cfg.model.name} …")
    engine = HFEngine.from_config(cfg.model)
    tok = engine.tokenizer
    params = SamplingParams(temperature=0.0, max_new_tokens=160, seed=cfg.seed)

    def count_tokens(text: str) -> int:
        return len(tok(text, add_special_tokens=False).input_ids)

    sites = EmbeddedSites.start()
    browser = await Browser.launch(cfg.browser)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        env = WebEnv(browser, cfg.env, cfg.observation, sites, evaluate, count_tokens)
        with (run_dir / "quickstart.jsonl").open("w") as f:
            for i, task in enumerate(tasks, 1):
                console.rule(f"episode {i}/{len(tasks)}: {task.task_id}")
                console.print(f"[bold]Task:[/bold] {task.intent}")
                traj = await run_episode(env, engine, tok, task, cfg.agent, params)
                for k, turn in enumerate(traj.turns):
                    act = turn.action.raw if turn.action else "(no valid action)"
                    console.print(
                        f"  turn {k}: {act[:100]}"
                        + (f"  [red]error: {turn.error[:80]}[/red]" if turn.error else "")
                    )
                expert = await run_expert(env, task)
                console.print(
                    f"  model reward {traj.reward:.0f} ({traj.status}); "
                    f"expert reward {expert.reward:.0f} in {len(expert.steps)} steps"
                )
                f.write(json.dumps(traj.to_dict()) + "\n")
                rows.append((task, traj.reward, expert.reward, len(traj.turns)))
        await env.close()
    finally:
        await browser.close()
        sites.stop()

    table = Table(title="quickstart results (base model, greedy)")
    for col in ("task", "site", "model", "expert", "turns"):
        table.add_column(col)
    for task, r_model, r_expert, turns in rows:
        table.add_row(
            str(task.task_id), task.sites[0], f"{r_model:.0f}", f"{r_expert:.0f}", str(turns)
        )
    console.print(table)
    n = len(rows)
    console.print(
        f"base model success {sum(r[1] for r in rows):.0f}/{n}, experts "
        f"{sum(r[2] for r in rows):.0f}/{n}; {time.perf_counter() - t_start:.0f} s; "
        f"trajectories in {run_dir / 'quickstart.jsonl'}"
    )
    console.print(
        "[dim]The base model does not follow the action format zero-shot; behaviour cloning "
        "and M-GRPO training (coming) are what make it an agent.[/dim]"
    )
