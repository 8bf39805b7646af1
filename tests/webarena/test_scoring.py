"""The two scorings of WebArena-Lite, rule by rule, on the shipped task configs.

Each test loads real Lite tasks by id and gives an answer, final URL or page text that the
two scorings grade differently. The expected scores are worked out by hand from the rules
as VisualAgentBench's WebArena-Lite evaluator (``vab``) and WebArena's / BrowserGym's
(``webarena``) write them, not from our code.
"""

from __future__ import annotations

import pytest

from tests.webarena.conftest import FakeJudge, by_id, score, with_scoring
from webagent_r1.config import ConfigError, TasksConfig, WebArenaConfig
from webagent_r1.grading.base import EnvError
from webagent_r1.sources.webarena import SitesNotConfiguredError, WebArenaSites, load_tasks
from webagent_r1.sources.webarena.data import SCORINGS
from webagent_r1.sources.webarena.grading import RULES
from webagent_r1.sources.webarena.judge import VAB_FUZZY_ENDING, WEBARENA_FUZZY_ENDING
from webagent_r1.sources.webarena.source import WebArenaSource
from webagent_r1.types import Task

URLS = {
    "shopping": "http://shop.test:7770",
    "shopping_admin": "http://shop.test:7780/admin",
    "reddit": "http://reddit.test:9999",
    "gitlab": "http://gitlab.test:8023",
    "map": "http://map.test:3000",
    "wikipedia": "http://wiki.test:8888",
}


def _sites(scoring: str) -> WebArenaSites:
    return WebArenaSites(URLS, scoring=scoring)


async def _both(task: Task, answer: str | None, url: str = "") -> tuple[float, float]:
    """(vab, webarena) rewards of one episode."""
    return (
        await score(task, answer, _sites("vab"), url),
        await score(task, answer, _sites("webarena"), url),
    )


def test_scorings_agree_everywhere() -> None:
    assert tuple(RULES) == SCORINGS == ("vab", "webarena")
    assert WebArenaConfig().scoring == "vab"  # the paper's
    assert TasksConfig().webarena.scoring == "vab"
    assert WebArenaSites({}).scoring == "vab"
    with pytest.raises(ConfigError, match="tasks.webarena.scoring must be one of vab, webarena"):
        WebArenaConfig(scoring="browsergym")
    with pytest.raises(ValueError, match="scoring must be one of"):
        WebArenaSites({}, scoring="nope")
    with pytest.raises(ValueError, match="scoring must be one of"):
        WebArenaSource(scoring="nope")


# -- must_include: whole tokens for one-token references (answers) -----------------------


@pytest.mark.parametrize(
    ("task_id", "answer", "vab", "webarena"),
    [
        (23, "914km", 0.0, 1.0),  # "914": not a whole token under VAB
        (23, "About 914 km", 1.0, 1.0),
        (33, "125", 0.0, 1.0),  # "25" inside "125"
        (33, "25 items", 1.0, 1.0),
    ],
)
async def test_must_include_whole_token_tasks_23_33(
    lite_tasks: list[Task], task_id: int, answer: str, vab: float, webarena: float
) -> None:
    assert await _both(by_id(lite_tasks)[task_id], answer) == (vab, webarena)


async def test_must_include_string_task_81(lite_tasks: list[Task]) -> None:
    # Lite's task 81 gives must_include as the string "yjlou". VAB asserts a list: an
    # AssertionError, recorded as an error (an env error here); WebArena's rule as BrowserGym
    # runs it reads one phrase (a substring: "yjloux" passes).
    task = by_id(lite_tasks)[81]
    assert task.eval["reference_answers"]["must_include"] == "yjlou"
    with pytest.raises(EnvError, match="not a list"):
        await score(task, "yjlou", _sites("vab"))
    assert await score(task, "yjloux", _sites("webarena")) == 1.0
    revised = by_id(load_tasks("test", "webagent-r1"))[81]  # the revised file: a list
    assert await score(revised, "yjlou", _sites("vab")) == 1.0
    assert await score(revised, "yjloux", _sites("vab")) == 0.0


@pytest.mark.parametrize(
    ("answer", "vab", "webarena"),
    [
        ("About 3 stars", 1.0, 0.0),  # "65 |OR| 3": VAB splits the alternatives
        ("65%", 1.0, 0.0),  # "65" is a token of "65%"
        ("3.1 stars", 0.0, 0.0),  # "3" is not a token of "3.1"
    ],
)
async def test_must_include_or_alternatives_task_94(
    lite_tasks: list[Task], answer: str, vab: float, webarena: float
) -> None:
    assert await _both(by_id(lite_tasks)[94], answer) == (vab, webarena)


@pytest.mark.parametrize(
    ("answer", "vab", "webarena"),
    [
        ("25/30 items", 1.0, 1.0),  # VAB also counts the parts of a token with "/"
        ("2530 items", 0.0, 1.0),
        ("25-30 items", 0.0, 1.0),  # "-" does not split a token
    ],
)
async def test_must_include_tokens_split_on_slash_task_33(
    lite_tasks: list[Task], answer: str, vab: float, webarena: float
) -> None:
    assert await _both(by_id(lite_tasks)[33], answer) == (vab, webarena)


