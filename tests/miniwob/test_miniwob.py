"""MiniWoB++ through our env: the task list, seed splits, errors, and real episodes.

The episode tests run hand-written action sequences (our action syntax, element ids looked up
in the observation by their label) through the rollout itself (``evaluate_policy`` over a
``LocalEnvPool`` of ``WebEnv``) in real Chromium: the correct sequences get reward 1, the
wrong ones 0. The ``miniwob`` package must be installed (``scripts/setup.sh`` does it); a
missing package fails these tests with the install command, it never skips them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.fakes import FakeTokenizer
from webagent_r1.agent.actions import format_action
from webagent_r1.browser import Browser
from webagent_r1.config import TASK_SOURCES, ConfigError, EnvConfig, ObservationConfig, load_config
from webagent_r1.evaluation.run import evaluate_policy
from webagent_r1.policy.base import Completion, SamplingParams
from webagent_r1.rollout.env import WebEnv
from webagent_r1.rollout.pool import LocalEnvPool
from webagent_r1.sources import SOURCES, EmbeddedSource, TaskSourceError, task_source
from webagent_r1.sources import miniwob as mw
from webagent_r1.sources.embedded.suite import tasks_for
from webagent_r1.types import Action, Task

TOK = FakeTokenizer()

# ------------------------------------------------------------------------------------------
# Pure: the task list, the splits, the registry and the errors (no browser).
# ------------------------------------------------------------------------------------------


def test_every_package_task_is_supported_or_excluded_with_a_reason() -> None:
    package = mw.package_task_names()  # fails with the install command when missing
    assert len(package) == 125
    assert sorted([*mw.SUPPORTED, *mw.EXCLUDED]) == package
    assert not set(mw.SUPPORTED) & set(mw.EXCLUDED)
    assert list(mw.SUPPORTED) == sorted(mw.SUPPORTED)
    assert all(len(why) > 20 for why in mw.EXCLUDED.values())
    for name in ("click-button", "enter-text", "click-checkboxes", "choose-list"):
        assert name in mw.SUPPORTED
    for name in ("drag-box", "draw-line", "click-color", "use-slider"):
        assert name in mw.EXCLUDED


def test_unsupported_and_unknown_tasks_are_clear_errors() -> None:
    with pytest.raises(mw.MiniWoBError, match="'drag-box' is not supported: needs drag"):
        mw.MiniWoBSource(["click-button", "drag-box"])
    with pytest.raises(mw.MiniWoBError, match="did you mean 'click-button'"):
        mw.MiniWoBSource(["click-buton"])
    cfg = load_config(None, ["tasks.source=miniwob", "tasks.miniwob.tasks=[use-colorwheel]"])
    with pytest.raises(mw.MiniWoBError, match="colour is only visual"):
        task_source(cfg)


def test_seed_splits_never_overlap() -> None:
    cfg = load_config(None, ["tasks.source=miniwob"])
    source = task_source(cfg)
    test, train, val = source.tasks("test"), source.tasks("train"), source.tasks("val")
    seeds = {
        split: {t.extra["miniwob"]["seed"] for t in ts}
        for split, ts in (("test", test), ("train", train), ("val", val))
    }
    assert seeds["test"] == set(range(0, 50)) and min(seeds["train"]) == 1000
    assert seeds["val"] == set(range(2000, 2050))
    assert not seeds["test"] & seeds["train"]
    assert not (seeds["test"] | seeds["train"]) & seeds["val"]
    assert not {t.task_id for t in test} & {t.task_id for t in train}
    assert {t.split for t in val} == {"val"}
    assert len(test) == 50 * len(mw.SUPPORTED)
    assert {t.split for t in test} == {"test"} and {t.split for t in train} == {"train"}
    # Overlapping ranges, in any order, are a config error that says how to fix it.
    for ranges in (
        ["tasks.miniwob.train_seeds=[40, 90]"],
        ["tasks.miniwob.test_seeds=[1100, 1101]"],
        ["tasks.miniwob.val_seeds=[1150, 1250]"],
        ["tasks.miniwob.val_seeds=[0, 10]"],
    ):
        with pytest.raises(ConfigError, match="overlap"):
            load_config(None, ranges)
    with pytest.raises(ConfigError, match=r"\[start, stop\)"):
        load_config(None, ["tasks.miniwob.test_seeds=[5, 5]"])
    with pytest.raises(ValueError, match="train, test and val"):
        source.tasks("heldout")


def test_source_registry_and_config() -> None:
    assert tuple(SOURCES) == TASK_SOURCES
    assert load_config().tasks.source == "embedded"
    with pytest.raises(ConfigError, match="embedded, miniwob, webarena-lite"):
        load_config(None, ["tasks.source=miniwob++"])
    cfg = load_config(None, ["tasks.source=miniwob"])
    with pytest.raises(TaskSourceError, match="choose one of embedded, miniwob"):
        task_source(cfg, "nope")
    # The trainer and demonstrations still take embedded tasks only: no silent fallback.
    with pytest.raises(ValueError, match="embedded suite only"):
        tasks_for(cfg, "train")
    embedded = task_source(load_config(None, ["tasks.difficulty=1-2"]))
    assert isinstance(embedded, EmbeddedSource) and embedded.difficulty == ["1-2"]


def test_cli_names_bad_sources_in_one_line() -> None:
    for args, expected in (
        (["--tasks", "minwob"], "tasks.source must be one of embedded, miniwob"),
        (["--tasks", "miniwob", "--split", "heldout"], "have splits train, test"),
        (["--tasks", "miniwob", "tasks.miniwob.tasks=[drag-box]"], "is not supported"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "webagent_r1.cli", "eval", *args],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 2, out.stderr
        assert expected in " ".join(out.stderr.split()), out.stderr
        assert "Traceback" not in out.stderr


def test_missing_package_names_the_install_command(monkeypatch) -> None:
    monkeypatch.setattr(mw.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(mw.MiniWoBError, match=r"pip install --no-deps miniwob==1\.1\.0"):
        mw.html_dir()
    with pytest.raises(mw.MiniWoBError, match="not installed"):
        mw.MiniWoBSource(["click-button"]).start()


# ------------------------------------------------------------------------------------------
# Real episodes in Chromium.
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def source() -> Iterator[mw.MiniWoBSource]:
    """The MiniWoB++ pages on a local port (the whole module shares one server)."""
    src = mw.MiniWoBSource(
        [
            "click-button",
            "enter-text",
            "click-checkboxes",
            "choose-list",
            "click-option",
            "login-user",
        ]
    )
    with src:
        yield src


def _task(name: str, seed: int) -> Task:
    return mw.miniwob_tasks("test", [name], range(seed, seed + 1))[0]


def element(obs_text: str, label: str) -> str:
    """The id of the first element shown as ``[id] <label>`` (exactly, or followed by more)."""
    for line in obs_text.splitlines():
        m = re.match(r"\[(\d+)\] (.*)$", line.strip())
        if m and (m[2] == label or m[2].startswith(label + " ")):
            return m[1]
    raise AssertionError(f"no element {label!r} in the observation:\n{obs_text}")


# A hand-written step: (action, element label or None, argument or None).
Step = tuple[str, str | None, str | None]


def render(step: Step, obs_text: str) -> str:
    """The step in our action syntax, as a policy would answer."""
    kind, label, arg = step
    target = element(obs_text, label) if label is not None else None
    return f"<think>Next step.</think><answer>{format_action(Action(kind, target, arg))}</answer>"


class ScriptPolicy:
    """Replays hand-written steps per task id through the rollout's ``Policy`` protocol."""

    def __init__(self, scripts: dict[str, list[Step]]) -> None:
        self.scripts = scripts

    def begin(self, task: Task) -> dict[str, Any]:
        return {"steps": list(self.scripts[str(task.task_id)])}

    async def act(
        self, states: list[dict[str, Any]], inputs: list[Any], params: SamplingParams
    ) -> list[Completion]:
        out = []
        for state, inp in zip(states, inputs, strict=True):
            text = render(state["steps"].pop(0), inp.observation.text)
            ids = TOK.encode(text) + [TOK.eos_token_id]
            out.append(Completion(ids, [0.0] * len(ids), text, "stop"))
        return out

    def end(self, state: Any) -> None:
        return None


