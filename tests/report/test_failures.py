"""Failure kinds (``report/failures.py``), ``webagent-r1 failures`` and the report's section.

Every episode here is built by hand with the real types; the folders are written with the
project's trajectory writer, as evaluations and RL runs write them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from webagent_r1.cli import app
from webagent_r1.report import build_report
from webagent_r1.report.failures import (
    FAILURE_KINDS,
    classify,
    embedded_template_kinds,
    failures_markdown,
    has_loop,
    invalid_turn,
    is_give_up,
    tabulate,
    task_kind,
    template_of,
)
from webagent_r1.report.load import ReportError, collect_failures
from webagent_r1.rollout.trajectories import read_trajectories, write_trajectories
from webagent_r1.types import Action, Trajectory, Turn

KINDS = {"t.info": "info", "t.nav": "nav", "t.change": "change"}


def click(element: str = "3") -> Action:
    return Action(kind="Click", element=element, raw=f'do(action="Click", element="{element}")')


def back() -> Action:
    return Action(kind="go_backward", raw="go_backward()")


def exit_(message: str) -> Action:
    return Action(kind="exit", argument=message, raw=f'exit(message="{message}")')


def turn(
    action: Action | None,
    state: str | None = None,
    url: str = "http://shop/",
    error: str | None = None,
) -> Turn:
    """One turn; ``action`` None is a reply the parser refused (the env records the error)."""
    if action is None and error is None:
        error = 'expected an action like do(action="Click", element="12"), got "hmm"'
    return Turn(
        prompt_ids=[1, 2, 3],
        completion_ids=[4, 5],
        completion_logprobs=[-0.1, -0.2],
        text=f"<answer>{action.raw if action else 'hmm'}</answer>",
        action=action,
        observation={"url": url, "title": "", "error": error, "text_head": ""},
        error=error,
        state_key=state,
    )


def distinct(n: int) -> list[Turn]:
    """``n`` turns that each click another element on another page (no loop, all valid)."""
    return [turn(click(str(k)), state=f"s{k}") for k in range(n)]


def episode(
    turns: list[Turn],
    reward: float = 0.0,
    status: str = "done",
    template: str = "t.info",
    kind: str | None = None,
    task_id: str = "x/0",
) -> Trajectory:
    """A trajectory as the rollout records it: the task, and the answer of a final exit."""
    task: dict[str, Any] = {"intent": "?", "site": "shopping", "template": template}
    if kind is not None:
        task["kind"] = kind
    info: dict[str, Any] = {"task": task}
    last = turns[-1].action if turns else None
    if status != "env_error" and last is not None and last.kind == "exit":
        info["answer"] = last.argument
    return Trajectory(task_id, task_id, turns, reward, status, info)  # type: ignore[arg-type]


# One episode per kind (and a success, an env error), each the archetype of its kind.
INVALID = episode([turn(None, "s0"), turn(None, "s1"), turn(click(), "s2")], status="max_turns")
LOOP = episode(
    [turn(click("1"), "s0"), *[turn(click("7"), "s1") for _ in range(3)]], status="max_turns"
)
RAN_OUT = episode(distinct(5), status="max_turns")
GAVE_UP = episode([*distinct(2), turn(exit_("N/A"), "s9")])
WRONG_ANSWER = episode([*distinct(2), turn(exit_("$12.99"), "s9")])
WRONG_END_STATE = episode([*distinct(3), turn(exit_(""), "s9")], template="t.change")
SUCCESS = episode([*distinct(1), turn(exit_("$10.00"), "s9")], reward=1.0)
ENV_ERROR = Trajectory("x/1", "x/1", distinct(2), 0.0, "env_error", {"error": "reset failed"})


@pytest.mark.parametrize(
    ("traj", "kind"),
    [
        (INVALID, "invalid_action"),
        (LOOP, "loop"),
        (RAN_OUT, "ran_out_of_turns"),
        (GAVE_UP, "gave_up"),
        (WRONG_ANSWER, "wrong_answer"),
        (WRONG_END_STATE, "wrong_end_state"),
        (SUCCESS, None),
        (ENV_ERROR, None),
    ],
)
def test_one_episode_per_kind(traj: Trajectory, kind: str | None) -> None:
    assert classify(traj, KINDS) == kind


def test_precedence() -> None:
    # the loop of LOOP also ran out of turns: loop comes first
    assert LOOP.status == "max_turns" and classify(LOOP, KINDS) == "loop"
    # three identical refused replies from one state are a loop too, but invalid comes first
    stuck = [turn(click("1"), "s0"), *[turn(None, "s1") for _ in range(3)]]
    assert has_loop(stuck)
    assert classify(episode(stuck, status="max_turns"), KINDS) == "invalid_action"
    # a loop and then a wrong answer: the loop
    looped = [*[turn(back(), "s1") for _ in range(3)], turn(exit_("42"), "s1")]
    assert classify(episode(looped), KINDS) == "loop"
    # "cannot" on an info task is giving up, not a wrong answer
    cannot = [*distinct(1), turn(exit_("I cannot find that order."), "s9")]
    assert classify(episode(cannot), KINDS) == "gave_up"


def test_a_write_budget_failure_is_side_effects_before_anything_else() -> None:
    """The vote was cast, then the episode clicked on until the turns ran out, commenting on
    the way: the grader named the extra rows, and that is the kind."""
    extra = "state_match: side effects: 1 row of reddit.comments (the task changes at most 0)"
    looped = [*[turn(back(), "s1") for _ in range(3)]]
    traj = episode(looped, status="max_turns", template="t.change")
    assert classify(traj, KINDS) == "loop"
    traj.info["explanation"] = extra
    assert classify(traj, KINDS) == "side_effects"
    traj.info["explanation"] = "state_match: the user upvoted the post: got None, want 1"
    assert classify(traj, KINDS) == "loop"


def test_invalid_action_needs_more_than_half_of_the_turns() -> None:
    half = [turn(None, "s0"), turn(click(), "s1"), turn(click("4"), "s2", error="no element 4")]
    half.append(turn(click("5"), "s3"))  # 2 of 4 invalid: not a majority
    assert classify(episode(half, status="max_turns"), KINDS) == "ran_out_of_turns"
    # an action the page could not execute counts like an unparsed one: 3 of 5
    failed = [turn(click(str(k)), f"s{k}", error=f"no element {k}") for k in range(3)]
    failed += [turn(click("8"), "s8"), turn(exit_("7"), "s9")]
    assert classify(episode(failed), KINDS) == "invalid_action"
    # an exit is never invalid, even with the error of the failed action before it on its
    # turn (as older files recorded it): 2 failed clicks and 2 valid turns are no majority
    stale = [turn(click(str(k)), f"s{k}", error=f"no element {k}") for k in range(2)]
    stale += [turn(click("8"), "s8"), turn(exit_("7"), "s9", error="no element 1")]
    assert not invalid_turn(stale[-1]) and invalid_turn(stale[0])
    assert classify(episode(stale), KINDS) == "wrong_answer"


def test_loops() -> None:
    # A-B-A-B: forth and back twice, each pair only twice (below the repeat threshold)
    ab = [turn(click("2"), "s0"), turn(back(), "s1"), turn(click("2"), "s0"), turn(back(), "s1")]
    assert has_loop(ab, repeats=3)
    assert classify(episode([*ab, turn(exit_("x"), "s0")]), KINDS) == "loop"
    # the same two states but other actions: no oscillation
    other = [turn(click("2"), "s0"), turn(back(), "s1"), turn(click("5"), "s0"), turn(back(), "s2")]
    assert not has_loop(other)
    # the same action three times from different states is progress, not a loop
    assert not has_loop([turn(Action(kind="Scroll Down"), f"s{k}") for k in range(3)])
    # repeats is a parameter: twice is enough with 2, and 3 times is not with 4
    twice = [turn(click("7"), "s1"), turn(click("1"), "s2"), turn(click("7"), "s1")]
    assert not has_loop(twice) and has_loop(twice, repeats=2)
    assert classify(episode(twice, status="max_turns"), KINDS, loop_repeats=2) == "loop"
    assert classify(LOOP, KINDS, loop_repeats=4) == "ran_out_of_turns"
    # exit never makes a loop
    assert not has_loop([turn(exit_(""), "s1") for _ in range(3)])


def test_loop_without_state_keys_uses_the_url_before_the_action() -> None:
    # files written before state_key: turn k acted on the page turn k - 1 ended on
    same = [turn(click("1"), url="http://a/"), *[turn(click("7"), url="http://a/")] * 3]
    assert has_loop(same)  # turns 1-3 click 7 on http://a/
    moving = [turn(click("7"), url=f"http://a/{k}") for k in range(4)]
    assert not has_loop(moving)


def test_answer_kinds_follow_the_task_kind() -> None:
    def end(message: str, **kw: Any) -> str | None:
        return classify(episode([*distinct(1), turn(exit_(message), "s9")], **kw), KINDS)

    # info task: empty answer gives up, a value is a wrong answer
    assert end("", template="t.info") == "gave_up"
    assert end("42", template="t.info") == "wrong_answer"
    # nav / change: stopping with "" or a remark is a wrong end state, "cannot" gives up
    assert end("", template="t.nav") == "wrong_end_state"
    assert end("Done, the item is in the cart", template="t.change") == "wrong_end_state"
    assert end("This product does not exist", template="t.nav") == "gave_up"
    # unknown kind (WebArena, MiniWoB++): a value is a wrong answer, "" a wrong end state
    assert end("42", template="webarena.7") == "wrong_answer"
    assert end("", template="webarena.7") == "wrong_end_state"
    # a kind recorded in the trajectory wins over the mapping
    assert end("42", template="t.nav", kind="info") == "wrong_answer"
    # the page ended the episode (MiniWoB++): no exit at all
    assert classify(episode(distinct(3), template="miniwob.click-button"), KINDS) == (
        "wrong_end_state"
    )


def test_give_up_messages() -> None:
    for m in ("N/A", "n/a.", "NA", "Unknown", "not applicable", "?", "No results", " -- "):
        assert is_give_up(m), m
    for m in ("I can't find it", "Cannot be done", "The user does not exist", "unable to"):
        assert is_give_up(m), m
    for m in ("", "42", "$12.99", "Nanami", "canal street", "unknownst"):
        assert not is_give_up(m), m


def test_task_kind_and_template() -> None:
    kinds = embedded_template_kinds()
    assert kinds["shopping.product_price"] == "info"
    assert kinds["shopping.product_page"] == "nav"
    assert kinds["shopping.add_to_cart"] == "change"
    assert task_kind(episode(distinct(1), template="shopping.add_to_cart"), kinds) == "change"
    assert task_kind(episode(distinct(1), template="webarena.7"), kinds) is None
    # an env error at reset records no task: an embedded task id still names its template
    blank = Trajectory("shopping.add_to_cart/004", 0, [], 0.0, "env_error", {})
    assert template_of(blank, kinds) == "shopping.add_to_cart"
    assert template_of(blank) == "?"


def test_table_counts_per_template() -> None:
    nav = "t.nav"
    trajs = [
        INVALID,  # t.info, 3 turns
        LOOP,  # t.info, 4 turns
        GAVE_UP,  # t.info, 3 turns
        SUCCESS,  # t.info, 2 turns
        episode([*distinct(1), turn(exit_(""), "s9")], template=nav),  # wrong end state, 2
        episode([*distinct(1), turn(exit_(""), "s9")], template=nav),  # wrong end state, 2
        episode(distinct(5), status="max_turns", template=nav),  # ran out of turns, 5
        episode([*distinct(3), turn(exit_(""), "s9")], reward=1.0, template=nav),  # success, 4
        ENV_ERROR,  # no task recorded: template "?"
        episode([turn(exit_("ok"), "s0")], reward=1.0, template="t.change"),  # success, 1
    ]
    t = tabulate(trajs, "eval", KINDS)
    o = t.overall
    assert (o.episodes, o.successes, o.env_errors, o.failures) == (10, 3, 1, 6)
    assert o.kinds == {
        "side_effects": 0,
        "invalid_action": 1,
        "loop": 1,
        "ran_out_of_turns": 1,
        "gave_up": 1,
        "wrong_answer": 0,
        "wrong_end_state": 2,
    }
    assert o.share("wrong_end_state") == pytest.approx(2 / 6)
    assert o.share("wrong_answer") == 0.0
    # failed: 3 + 4 + 3 + 2 + 2 + 5 = 19 turns over 6; successes: 2 + 4 + 1 over 3
    assert o.mean_turns_failed == pytest.approx(19 / 6)
    assert o.mean_turns_success == pytest.approx(7 / 3)

    info, nav_c = t.by_template["t.info"], t.by_template[nav]
    assert (info.episodes, info.successes, info.failures) == (4, 1, 3)
    assert info.kinds["invalid_action"] == info.kinds["loop"] == info.kinds["gave_up"] == 1
    assert info.mean_turns_failed == pytest.approx(10 / 3)
    assert (nav_c.episodes, nav_c.successes, nav_c.failures) == (4, 1, 3)
    assert nav_c.kinds["wrong_end_state"] == 2 and nav_c.kinds["ran_out_of_turns"] == 1
    assert nav_c.mean_turns_failed == pytest.approx(3.0) and nav_c.mean_turns_success == 4.0
    assert t.by_template["?"].env_errors == 1 and t.by_template["?"].failures == 0
    assert t.by_template["t.change"].failures == 0
    # rows: templates with failures, most first (a tie by name); the others left out
    assert [n for n, _ in t.rows()] == ["t.info", "t.nav"]

    md = "\n".join(failures_markdown([t]))
    assert "## Failure kinds" in md
    # t.nav: 4 episodes, 3 failed, 0 0 0 1 0 0 2, no env error, 3.0 / 4.0 turns
    assert "| t.nav | 4 | 3 | 0 | 0 | 0 | 1 (33%) | 0 | 0 | 2 (67%) | 0 | 3.0 | 4.0 |" in md
    all_row = "| **all** | 10 | 6 | 0 | 1 (17%) | 1 (17%) | 1 (17%) | 1 (17%) | 0 | 2 (33%) | 1 |"
    assert all_row in md
    assert "Templates without a failed episode: 2." in md

    only = tabulate(trajs, "eval", KINDS, template=nav)
    assert only.overall.episodes == 4 and list(only.by_template) == [nav]
    with pytest.raises(ValueError, match="at least 2"):
        tabulate(trajs, loop_repeats=1)


def test_no_failure_no_section() -> None:
    t = tabulate([SUCCESS, ENV_ERROR], "eval", KINDS)
    assert t.overall.failures == 0 and t.overall.env_errors == 1
    assert failures_markdown([t]) == []


# --------------------------------------------------------------------------------------
# Folders written with the project's trajectory writer; the command and the report
# --------------------------------------------------------------------------------------


def _embedded(traj: Trajectory, template: str) -> Trajectory:
    """The same episode of an embedded template (its kind comes from the suite)."""
    traj = Trajectory.from_dict(copy.deepcopy(traj.to_dict()))
    traj.info["task"]["template"] = template
    return traj


INFO_T, NAV_T = "shopping.product_price", "shopping.product_page"


def write_run(root: Path) -> Path:
    """A run folder: two RL evaluations, the rollouts of two steps on two ranks, and an eval
    folder; only the last RL evaluation and the last step's rollouts are read."""
    run = root / "run"
    write_trajectories([SUCCESS], run / "rl" / "eval" / "step-000000.jsonl")
    final = [
        _embedded(WRONG_ANSWER, INFO_T),
        _embedded(GAVE_UP, INFO_T),
        _embedded(SUCCESS, INFO_T),
        _embedded(episode([*distinct(1), turn(exit_("Done"), "s9")]), NAV_T),  # wrong end state
        _embedded(LOOP, NAV_T),
        ENV_ERROR,
    ]
    write_trajectories(final, run / "rl" / "eval" / "step-000004.jsonl")
    for rank in range(2):
        write_trajectories([RAN_OUT], run / "rl" / "rollouts" / f"step-000002-rank{rank}.jsonl")
        write_trajectories([INVALID], run / "rl" / "rollouts" / f"step-000003-rank{rank}.jsonl")
    with (run / "rl" / "rollouts" / "step-000003-rank1.jsonl").open("a") as f:
        f.write('{"task_id": "x/9", "turns": [')  # a half-written last line
    ev = run / "eval"
    write_trajectories([SUCCESS, RAN_OUT], ev / "trajectories-t10.jsonl")
    results = [
        {"max_turns": 5, "success": 0.0, "trajectories": "trajectories-t5.jsonl"},
        {"max_turns": 10, "success": 0.5, "trajectories": "trajectories-t10.jsonl"},
    ]
    (ev / "eval.json").write_text(json.dumps({"model": "m", "results": results}))
    return run