# -- must_include of page texts ----------------------------------------------------------


def _page_items(task: Task, kind: str) -> list[str]:
    """The ``kind`` references of a task's page checks, as strings."""
    out: list[str] = []
    for spec in task.eval["program_html"]:
        value = spec["required_contents"].get(kind)
        if value is not None:
            out += [str(x) for x in value] if isinstance(value, list) else [str(value)]
    return out


@pytest.mark.parametrize(
    ("text", "vab", "webarena"),
    [
        ("White Desks\nAdd to cart", False, True),  # "desk" inside "desks"
        ("Ergonomic desk, white\nAdd to cart", True, True),
        ("Whiteboard desk", False, True),  # "white" inside "whiteboard"
    ],
)
def test_page_must_include_whole_token_task_119(
    lite_tasks: list[Task], text: str, vab: bool, webarena: bool
) -> None:
    items = _page_items(by_id(lite_tasks)[119], "must_include")
    assert items == ["white", "desk"]
    got = tuple(all(RULES[m].page_must_include(i, text) for i in items) for m in SCORINGS)
    assert got == (vab, webarena)


# -- exact_match: VAB does not trim ------------------------------------------------------


@pytest.mark.parametrize("task_id", [27, 59, 74, 86, 161])
async def test_exact_match_untrimmed_answer_tasks_27_59_74_86_161(
    lite_tasks: list[Task], task_id: int
) -> None:
    task = by_id(lite_tasks)[task_id]
    assert task.eval["reference_answers"]["exact_match"] == "N/A"
    assert await _both(task, "N/A") == (1.0, 1.0)
    assert await _both(task, "N/A ") == (0.0, 1.0)  # a trailing space
    assert await _both(task, " 'N/A'") == (0.0, 1.0)  # a space before the quotes


async def test_exact_match_untrimmed_answer_task_45(lite_tasks: list[Task]) -> None:
    task = by_id(lite_tasks)[45]  # exact "Yes", then url_match (no url_note: exact for VAB)
    issue = "http://gitlab.test:8023/a11yproject/a11yproject.com/-/issues/719"
    assert await _both(task, "Yes", issue) == (1.0, 1.0)
    assert await _both(task, "\nYes", issue) == (0.0, 1.0)


async def test_exact_match_task_71_ssh_url_of_the_configured_gitlab(
    lite_tasks: list[Task],
) -> None:
    task = by_id(lite_tasks)[71]  # reference ssh://git@localhost:2222/…
    shown = "ssh://git@gitlab.test:2222/eriklindernoren/PyTorch-GAN.git"
    assert await _both(task, shown) == (1.0, 1.0)
    assert await _both(task, shown + " ") == (0.0, 1.0)
    assert await _both(task, shown.replace("gitlab.test", "localhost")) == (0.0, 0.0)
    sites = WebArenaSites({**URLS, "gitlab": "http://10.0.0.7:8023"}, gitlab_ssh_port=22)
    assert await score(task, "ssh://git@10.0.0.7:22/eriklindernoren/PyTorch-GAN.git", sites)
    env = {"WA_GITLAB": "http://gl.example:8023", "WA_GITLAB_SSH_PORT": "2022"}
    assert WebArenaSites.from_env(env).gitlab_ssh() == "ssh://git@gl.example:2022/"
    with pytest.raises(SitesNotConfiguredError, match="WA_GITLAB_SSH_PORT must be a port"):
        WebArenaSites.from_env({**env, "WA_GITLAB_SSH_PORT": "ssh"})


def test_page_exact_match_untrimmed_all_page_exact_tasks(lite_tasks: list[Task]) -> None:
    # Every exact_match page check of the 165: the text with a trailing newline (as
    # innerText often ends) passes WebArena's rule only.
    seen = []
    for task in lite_tasks:
        if "program_html" not in task.eval["eval_types"]:
            continue
        for ref in _page_items(task, "exact_match"):
            seen.append(task.task_id)
            assert RULES["vab"].exact_match(ref, ref) and RULES["webarena"].exact_match(ref, ref)
            assert not RULES["vab"].exact_match(ref, ref + "\n"), task.task_id
            assert RULES["webarena"].exact_match(ref, ref + "\n"), task.task_id
    assert len(set(seen)) == 23 and 96 in seen and 163 in seen