# (task, seed, the instruction that seed gives, a correct sequence, a wrong sequence)
CASES: list[tuple[str, int, str, list[Step], list[Step]]] = [
    (
        "click-button",
        3,
        'Click on the "no" button.',
        [("Click", 'button "no"', None)],
        [("Click", 'button "Okay"', None)],
    ),
    (
        "enter-text",
        1,
        'Enter "Jerald" into the text field and press Submit.',
        [("Type", "textbox", "Jerald"), ("Click", 'button "Submit"', None)],
        [("Type", "textbox", "Gerald"), ("Click", 'button "Submit"', None)],
    ),
    (
        # The wrong sequence ticks 3 of the 4: the page's raw reward is partial credit 0.6,
        # which is not a success.
        "click-checkboxes",
        3,
        "Select 91YPF, i6Vdpn2, nd7Qt, XPMut and click Submit.",
        [
            ("Click", 'checkbox "91YPF"', None),
            ("Click", 'checkbox "i6Vdpn2"', None),
            ("Click", 'checkbox "nd7Qt"', None),
            ("Click", 'checkbox "XPMut"', None),
            ("Click", 'button "Submit"', None),
        ],
        [
            ("Click", 'checkbox "91YPF"', None),
            ("Click", 'checkbox "i6Vdpn2"', None),
            ("Click", 'checkbox "XPMut"', None),
            ("Click", 'button "Submit"', None),
        ],
    ),
    (
        "choose-list",
        0,
        "Select Helli from the list and click Submit.",
        [("Select Dropdown Option", "combobox", "Helli"), ("Click", 'button "Submit"', None)],
        [("Select Dropdown Option", "combobox", "Corrine"), ("Click", 'button "Submit"', None)],
    ),
    (
        "click-option",
        2,
        "Select yS82i and click Submit.",
        [("Click", 'radio "yS82i"', None), ("Click", 'button "Submit"', None)],
        [("Click", 'radio "9NY"', None), ("Click", 'button "Submit"', None)],
    ),
    (
        # The wrong sequence stops early: exit() before the page finished is a failure.
        "login-user",
        2,
        'Enter the username "nathalie" and the password "fzzq" into the text fields and press '
        "login.",
        [
            ("Type", "textbox", "nathalie"),
            ("Type", "textbox type=password", "fzzq"),
            ("Click", 'button "Login"', None),
        ],
        [("Type", "textbox", "nathalie"), ("exit", None, "done")],
    ),
]


