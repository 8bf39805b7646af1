"""Scripted expert solvers: read the same Observation the model reads, emit the same actions.

An expert is a generator: it receives each observation and yields ``Step(action, rationale)``;
the rationale becomes the ``<think>`` text of behaviour-cloning data. Experts find elements
by their role and visible text in the observation (``find``), never by peeking at the site's
database: what they know of the task comes from the task's parameters, as for the model.

    def solve(p: dict) -> Expert:
        obs = yield None                       # the first observation
        box = find(obs, "textbox", "Search")
        obs = yield search(box, p["product"], f"I search for {p['product']}.")
        ...
        yield answer(price, f"The page shows the price {price}.")
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from dataclasses import dataclass

from webagent_r1.agent.actions import format_action
from webagent_r1.types import Action, Observation


@dataclass
class Step:
    """One expert action and the reasoning behind it."""

    action: str
    """Action text in the model's syntax, e.g. ``do(action="Click", element="12")``."""
    rationale: str
    """A short task-specific reason (used as ``<think>`` text)."""

    def response(self, thinking: bool = True) -> str:
        """The full model-style response for this step."""
        think = f"<think>{self.rationale}</think>\n" if thinking else ""
        return f"{think}<answer>{self.action}</answer>"


Expert = Generator["Step | None", Observation, None]
"""A generator: first ``send`` the start observation, get Steps back until it returns."""
ExpertFactory = Callable[[dict], Expert]


class ExpertError(RuntimeError):
    """The expert cannot continue (element not found): a bug in a site, task or expert."""


@dataclass(frozen=True)
class Element:
    """An interactive element as the observation shows it."""

    id: str
    role: str
    name: str
    line: str

    @property
    def value(self) -> str | None:
        m = re.search(r'value="((?:[^"\\]|\\.)*)"', self.line)
        return m.group(1) if m else None


# An element anywhere in a line (table rows hold several: `… | [17] link "View"`).
_COMPACT_RE = re.compile(r'(?:^|(?<=\s))\[(\d+)\]\s+([a-z]\S*)(?:\s+"((?:[^"\\]|\\.)*)")?')
_HTML_RE = re.compile(r'<(\w+)([^>]*?)\sid="(\d+)"([^>]*)>([^<]*)')
_HTML_ROLE = {"a": "link", "input": "textbox", "select": "combobox", "textarea": "textbox"}


def elements(text: str) -> list[Element]:
    """Interactive elements of an observation text (compact or simplified-HTML format)."""
    out: list[Element] = []
    for line in text.splitlines():
        found = list(_COMPACT_RE.finditer(line))
        for k, m in enumerate(found):
            name = (m.group(3) or "").replace('\\"', '"')
            # The element's own text runs until the next element on the line.
            end = found[k + 1].start() if k + 1 < len(found) else len(line)
            out.append(Element(m.group(1), m.group(2), name, line[m.start() : end]))
        if found:
            continue
        for hm in _HTML_RE.finditer(line):
            tag, attrs = hm.group(1), hm.group(2) + hm.group(4)
            role_m = re.search(r'role="([^"]+)"', attrs)
            type_m = re.search(r'type="([^"]+)"', attrs)
            role = role_m.group(1) if role_m else _HTML_ROLE.get(tag, tag)
            if tag == "input" and type_m and type_m.group(1) in ("checkbox", "radio", "submit"):
                role = {"submit": "button"}.get(type_m.group(1), type_m.group(1))
            label = hm.group(5).strip()
            for attr in ("aria-label", "placeholder", "value", "alt", "title", "name"):
                if label:
                    break
                am = re.search(rf'{attr}="([^"]*)"', attrs)
                label = am.group(1) if am else ""
            out.append(Element(hm.group(3), role, label, hm.group(0)))
    return out


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip().lower()


def find_all(
    obs: Observation | str, role: str | None = None, name: str | None = None, exact: bool = False
) -> list[Element]:
    """Elements whose role matches and whose name contains (or equals) ``name``."""
    text = obs.text if isinstance(obs, Observation) else obs
    want = _norm(name) if name is not None else None
    out = []
    for el in elements(text):
        if role is not None and el.role != role:
            continue
        if want is not None:
            have = _norm(el.name)
            if (have != want) if exact else (want not in have):
                continue
        out.append(el)
    return out


def find(
    obs: Observation | str, role: str | None = None, name: str | None = None, exact: bool = False
) -> Element:
    """The first matching element.

    Raises:
        ExpertError: nothing matches (the message shows what was looked for and the URL).
    """
    found = find_all(obs, role, name, exact)
    if not found:
        url = obs.url if isinstance(obs, Observation) else ""
        raise ExpertError(f"expert: no {role or 'element'} named {name!r} on {url}")
    return found[0]


def maybe(
    obs: Observation | str, role: str | None = None, name: str | None = None, exact: bool = False
) -> Element | None:
    """The first matching element, or None."""
    found = find_all(obs, role, name, exact)
    return found[0] if found else None


# -- step builders: action text in the model's syntax + rationale ------------------------


def click(el: Element, why: str) -> Step:
    return Step(format_action(Action("Click", element=el.id)), why)


def type_text(el: Element, text: str, why: str) -> Step:
    return Step(format_action(Action("Type", element=el.id, argument=text)), why)


def search(el: Element, text: str, why: str) -> Step:
    return Step(format_action(Action("Search", element=el.id, argument=text)), why)


def select(el: Element, option: str, why: str) -> Step:
    return Step(
        format_action(Action("Select Dropdown Option", element=el.id, argument=option)), why
    )


def answer(message: str, why: str) -> Step:
    return Step(format_action(Action("exit", argument=message)), why)


def scroll_down(why: str) -> Step:
    return Step(format_action(Action("Scroll Down")), why)


def go_back(why: str) -> Step:
    return Step(format_action(Action("go_backward")), why)