# -- url_match ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("task_id", "final", "vab", "webarena"),
    [
        # Query parameters in another order: a raw substring no more.
        (
            25,
            "G/kkroening/ffmpeg-python/-/issues/?sort=created_date&state=opened"
            "&label_name%5B%5D=question&first_page_size=20",
            1.0,
            1.0,
        ),
        (
            25,
            "G/kkroening/ffmpeg-python/-/issues/?label_name[]=question&sort=created_date"
            "&state=opened&first_page_size=20",
            0.0,
            1.0,
        ),
        (39, "G/dashboard/merge_requests?scope=all&assignee_username=byteblaze", 0.0, 1.0),
        (
            58,
            "S/clothing-shoes-jewelry/sport-specific-clothing/competitive-swimwear.html"
            "?product_list_dir=desc&product_list_order=price",
            0.0,
            1.0,
        ),
        (65, "S/clothing-shoes-jewelry/men/shoes.html?product_list_limit=24&price=0-30", 0.0, 1.0),
        (66, "S/catalogsearch/result/?q=switch%20accessories", 0.0, 1.0),  # encoded otherwise
        (
            77,
            "S/catalogsearch/result/index/?q=chairs&product_list_order=price&product_list_dir=asc",
            0.0,
            1.0,
        ),
        (
            82,
            "S/home-kitchen/furniture/living-room-furniture.html?product_list_dir=desc"
            "&product_list_order=price",
            0.0,
            1.0,
        ),
        (83, "G/dashboard/merge_requests?scope=all&reviewer_username=byteblaze", 0.0, 1.0),
        (90, "M/search?query=hotels+near+Carnegie+Music+Hall", 0.0, 1.0),
        (90, "M/search?query=hotels%20near%20Carnegie%20Music%20Hall#map=15/40.4/-79.9", 1.0, 1.0),
    ],
)
async def test_url_match_raw_substring_tasks_25_39_58_65_66_77_82_83_90(
    lite_tasks: list[Task], task_id: int, final: str, vab: float, webarena: float
) -> None:
    prefix = {"G": URLS["gitlab"], "S": URLS["shopping"], "M": URLS["map"]}
    url = prefix[final[0]] + final[1:]
    assert await _both(by_id(lite_tasks)[task_id], None, url) == (vab, webarena)


async def test_url_match_without_url_note_is_exact_task_45(lite_tasks: list[Task]) -> None:
    task = by_id(lite_tasks)[45]
    assert "url_note" not in task.eval
    issue = "http://gitlab.test:8023/a11yproject/a11yproject.com/-/issues/719"
    assert await _both(task, "yes", issue + "/") == (1.0, 1.0)  # one trailing "/" dropped
    assert await _both(task, "yes", issue + "#note_12") == (0.0, 1.0)
    assert await _both(task, "yes", issue + "/designs") == (0.0, 1.0)


async def test_url_match_localhost_is_127_0_0_1_under_vab_task_66(
    lite_tasks: list[Task],
) -> None:
    task = by_id(lite_tasks)[66]
    local = WebArenaSites({"shopping": "http://localhost:7770"})
    url = "http://127.0.0.1:7770/catalogsearch/result/?q=switch+accessories"
    assert await score(task, None, local, url) == 1.0
    assert await score(task, None, with_scoring(local, "webarena"), url) == 0.0


# -- the judge -----------------------------------------------------------------------------

LIST_JUDGED = (3, 6, 10, 24, 26, 42, 52, 53, 57, 84, 89)


@pytest.mark.parametrize("task_id", LIST_JUDGED)
async def test_judge_list_asked_once_joined_under_vab_tasks_3_6_10_24_26_42_52_53_57_84_89(
    lite_tasks: list[Task], wa_sites: WebArenaSites, judge_server: FakeJudge, task_id: int
) -> None:
    task = by_id(lite_tasks)[task_id]
    items = task.eval["reference_answers"]["fuzzy_match"]
    assert isinstance(items, list) and len(items) > 1
    answer = "; ".join(items)
    assert await score(task, answer, wa_sites) == 1.0
    (req,) = judge_server.requests
    prompt = req["body"]["messages"][-1]["content"]
    assert f"reference answer: {', '.join(items)}\n" in prompt
    assert prompt.endswith(VAB_FUZZY_ENDING)
    judge_server.requests.clear()
    assert await score(task, answer, with_scoring(wa_sites, "webarena")) == 1.0
    assert len(judge_server.requests) == len(items)  # one call per item
    prompts = [r["body"]["messages"][-1]["content"] for r in judge_server.requests]
    assert all(p.endswith(WEBARENA_FUZZY_ENDING) for p in prompts)
    assert [p.split("reference answer: ")[1].split("\n")[0] for p in prompts] == items


async def test_judge_prompt_asks_for_the_verdict_alone_under_vab_task_3(
    lite_tasks: list[Task], wa_sites: WebArenaSites, judge_server: FakeJudge
) -> None:
    # A judge that explains itself unless told not to: its "correct … not incorrect" reply
    # fails WebArena's reading; VAB's prompt gets the bare verdict.
    judge_server.explains_unless_told = True
    task = by_id(lite_tasks)[3]
    answer = "Driving: 13min, walking: 1h 45min"
    assert await score(task, answer, wa_sites) == 1.0
    assert await score(task, answer, with_scoring(wa_sites, "webarena")) == 0.0