def invoke(*args: str) -> Any:
    return CliRunner().invoke(app, ["failures", *args], env={"COLUMNS": "200"})


def test_cli_json_on_a_run_folder(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    # the writer's files read back as valid trajectories
    assert len(read_trajectories(run / "rl" / "eval" / "step-000004.jsonl")) == 6
    res = invoke(str(run), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["kinds"] == list(FAILURE_KINDS) and out["loop_repeats"] == 3
    labels = [s["label"] for s in out["sources"]]
    assert labels == ["RL eval, step 4", "RL rollouts, step 4", "eval (max_turns=10)"]
    final, rollouts, ev = out["sources"]
    assert final["files"] == ["rl/eval/step-000004.jsonl"]
    o = final["overall"]
    assert (o["episodes"], o["successes"], o["failures"], o["env_errors"]) == (6, 1, 4, 1)
    assert o["kinds"] == {
        "side_effects": 0,
        "invalid_action": 0,
        "loop": 1,
        "ran_out_of_turns": 0,
        "gave_up": 1,
        "wrong_answer": 1,
        "wrong_end_state": 1,
    }
    assert o["shares"]["loop"] == 0.25
    assert o["mean_turns_failed"] == pytest.approx((3 + 3 + 2 + 4) / 4)
    assert o["mean_turns_success"] == 2.0
    nav = final["by_template"][NAV_T]
    assert nav["kinds"]["wrong_end_state"] == 1 and nav["kinds"]["loop"] == 1
    info = final["by_template"][INFO_T]
    assert (info["failures"], info["successes"]) == (2, 1)
    # the last step's rollouts, both ranks; the half-written line skipped and counted
    assert rollouts["files"] == [
        "rl/rollouts/step-000003-rank0.jsonl",
        "rl/rollouts/step-000003-rank1.jsonl",
    ]
    assert rollouts["overall"]["kinds"]["invalid_action"] == 2 and rollouts["bad_lines"] == 1
    # eval.json: the largest turn budget
    assert ev["files"] == ["eval/trajectories-t10.jsonl"]
    assert ev["overall"]["kinds"]["ran_out_of_turns"] == 1


def test_cli_table_and_template(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    res = invoke(str(run))
    assert res.exit_code == 0, res.output
    for word in ("RL eval, step 4", "RL rollouts, step 4", "eval (max_turns=10)", INFO_T, NAV_T):
        assert word in res.stdout, word
    # the final evaluation: each of 4 kinds once in 4 failed episodes, the others never
    lines = res.stdout.splitlines()
    for k in ("loop", "gave_up", "wrong_answer", "wrong_end_state"):
        assert any([c.strip() for c in ln.split("│")[1:4]] == [k, "1", "25.0%"] for ln in lines), k
    assert "mean turns: failed 3.0, successful 2.0" in res.stdout
    assert "note: RL rollouts, step 4: 1 line(s) that were not trajectories skipped" in res.stderr

    res = invoke(str(run), "--template", NAV_T, "--json")
    assert res.exit_code == 0, res.output
    [src] = json.loads(res.stdout)["sources"]  # the rollouts and the eval have none of it
    assert src["template"] == NAV_T and list(src["by_template"]) == [NAV_T]
    assert src["overall"]["failures"] == 2

    res = invoke(str(run), "--template", "shopping.nope")
    assert res.exit_code == 2
    msg = " ".join(res.output.split())
    assert "no episode of template 'shopping.nope'" in msg and INFO_T in msg
    assert "Traceback" not in res.output

    res = invoke(str(run), "--loop-repeats", "2", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["loop_repeats"] == 2


def test_cli_eval_folder_and_single_file(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    res = invoke(str(run / "eval"), "--json")
    assert res.exit_code == 0, res.output
    [src] = json.loads(res.stdout)["sources"]
    assert src["label"] == "eval (max_turns=10)"
    assert src["files"] == ["trajectories-t10.jsonl"]

    f = run / "rl" / "eval" / "step-000004.jsonl"
    res = invoke(str(f), "--json")
    assert res.exit_code == 0, res.output
    [src] = json.loads(res.stdout)["sources"]
    assert src["label"] == "step-000004.jsonl" and src["overall"]["failures"] == 4

    # only successes: said in one line, no table
    res = invoke(str(run / "rl" / "eval" / "step-000000.jsonl"))
    assert res.exit_code == 0 and "no failed episode (1 successes, 0 env errors)" in res.stdout


def test_cli_one_line_errors(tmp_path: Path) -> None:
    res = invoke(str(tmp_path / "nope"))
    assert res.exit_code == 2 and "not found" in res.output
    empty = tmp_path / "empty"
    empty.mkdir()
    res = invoke(str(empty))
    assert res.exit_code == 2 and "has no trajectory files" in " ".join(res.output.split())
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not json\n[1, 2]\n")
    res = invoke(str(broken))
    assert res.exit_code == 2
    assert "no readable trajectory" in " ".join(res.output.split())
    assert "2 line(s) that were not trajectories" in " ".join(res.output.split())
    bad_eval = tmp_path / "bad_eval"
    bad_eval.mkdir()
    (bad_eval / "eval.json").write_text("{")
    res = invoke(str(bad_eval))
    assert res.exit_code == 2 and "eval.json: unreadable" in " ".join(res.output.split())
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1
    with pytest.raises(ReportError, match="at least 2"):
        collect_failures(tmp_path, loop_repeats=1)


def test_report_section_only_with_failures(tmp_path: Path) -> None:
    run = write_run(tmp_path)
    md = build_report(run).read_text()
    assert "## Failure kinds" in md
    assert "### RL eval, step 4" in md and "### RL rollouts, step 4" in md
    # the final evaluation's nav row: 2 episodes, both failed (a loop, a wrong end state)
    row = f"| {NAV_T} | 2 | 2 | 0 | 0 | 1 (50%) | 0 | 0 | 0 | 1 (50%) | 0 | 3.0 | – |"
    assert row in md
    assert "Lines that were not trajectories, skipped: 1." in md

    ok = tmp_path / "ok"
    write_trajectories([SUCCESS, ENV_ERROR], ok / "rl" / "eval" / "step-000000.jsonl")
    assert "Failure kinds" not in build_report(ok).read_text()


def test_odd_lines_are_skipped_or_counted_without_a_crash(tmp_path: Path) -> None:
    # files are read as the loaders read them: a line they refuse is counted, with its error
    odd = {
        "task_id": "x/0",
        "group_id": 0,
        "reward": 0,
        "status": "max_turns",
        "info": "not a dict",
        "turns": [
            {
                "prompt_ids": [],
                "completion_ids": [],
                "completion_logprobs": [],
                "text": 7,
                "action": {"kind": "Click", "element": [1], "argument": None},
                "observation": "page",
            }
        ]
        * 4,  # the first acted from the start page, the next three from URL "": a loop
    }
    f = tmp_path / "odd.jsonl"
    f.write_text(json.dumps(odd) + "\n" + json.dumps({"task_id": 1, "turns": [5]}) + "\n")
    with pytest.raises(ReportError, match=r"no readable trajectory .*\(2 line\(s\)"):
        collect_failures(f, kinds=KINDS)
    turn = {**odd["turns"][0], "prompt_ids": [1], "completion_ids": [2]}
    turn.update(completion_logprobs=[-0.1], text="", observation={})
    turn["action"] = {"kind": "Click", "element": "1", "argument": None}
    fine = {**odd, "info": {}, "turns": [turn] * 4}
    f.write_text("\n".join(json.dumps(d) for d in (odd, fine, {"task_id": 1, "turns": [5]})))
    [t], _ = collect_failures(f, kinds=KINDS)
    assert t.overall.kinds["loop"] == 1 and t.bad_lines == 2
    assert t.first_bad == f"{f}:1: info must be an object, got 'not a dict'"
    assert list(t.by_template) == ["?"]


def test_cli_tables_piped_at_80_columns_keep_their_headers(tmp_path: Path) -> None:
    """Piped into a file, the tables get 160 columns: no header or cell cut to '…'."""
    run = write_run(tmp_path)
    res = CliRunner().invoke(app, ["failures", str(run)], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    assert "…" not in res.stdout
    lines = res.stdout.splitlines()
    head = next(ln for ln in lines if ln.startswith("┃ Template "))
    assert "┃ wrong end state ┃" in head and "┃ Turns (success) ┃" in head
    row = next(ln for ln in lines if ln.startswith(f"│ {NAV_T} "))
    assert [c.strip() for c in row.split("│")[2:5]] == ["2", "2", "1"]
