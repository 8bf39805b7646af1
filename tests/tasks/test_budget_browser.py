"""Page budget on real pages: the experts of one template rolled out in Chromium, measured.

``needed`` is checked against the observation builder itself: cutting the recorded page at
``needed`` tokens (``fit_lines``) keeps the line the step needs, one token less drops it.
"""

from __future__ import annotations

import pytest

from webagent_r1.browser.observation import fit_lines
from webagent_r1.config import load_config
from webagent_r1.policy.hf import load_tokenizer
from webagent_r1.rollout.budget_rollout import measure_page_budget
from webagent_r1.rollout.demos import token_counter
from webagent_r1.sources.embedded.suite import build_suite, select
from webagent_r1.tasks.budget import summarize

pytestmark = pytest.mark.browser

TEMPLATE = "shopping.product_sku"


async def test_expert_steps_are_measured_on_the_pages_they_acted_on(embedded_sites) -> None:
    cfg = load_config(None, ["observation.max_tokens=4000"])
    tokenizer = load_tokenizer(cfg.model.name)
    count = token_counter(tokenizer)
    tasks = select(build_suite(), split="train", template=TEMPLATE)[:3]
    assert len(tasks) == 3
    run = await measure_page_budget(
        tasks, tokenizer, cfg, concurrency=3, sites=embedded_sites, progress=False
    )
    assert run.failures == [] and run.rollout_tokens == 4000
    assert {n.task_id for n in run.needs} == {str(t.task_id) for t in tasks}
    measured = [n for n in run.needs if n.needed is not None]
    assert any(n.kind == "element" for n in measured)
    answers = [n for n in run.needs if n.kind == "answer"]
    assert len(answers) == 3 and all(n.needed is not None for n in answers)  # the SKU's line
    for n in run.needs:
        assert n.template == TEMPLATE and not n.cut
        text = run.texts[n.task_id][n.turn]
        assert n.page_tokens == count(text) > 0
        if n.needed is None:
            continue
        assert 0 < n.offset <= n.needed <= n.page_tokens
        line = text.split("\n")[n.line]
        kept, _ = fit_lines(text.split("\n"), n.needed, count)
        assert kept.split("\n")[n.line] == line
        if n.needed < n.page_tokens:
            cut, _ = fit_lines(text.split("\n"), n.needed - 1, count)
            assert line not in cut.split("\n")[n.line : n.line + 1]

    largest = max(n.needed for n in measured)
    row, everything = summarize(run.needs, [largest - 1, largest])
    assert row.name == TEMPLATE and everything.name == "all"
    assert row.fits[largest] == 1.0 > row.fits[largest - 1]
    assert row.measured == len(measured) and row.max == largest
