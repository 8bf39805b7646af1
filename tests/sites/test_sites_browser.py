"""The embedded sites in real Chromium: parallel isolation, login, escaping, reset time."""

from __future__ import annotations

import asyncio
import re

import pytest

from webagent_r1.config import EnvConfig
from webagent_r1.rollout.env import WebEnv
from webagent_r1.tasks.experts import find
from webagent_r1.types import Task

pytestmark = pytest.mark.browser


def _task(url: str, user: str | None = "emma.lopez") -> Task:
    return Task(task_id="t", intent="test", start_url=url, sites=["shopping"], user=user)


def _act(kind: str, el: str | None = None, arg: str | None = None) -> str:
    parts = [f'action="{kind}"']
    if arg is not None:
        parts.append(f'argument="{arg}"')
    if el is not None:
        parts.append(f'element="{el}"')
    return f"<answer>do({', '.join(parts)})</answer>"


@pytest.fixture
async def envs(browser, embedded_sites):
    made = [WebEnv(browser, EnvConfig(max_turns=30), backend=embedded_sites) for _ in range(2)]
    yield made
    for e in made:
        await e.close()


def _cart_count(text: str) -> int:
    m = re.search(r'link "My Cart \((\d+)\)"', text)
    assert m, text[:500]
    return int(m.group(1))


async def test_parallel_episodes_do_not_see_each_others_writes(envs) -> None:
    a, b = envs
    url = "__SHOPPING__/product/5"
    obs_a, obs_b = await asyncio.gather(a.reset(_task(url)), b.reset(_task(url)))
    assert a.instance_id != b.instance_id
    start = _cart_count(obs_a.text)
    assert _cart_count(obs_b.text) == start  # same pristine data, same user
    # Both episodes act at the same time; only A adds the product to its cart.
    color = _act("Select Dropdown Option", find(obs_a, "combobox", "Color").id, "Black")
    r_a, r_b = await asyncio.gather(
        a.step(color), b.step(_act("Click", find(obs_b, "link", "My Cart").id))
    )
    assert r_a.observation.error is None and r_b.observation.error is None
    r_a = await a.step(_act("Click", find(r_a.observation, "button", "Add to Cart").id))
    assert r_a.observation.error is None
    assert _cart_count(r_a.observation.text) == start + 1
    r_b = await b.step(_act("Click", find(r_b.observation, "link", "My Cart").id))
    assert _cart_count(r_b.observation.text) == start


async def test_login_form_accepts_right_and_refuses_wrong_password(envs) -> None:
    env = envs[0]
    obs = await env.reset(_task("__SHOPPING__/login", user=None))
    user, pw = find(obs, "textbox", "Username").id, find(obs, "textbox", "Password").id
    await env.step(_act("Type", user, "emma.lopez"))
    await env.step(_act("Type", pw, "wrong-password"))
    r = await env.step(_act("Click", find(obs, "button", "Sign In").id))
    assert "Welcome, Emma" not in r.observation.text
    assert re.search(r"invalid|incorrect|wrong", r.observation.text, re.I), r.observation.text
    obs = r.observation
    await env.step(_act("Type", find(obs, "textbox", "Username").id, "emma.lopez"))
    await env.step(_act("Type", find(obs, "textbox", "Password").id, "Password.123"))
    r = await env.step(_act("Click", find(obs, "button", "Sign In").id))
    assert "Welcome, Emma Lopez!" in r.observation.text


async def test_user_text_is_escaped(envs) -> None:
    env = envs[0]
    obs = await env.reset(_task("__SHOPPING__/product/5"))
    evil = "<script>window.__pwned=1</script><b>bold</b>"
    await env.step(_act("Select Dropdown Option", find(obs, "combobox", "Rating").id, "5 stars"))
    await env.step(_act("Type", find(obs, "textbox", "Summary").id, evil))
    await env.step(_act("Type", find(obs, "textbox", "Review").id, evil))
    r = await env.step(_act("Click", find(obs, "button", "Submit Review").id))
    assert r.observation.error is None, r.observation.error
    assert await env.session.goto(env.backend.resolve_url("__SHOPPING__/account/reviews")) is None
    page = env.session.page
    assert evil in await page.evaluate("() => document.body.innerText")  # shown as text
    assert await page.evaluate("() => window.__pwned === undefined")  # never executed
    assert await page.evaluate("() => document.querySelectorAll('main b, b').length") == 0


async def test_reset_is_reported_in_milliseconds(envs) -> None:
    env = envs[0]
    times = []
    for _ in range(3):
        await env.reset(_task("__SHOPPING__/"))
        times.append(env.reset_ms)
    print(f"env reset (instance + login + first page + observation): {times} ms")
    assert all(isinstance(t, float) and t > 0 for t in times)