@pytest.mark.browser
async def test_hand_written_sequences_get_reward_1_and_wrong_ones_0(
    browser: Browser, source: mw.MiniWoBSource
) -> None:
    pool = LocalEnvPool(
        browser, 3, EnvConfig(max_turns=8), ObservationConfig(), source.backend, source.evaluator
    )
    try:
        for which, want in (("correct", 1.0), ("wrong", 0.0)):
            tasks = [_task(name, seed) for name, seed, *_ in CASES]
            scripts = {
                str(t.task_id): (case[3] if which == "correct" else case[4])
                for t, case in zip(tasks, CASES, strict=True)
            }
            report = await evaluate_policy(
                ScriptPolicy(scripts), TOK, tasks, pool, max_env_retries=0, progress=False
            )
            for task, traj, (name, _, intent, correct, wrong) in zip(
                report.tasks, report.trajectories, CASES, strict=True
            ):
                why = f"{which} {name}: {traj.status} {traj.info}"
                assert traj.reward == want, why
                # The instruction read from the page at reset is the task's intent, and it
                # reached the policy's first prompt.
                assert task.intent == intent, why
                assert f"Task: {intent}" in TOK.decode(traj.turns[0].prompt_ids), why
                # ... and the trajectory records it (the viewer shows it without the tasks).
                assert traj.info["task"] == {
                    "intent": intent,
                    "site": "miniwob",
                    "template": f"miniwob.{name}",
                }, why
                # Every step ran; the page (or exit) ended the episode, not the turn limit.
                assert traj.status == "done", why
                assert len(traj.turns) == len(correct if which == "correct" else wrong), why
                assert all(turn.error is None for turn in traj.turns), why
            if which == "wrong":
                reasons = [tr.info.get("explanation", "") for tr in report.trajectories]
                assert "MiniWoB++ raw reward 0.6" in reasons[2]  # partial credit is not success
                assert "had not finished" in reasons[5]
    finally:
        await pool.close()


@pytest.mark.browser
async def test_seeds_are_reproducible_and_the_page_timer_is_off(
    browser: Browser, source: mw.MiniWoBSource
) -> None:
    env = WebEnv(browser, EnvConfig(), ObservationConfig(), source.backend, source.evaluator)
    try:
        seen = []
        for seed in (3, 3, 0):
            task = _task("click-button", seed)
            obs = await env.reset(task)
            seen.append((task.intent, obs.text))
            assert env.session is not None
            page_timer = await env.session.page.evaluate("core.EPISODE_MAX_TIME")
            assert page_timer == mw.NO_TIMER_MS
            # The reward HUD (timer, averages) is not part of the task.
            assert "Episodes done" not in obs.text and "Time left" not in obs.text
        assert seen[0] == seen[1]
        assert seen[2][0] == 'Click on the "okay" button.' and seen[2] != seen[0]
        # The task id and seed say which instance this is; the reset time is recorded.
        assert env.reset_ms is not None and env.reset_ms > 0
    finally:
        await env.close()
