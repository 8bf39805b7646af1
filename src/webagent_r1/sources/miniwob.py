"""MiniWoB++ through our env: the ``miniwob`` package's task pages, our browser and actions.

The ``miniwob`` PyPI package (1.1.0) ships the HTML of its 125 tasks; we use nothing else
from it (its Python side drives Selenium). ``MiniWoBServer`` serves the HTML folder on a free
local port, once per process. Each episode is one ``WebEnv`` reset on a fresh browser
context, as for the embedded sites (the browser is never relaunched):

1. load ``<server>/miniwob/<task>.html``; its ``onload`` shows the START cover;
2. ``MiniWoBSites.start_episode`` starts the episode as the package's own
   ``selenium_instance.begin_task`` does: ``Math.seedrandom(seed)``,
   ``core.setDataMode(split)``, ``core.startEpisodeReal()``; before that it lengthens
   ``core.EPISODE_MAX_TIME`` (10-30 s in the pages, too short for a CPU model; 24 h by
   default, ``tasks.miniwob.episode_max_time_ms``) and replaces ``core.startEpisode`` with a
   no-op so that the page never starts a second problem: the first result stays in the
   page's globals. The instruction (``core.getUtterance()``, the text of ``#query``) becomes
   ``task.intent``;
3. the agent acts through our action space; after each action ``episode_done`` reads
   ``WOB_DONE_GLOBAL`` and the env ends the episode when the page says it is done;
4. ``evaluate_miniwob``: reward 1 when the page finished with raw reward
   ``WOB_RAW_REWARD_GLOBAL`` >= 1 (the package's ``get_binary_reward``: success without the
   time discount, and without partial credit such as hot-cold's 0.5), else 0.

Task instances are (task, seed) pairs: the test split takes the seeds ``test_seeds``, the
train split ``train_seeds`` (disjoint, checked by the config). ``SUPPORTED`` lists the tasks
our action space and text observation can express; ``EXCLUDED`` names every other task of
the package with the reason.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import re
import sys
import threading
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from playwright.async_api import Error as PlaywrightError

from webagent_r1.browser import BrowserCrashedError, BrowserSession
from webagent_r1.browser.execute import error_text, is_fatal
from webagent_r1.grading.base import EvalContext, EvalResult, EvaluatorFn, SiteBackend
from webagent_r1.sources.base import TaskSource
from webagent_r1.tasks.io import TaskError
from webagent_r1.types import Task

PLACEHOLDER = "__MINIWOB__"
"""Base-URL placeholder of MiniWoB++ start URLs (``__MINIWOB__/miniwob/click-button.html``)."""

SITE = "miniwob"
"""``Task.sites`` of every MiniWoB++ task (results are reported per task as ``template``)."""

NO_TIMER_MS = 86_400_000
"""The page timer when ``episode_max_time_ms`` is 0: 24 h (setTimeout's limit is ~24.8 days)."""

INSTALL_HINT = (
    "install the MiniWoB++ pages with `.venv/bin/pip install --no-deps miniwob==1.1.0` "
    "(or run `bash scripts/setup.sh`)"
)


class MiniWoBError(TaskError):
    """MiniWoB++ cannot be used as asked (package missing, unknown or unsupported task)."""


# ------------------------------------------------------------------------------------------
# Which tasks: every task of the package is either supported or excluded with a reason.
# ------------------------------------------------------------------------------------------

SUPPORTED: tuple[str, ...] = (
    "buy-ticket",
    "choose-date-easy",
    "choose-list",
    "click-button",
    "click-button-sequence",
    "click-checkboxes",
    "click-checkboxes-large",
    "click-checkboxes-soft",
    "click-checkboxes-transfer",
    "click-collapsible",
    "click-collapsible-2",
    "click-collapsible-2-nodelay",
    "click-collapsible-nodelay",
    "click-dialog",
    "click-dialog-2",
    "click-link",
    "click-menu",
    "click-option",
    "click-tab",
    "click-tab-2",
    "click-tab-2-easy",
    "click-tab-2-hard",
    "click-tab-2-medium",
    "click-test",
    "click-test-2",
    "click-test-transfer",
    "click-widget",
    "copy-paste",
    "copy-paste-2",
    "enter-date",
    "enter-password",
    "enter-text",
    "enter-text-2",
    "enter-text-dynamic",
    "enter-time",
    "find-greatest",
    "find-word",
    "focus-text",
    "focus-text-2",
    "form-sequence-2",
    "generate-number",
    "guess-number",
    "login-user",
    "login-user-popup",
    "multi-layouts",
    "multi-orderings",
    "navigate-tree",
    "odd-or-even",
    "phone-book",
    "read-table",
    "read-table-2",
    "search-engine",
    "simple-algebra",
    "simple-arithmetic",
    "text-transform",
    "unicode-test",
    "use-autocomplete",
    "use-autocomplete-nodelay",
    "use-spinner",
)
"""MiniWoB++ tasks our action space and text observation can express (alphabetical)."""

_DRAG = "needs drag-and-drop or a mouse gesture (the action space has no drag)"
_POINT = "needs a click at pixel coordinates inside a drawing (no element to name)"
_VISUAL = "the information is only visual (colours, SVG or images the text view omits)"


def _icons(which: str) -> str:
    return f"its {which} controls are icons without text, which the text view omits or merges"


_DATEPICKER = (
    "the date picker's Prev/Next month controls are not numbered by the text view and its "
    "date field is read-only, so most dates cannot be reached"
)

EXCLUDED: dict[str, str] = {
    "ascending-numbers": _VISUAL + ": the numbers are SVG text",
    "bisect-angle": _POINT,
    "book-flight": _DATEPICKER,
    "book-flight-nodelay": _DATEPICKER,
    "choose-date": _DATEPICKER,
    "choose-date-medium": (
        "half its dates are in November, which needs the date picker's Prev control; the text "
        "view does not number it and the date field is read-only"
    ),
    "choose-date-nodelay": _DATEPICKER,
    "circle-center": _POINT,
    "click-color": _VISUAL,
    "click-menu-2": _VISUAL + ": the target is 'the item with the icon'",
    "click-pie": _VISUAL + ": the pie menu is SVG",
    "click-pie-nodelay": _VISUAL + ": the pie menu is SVG",
    "click-scroll-list": (
        "often needs several options of a multi-select; Select Dropdown Option sets exactly one"
    ),
    "click-shades": _VISUAL,
    "click-shape": _VISUAL,
    "count-shape": _VISUAL,
    "count-sides": _VISUAL,
    "daily-calendar": _DRAG,
    "drag-box": _DRAG,
    "drag-circle": _DRAG,
    "drag-cube": _DRAG,
    "drag-items": _DRAG,
    "drag-items-grid": _DRAG,
    "drag-shapes": _DRAG,
    "drag-shapes-2": _DRAG,
    "drag-single-shape": _DRAG,
    "drag-sort-numbers": _DRAG,
    "draw-circle": _DRAG,
    "draw-line": _DRAG,
    "email-inbox": _icons("reply, forward, trash, star"),
    "email-inbox-delete": _icons("trash"),
    "email-inbox-forward": _icons("forward"),
    "email-inbox-forward-nl": _icons("forward"),
    "email-inbox-forward-nl-turk": _icons("forward"),
    "email-inbox-important": _icons("star"),
    "email-inbox-nl-turk": _icons("reply, forward, trash, star"),
    "email-inbox-noscroll": _icons("reply, forward, trash, star"),
    "email-inbox-reply": _icons("reply"),
    "email-inbox-star-reply": _icons("star, reply"),
    "find-midpoint": _POINT,
    "form-sequence": "needs a slider (dragging or arrow keys)",
    "form-sequence-3": (
        "its dropdown is a custom widget whose options the text view does not show "
        "(clicking its field times out)"
    ),
    "grid-coordinate": _POINT,
    "highlight-text": "needs selecting text with the mouse",
    "highlight-text-2": "needs selecting text with the mouse",
    "hot-cold": _POINT,
    "identify-shape": _VISUAL,
    "number-checkboxes": _VISUAL + ": the digit to copy is an image",
    "order-food": "its +/- controls are plain spans the text view does not number",
    "resize-textarea": _DRAG,
    "right-angle": _POINT,
    "scroll-text": (
        "the answer is the last word of a long textarea, and the text view shows the first "
        "100 characters of a field's value"
    ),
    "scroll-text-2": "needs scrolling inside a textarea (Scroll Up/Down move the page)",
    "sign-agreement": (
        "two of its three variants need scrolling inside a textarea (Scroll Up/Down move the page)"
    ),
    "social-media": _icons("like, reply, retweet, share"),
    "social-media-all": _icons("like, reply, retweet, share"),
    "social-media-some": _icons("like, reply, retweet, share"),
    "stock-market": (
        "needs acting within about a second of a price change; a model that takes seconds "
        "per turn cannot"
    ),
    "terminal": "the terminal reads key presses; Type fills a field without pressing keys",
    "text-editor": "needs selecting text with the mouse, and its style buttons are icons",
    "tic-tac-toe": "the board's cells are empty spans the text view does not number",
    "use-colorwheel": _DRAG + "; the colour is only visual",
    "use-colorwheel-2": _DRAG + "; the colour is only visual",
    "use-slider": "needs a slider (dragging or arrow keys)",
    "use-slider-2": "needs sliders (dragging or arrow keys)",
    "visual-addition": _VISUAL + ": the blocks to count are drawn boxes",
}
"""Task name -> why our action space or text observation cannot express it."""


def check_task_names(names: list[str]) -> list[str]:
    """``names`` when all are supported tasks (empty: every supported task).

    Raises:
        MiniWoBError: a name is excluded (with the reason) or unknown (with a suggestion).
    """
    if not names:
        return list(SUPPORTED)
    for name in names:
        if name in EXCLUDED:
            raise MiniWoBError(
                f"MiniWoB++ task {name!r} is not supported: {EXCLUDED[name]} "
                "(docs/miniwob.md lists the supported tasks)"
            )
        if name not in SUPPORTED:
            near = difflib.get_close_matches(name, [*SUPPORTED, *EXCLUDED], n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise MiniWoBError(f"unknown MiniWoB++ task {name!r}{hint}")
    return list(dict.fromkeys(names))


def miniwob_tasks(split: str, names: list[str], seeds: range) -> list[Task]:
    """One ``Task`` per (task, seed): ``miniwob.<task>/<seed>``, in task then seed order.

    ``intent`` is empty until the episode's reset reads the instruction from the page (it
    depends on the seed and is known only once the page has generated the problem).

    Raises:
        MiniWoBError: an unknown or unsupported task name.
        ValueError: a split other than train, test or val.
    """
    if split not in ("train", "test", "val"):
        raise ValueError(f"MiniWoB++ splits are train, test and val (by seed), got {split!r}")
    return [
        Task(
            task_id=f"miniwob.{name}/{seed}",
            intent="",
            start_url=f"{PLACEHOLDER}/miniwob/{name}.html",
            sites=[SITE],
            intent_template_id=f"miniwob.{name}",
            instantiation_dict={"task": name, "seed": seed},
            split=split,
            extra={"template": f"miniwob.{name}", "miniwob": {"task": name, "seed": seed}},
        )
        for name in check_task_names(names)
        for seed in seeds
    ]


# ------------------------------------------------------------------------------------------
# Serving the package's HTML.
# ------------------------------------------------------------------------------------------


def html_dir() -> Path:
    """The ``html/`` folder of the installed ``miniwob`` package (never imported: its
    ``__init__`` pulls in gymnasium).

    Raises:
        MiniWoBError: the package is not installed, or has no task pages.
    """
    spec = importlib.util.find_spec("miniwob")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise MiniWoBError(f"the miniwob package is not installed: {INSTALL_HINT}")
    folder = Path(locations[0]) / "html"
    if not (folder / "miniwob" / "click-button.html").is_file():
        raise MiniWoBError(
            f"the miniwob package at {folder.parent} has no task pages: {INSTALL_HINT}"
        )
    return folder


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        # An episode's context closed while a script was still loading: nothing to report.
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def end_headers(self) -> None:
        # The pages never change: let Chromium cache core.js, jQuery and d3 across contexts.
        self.send_header("Cache-Control", "public, max-age=86400")
        super().end_headers()


class MiniWoBServer:
    """A static HTTP server of the package's ``html/`` folder on 127.0.0.1 (a free port).

    Args:
        folder: the folder to serve (default: ``html_dir()``).
        port: 0 picks a free port.
    """

    def __init__(self, folder: Path | None = None, port: int = 0) -> None:
        self.folder = folder or html_dir()
        handler = functools.partial(_QuietHandler, directory=str(self.folder))
        self._server = _Server(("127.0.0.1", port), handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="miniwob-http", daemon=True
        )
        self._thread.start()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        """Base URL, e.g. ``http://127.0.0.1:43127``."""

    def stop(self) -> None:
        """Stop serving (safe to call twice)."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)


# ------------------------------------------------------------------------------------------
# The episode, driven through the page's own JS.
# ------------------------------------------------------------------------------------------

# One round trip: wait until the page's onload has run core.startEpisode() (the START cover;
# core.startEpisodeReal() before that would fail on the missing cover), then start as
# miniwob's selenium_instance.begin_task does: seed, data mode, startEpisodeReal. Before that:
# the page timer is lengthened, and core.startEpisode (which endEpisode calls to show START
# for the next problem) becomes a no-op, so the first result stays in WOB_* until the env
# reads it. The reward HUD (timer, averages) is hidden: it is not part of the task.
_START_JS = """async (a) => {
  const ready = () => typeof core !== 'undefined' && core.cover_div !== null &&
    typeof WOB_TASK_READY !== 'undefined' && WOB_TASK_READY;
  const t0 = Date.now();
  while (!ready()) {
    if (Date.now() - t0 > a.timeoutMs) return null;
    await new Promise((r) => setTimeout(r, 5));
  }
  core.EPISODE_MAX_TIME = a.maxTimeMs;
  core.startEpisode = function () {};
  Math.seedrandom(a.seed);
  core.setDataMode(a.mode);
  core.startEpisodeReal();
  core.hideDisplay();
  window.__webagentEpisode = true;
  const u = core.getUtterance();
  return typeof u === 'string' ? u : (u && u.utterance) || '';
}"""

# The page's verdict; null when the page is no longer the started episode (the agent went
# back, or the page reloaded): the episode is then lost.
_STATE_JS = """() => {
  if (window.__webagentEpisode !== true || typeof WOB_DONE_GLOBAL === 'undefined') return null;
  const r = WOB_REWARD_REASON;
  return {done: WOB_DONE_GLOBAL, raw: WOB_RAW_REWARD_GLOBAL, reward: WOB_REWARD_GLOBAL,
          reason: r === null || r === undefined ? null
                  : (typeof r === 'object' ? JSON.stringify(r) : String(r))};
}"""


@dataclass
class PageState:
    """What the MiniWoB++ page says about its episode."""

    done: bool
    raw_reward: float
    """Reward without the time discount (``WOB_RAW_REWARD_GLOBAL``); partial credit kept."""
    reward: float
    """The page's time-discounted reward (``WOB_REWARD_GLOBAL``), for information."""
    reason: str | None = None

    @property
    def success(self) -> bool:
        """Full success: raw reward 1 (the package's binary reward)."""
        return self.done and self.raw_reward >= 1.0


async def read_state(session: BrowserSession) -> PageState | None:
    """The page's episode state; None when the active tab is not the started episode.

    Raises:
        BrowserCrashedError: the page, context or browser died (an env error, not a failure).
    """
    page = session.page
    try:
        raw = await page.evaluate(_STATE_JS)
    except PlaywrightError as e:
        if is_fatal(page, e):
            raise BrowserCrashedError(f"reading the MiniWoB++ state: {error_text(e)}") from e
        return None  # the document changed under the call (a navigation in flight)
    if raw is None:
        return None
    return PageState(
        done=bool(raw["done"]),
        raw_reward=float(raw["raw"] or 0.0),
        reward=float(raw["reward"] or 0.0),
        reason=raw["reason"],
    )


class MiniWoBSites:
    """``SiteBackend`` + ``PageEpisodes`` over a ``MiniWoBServer``.

    Args:
        server: the running server.
        episode_max_time_ms: the page's episode timer; 0 = off (24 h).
        load_timeout_ms: how long the page's scripts may take to load.
    """

    def __init__(
        self, server: MiniWoBServer, episode_max_time_ms: int = 0, load_timeout_ms: int = 15000
    ) -> None:
        self.server = server
        self.max_time_ms = episode_max_time_ms or NO_TIMER_MS
        self.load_timeout_ms = load_timeout_ms

    def resolve_url(self, url: str) -> str:
        return url.replace(PLACEHOLDER, self.server.url)

    def origins(self, task: Task) -> list[str]:
        return [self.server.url]

    async def begin(self, task: Task, session: BrowserSession) -> str | None:
        return None

    async def end(self, instance_id: str | None) -> None:
        return None

    async def start_episode(self, task: Task, session: BrowserSession) -> None:
        """Start the seeded episode and fill ``task.intent`` with the page's instruction.

        Raises:
            MiniWoBError: the task has no MiniWoB++ seed, or the page gave no instruction.
        """
        spec = task.extra.get("miniwob")
        if not isinstance(spec, dict) or "seed" not in spec:
            raise MiniWoBError(f"task {task.task_id} is not a MiniWoB++ task (no extra.miniwob)")
        mode = "test" if task.split == "test" else "train"
        args = {
            "seed": spec["seed"],
            "mode": mode,
            "maxTimeMs": self.max_time_ms,
            "timeoutMs": self.load_timeout_ms,
        }
        raw = await session.page.evaluate(_START_JS, args)
        if raw is None:
            raise MiniWoBError(
                f"task {task.task_id}: the page's scripts did not load within "
                f"{self.load_timeout_ms / 1000:g} s"
            )
        utterance = " ".join(str(raw).split())
        if not utterance:
            raise MiniWoBError(f"task {task.task_id}: the page gave no instruction")
        # The instruction is a function of (task, seed, split): every episode of this Task
        # writes the same text, so episodes of one group may share the object.
        task.intent = utterance

    async def episode_done(self, session: BrowserSession) -> bool:
        state = await read_state(session)
        # A lost episode (the page left or reloaded) ends too: nothing could score it later.
        return state is None or state.done


async def evaluate_miniwob(ctx: EvalContext) -> EvalResult:
    """Reward 1 when the page finished its episode with raw reward >= 1, else 0."""
    state = await read_state(ctx.session)
    if state is None:
        return EvalResult(0.0, "the MiniWoB++ episode was lost (the task page was left)")
    if not state.done:
        return EvalResult(0.0, "the task page had not finished its episode")
    why = f" ({state.reason})" if state.reason else ""
    return EvalResult(
        1.0 if state.success else 0.0, f"MiniWoB++ raw reward {state.raw_reward:g}{why}"
    )


# ------------------------------------------------------------------------------------------
# The task source.
# ------------------------------------------------------------------------------------------


class MiniWoBSource(TaskSource):
    """MiniWoB++ as a task source (``tasks.source: miniwob``; see ``webagent_r1.sources``).

    Args:
        names: task names (empty: every supported task).
        test_seeds / train_seeds / val_seeds: seed ranges of the three splits (disjoint).
        episode_max_time_ms: the page timer (0: off).

    Raises:
        MiniWoBError: an unknown or unsupported task name.
        ValueError: overlapping seed ranges.
    """

    name = "miniwob"
    splits = ("train", "test", "val")
    grades_mid_episode = True  # the reward is read from the page's state, nothing changed

    def __init__(
        self,
        names: list[str] | None = None,
        test_seeds: range = range(0, 50),
        train_seeds: range = range(1000, 1200),
        episode_max_time_ms: int = 0,
        val_seeds: range = range(2000, 2050),
    ) -> None:
        self.seeds = {"test": test_seeds, "train": train_seeds, "val": val_seeds}
        for a, b in (("train", "test"), ("val", "test"), ("val", "train")):
            if set(self.seeds[a]) & set(self.seeds[b]):
                raise ValueError(f"{a} seeds {self.seeds[a]} overlap {b} seeds {self.seeds[b]}")
        self.names = check_task_names(list(names or []))
        self.episode_max_time_ms = episode_max_time_ms

    @classmethod
    def from_config(cls, cfg: Any) -> MiniWoBSource:
        """From a ``Config``'s ``tasks.miniwob`` section."""
        m = cfg.tasks.miniwob
        return cls(
            m.tasks,
            range(*m.test_seeds),
            range(*m.train_seeds),
            m.episode_max_time_ms,
            range(*m.val_seeds),
        )

    def tasks(self, split: str) -> list[Task]:
        """The (task, seed) instances of ``split`` (train | test | val)."""
        if split not in self.seeds:
            raise ValueError(f"MiniWoB++ splits are train, test and val (by seed), got {split!r}")
        return miniwob_tasks(split, self.names, self.seeds[split])

    @property
    def evaluator(self) -> EvaluatorFn:
        return evaluate_miniwob

    def _start(self) -> MiniWoBSites:
        html_dir()  # a missing package is a clear error before any browser starts
        return MiniWoBSites(MiniWoBServer(), self.episode_max_time_ms)

    def _stop(self, backend: SiteBackend) -> None:
        assert isinstance(backend, MiniWoBSites)
        backend.server.stop()


def package_task_names() -> list[str]:
    """The 125 task names the ``miniwob`` package registers (read from its source text,
    without importing it), for checking ``SUPPORTED`` + ``EXCLUDED`` against the package."""
    envs = html_dir().parent / "envs" / "miniwob_envs.py"
    return sorted(re.findall(r'subdomain = "([^"]+)"', envs.read_text()))
