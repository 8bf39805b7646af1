"""CLI smoke tests: the commands that exist, offline model preparation, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "webagent_r1.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_help_lists_commands() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    for cmd in ("quickstart", "model", "sites", "tasks"):
        assert cmd in out.stdout


def test_bad_override_is_one_line_error_without_traceback() -> None:
    out = run_cli("quickstart", "env.max_turn=3")
    assert out.returncode == 2
    assert "did you mean 'max_turns'" in out.stderr
    assert "Traceback" not in out.stderr + out.stdout


def test_missing_config_file() -> None:
    out = run_cli("quickstart", "--config", "no/such.yaml")
    assert out.returncode == 2 and "not found" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("command", [["tasks", "check"], ["demos"], ["eval"]])
def test_the_old_sample_flag_names_its_new_name(command: list[str]) -> None:
    out = run_cli(*command, "--sample", "3")
    assert out.returncode == 2, out.stderr
    assert "--sample was renamed --subset" in " ".join(out.stderr.split())
    assert "Traceback" not in out.stderr


@pytest.mark.model
def test_model_prepare_is_offline_and_idempotent() -> None:
    out = run_cli("model", "prepare")
    assert out.returncode == 0, out.stderr
    assert "smollm2-135m-instruct" in out.stdout
    listing = run_cli("model", "list")
    assert "prepared" in listing.stdout


def test_tasks_list_json_and_export(tmp_path) -> None:
    out = run_cli("tasks", "list", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["total"] == sum(r["train"] + r["test"] for r in data["templates"])
    assert not any(r["extra"] for r in data["templates"])
    rows = {r["template"]: r for r in data["templates"]}
    # the training answer "2" is the answer of 4 of the 6 test tasks; nav/held-out: none
    assert rows["shopping.search_result_count"]["top_answer"] == {
        "answer": "2",
        "test_successes": 4,
        "test_tasks": 6,
    }
    assert rows["shopping.product_page"]["top_answer"] is None
    assert rows["shopping.compare_ratings"]["top_answer"] is None
    table = run_cli("tasks", "list", "--site", "gitlab")
    assert table.returncode == 0, table.stderr
    assert "top answer" in table.stdout
    [role] = [line for line in table.stdout.splitlines() if "gitlab.member_role " in line]
    assert role.rstrip(" │").endswith("4/6")
    out = run_cli("tasks", "list", "--json", "--split", "wide", "--site", "reddit")
    assert out.returncode == 0, out.stderr
    wide = json.loads(out.stdout)
    assert wide["total"] == sum(r["test"] + r["extra"] for r in wide["templates"])
    assert any(r["extra"] for r in wide["templates"])
    sites = {s for r in data["templates"] for s in r["sites"]}
    assert {"shopping", "shopping_admin"} <= sites
    dest = tmp_path / "tasks.jsonl"
    out = run_cli("tasks", "export", "--split", "test", "--site", "shopping", "--out", str(dest))
    assert out.returncode == 0, out.stderr
    from webagent_r1.tasks import load_tasks

    tasks = load_tasks(dest)
    assert tasks and all(t.split == "test" and "shopping" in t.sites for t in tasks)


@pytest.mark.parametrize(
    "override", ["env.max_turns=x[/red]", "[/red]=1", "env.max_turns=nan", "seed=" + "x" * 150]
)
def test_errors_quoting_user_text_print_it_verbatim(override: str) -> None:
    """Rich markup in user input is printed as text, not read as markup (a MarkupError)."""
    out = run_cli("quickstart", override)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr + out.stdout
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert override.split("=")[0 if override.startswith("[") else 1][:50] in lines[0]
