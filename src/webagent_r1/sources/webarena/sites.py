"""WebArena's self-hosted sites as the env's ``SiteBackend``: URLs, login, checks, reset hook.

The sites are hosted by the user (WebArena's Docker images or an AMI); their base URLs come
from environment variables in BrowserGym's convention:

=================  ======================  =========================================
site               variable                e.g.
=================  ======================  =========================================
shopping           ``WA_SHOPPING``         ``http://myhost:7770``
shopping_admin     ``WA_SHOPPING_ADMIN``   ``http://myhost:7780/admin``
reddit             ``WA_REDDIT``           ``http://myhost:9999``
gitlab             ``WA_GITLAB``           ``http://myhost:8023``
map                ``WA_MAP``              ``http://myhost:3000``
wikipedia          ``WA_WIKIPEDIA``        ``http://myhost:8888/wikipedia_en_all_…``
homepage           ``WA_HOMEPAGE``         ``http://myhost:4399``
=================  ======================  =========================================

Only the sites the chosen tasks use must be set. ``WA_GITLAB_SSH_PORT`` (default 2222, the
SSH port of WebArena's GitLab image) is the port of GitLab's SSH clone URLs: a reference
answer on ``ssh://git@localhost:2222/`` (task 71) is graded against the GitLab host of
``WA_GITLAB`` and this port, as the site shows them. WebArena's sites share state across
episodes (there is no per-episode instance): tasks that write (post, order, edit) change the
site for later ones, so the sites must be reset between runs: ``WA_RESET_COMMAND`` (any shell
command, e.g. a script that restarts the containers) and/or ``WA_FULL_RESET`` (BrowserGym's
reset server: ``GET $WA_FULL_RESET/reset``, then poll ``/status``) are run by
``WebArenaSites.reset()``.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterable, Mapping
from typing import Literal
from urllib.parse import urlsplit

import httpx

from webagent_r1.browser import BrowserSession
from webagent_r1.grading.base import EnvError
from webagent_r1.sources.webarena.data import (
    LOGIN_SITES,
    PLACEHOLDERS,
    SCORINGS,
    SITES,
    login_sites_of,
    needs_judge,
    sites_used,
)
from webagent_r1.sources.webarena.judge import Judge, JudgeNotConfiguredError, OpenAIJudge
from webagent_r1.sources.webarena.judge import not_configured_message as judge_message
from webagent_r1.sources.webarena.login import DEFAULT_ACCOUNTS, Account, ui_login
from webagent_r1.types import Task

ENV_VARS: dict[str, str] = {site: f"WA_{site.upper()}" for site in (*SITES, "homepage")}
"""Site name → the environment variable holding its base URL (BrowserGym's names)."""
ENV_GITLAB_SSH_PORT = "WA_GITLAB_SSH_PORT"
REFERENCE_GITLAB_SSH = "ssh://git@localhost:2222/"
"""The SSH clone URL prefix the configs' reference answers hard-code (task 71)."""
ENV_RESET_COMMAND = "WA_RESET_COMMAND"
ENV_FULL_RESET = "WA_FULL_RESET"
AND = " |AND| "
"""Separator of a start_url that opens several pages."""

LoginPolicy = Literal["storage_state", "all", "none"]


class SitesNotConfiguredError(EnvError):
    """Site URLs are missing or the sites do not answer; the message names them."""


class ResetError(EnvError):
    """The reset hook failed."""


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme and parts.netloc else ""


class WebArenaSites:
    """User-hosted WebArena sites: the ``SiteBackend`` of WebArena-Lite episodes.

    Args:
        urls: site name → base URL (see the module doc); ``from_env`` reads ``WA_*``.
        accounts: site name → account; default WebArena's (``login.DEFAULT_ACCOUNTS``).
        judge: the LLM judge for ``fuzzy_match`` (``judge.OpenAIJudge``), or None.
        login: which sites ``begin`` logs in to: ``"storage_state"`` (the sites named by the
            task's ``storage_state``, as WebArena and VAB-WebArena-Lite), ``"all"`` (every
            site of the task that has an account, as BrowserGym) or ``"none"``.
        settle_s: after program_html opens a page, wait up to this long for the network to
            go idle (WebArena sleeps 3 s) before reading it.
        reset_command: shell command run by ``reset()``.
        reset_url: BrowserGym-style reset server root run by ``reset()``.
        scoring: the rules ``webarena.evaluate`` grades by: ``"vab"`` (VisualAgentBench's,
            which scored the paper's numbers) or ``"webarena"`` (see ``evaluators``).
        gitlab_ssh_port: GitLab's SSH port, for SSH clone URLs in reference answers.
    """

    def __init__(
        self,
        urls: Mapping[str, str],
        *,
        accounts: Mapping[str, Account] | None = None,
        judge: Judge | None = None,
        login: LoginPolicy = "storage_state",
        settle_s: float = 3.0,
        reset_command: str | None = None,
        reset_url: str | None = None,
        scoring: str = "vab",
        gitlab_ssh_port: int = 2222,
    ) -> None:
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, not {scoring!r}")
        unknown = sorted(set(urls) - set(ENV_VARS))
        if unknown:
            raise ValueError(f"unknown WebArena site(s) {unknown}; known: {', '.join(ENV_VARS)}")
        if login not in ("storage_state", "all", "none"):
            raise ValueError(f"login must be 'storage_state', 'all' or 'none', not {login!r}")
        self.urls = {k: v.rstrip("/") for k, v in urls.items() if v}
        self.accounts = {**DEFAULT_ACCOUNTS, **(accounts or {})}
        self.judge = judge
        self.login = login
        self.settle_s = settle_s
        self.reset_command = reset_command
        self.reset_url = reset_url.rstrip("/") if reset_url else None
        self.scoring = scoring
        self.gitlab_ssh_port = gitlab_ssh_port

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **kwargs: object) -> WebArenaSites:
        """Sites from ``WA_*`` variables; the judge from ``WA_JUDGE_*``; the reset hook from
        ``WA_RESET_COMMAND`` / ``WA_FULL_RESET``. Keyword arguments override.

        Raises:
            JudgeNotConfiguredError: the judge variables are only half set.
            SitesNotConfiguredError: ``WA_GITLAB_SSH_PORT`` is not a port number.
        """
        env = os.environ if env is None else env
        urls = {site: env[var] for site, var in ENV_VARS.items() if env.get(var)}
        port = env.get(ENV_GITLAB_SSH_PORT) or "2222"
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise SitesNotConfiguredError(
                f"{ENV_GITLAB_SSH_PORT} must be a port number (GitLab's SSH port), not {port!r}"
            )
        kw: dict[str, object] = {
            "gitlab_ssh_port": int(port),
            "judge": OpenAIJudge.from_env(env),
            "reset_command": env.get(ENV_RESET_COMMAND) or None,
            "reset_url": env.get(ENV_FULL_RESET) or None,
        }
        kw.update(kwargs)
        return cls(urls, **kw)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return (
            f"WebArenaSites({self.urls!r}, login={self.login!r}, judge={self.judge!r}, "
            f"scoring={self.scoring!r})"
        )

    # -- URLs -------------------------------------------------------------------------

    def url(self, site: str) -> str:
        """Base URL of ``site``.

        Raises:
            SitesNotConfiguredError: its variable is not set.
        """
        if site not in self.urls:
            raise SitesNotConfiguredError(
                f"the WebArena site {site!r} has no URL: set {ENV_VARS.get(site, site)} "
                "(see docs/webarena-lite.md)"
            )
        return self.urls[site]

    def substitute(self, text: str) -> str:
        """Replace every placeholder (``__SHOPPING__`` …) of a configured site by its URL."""
        for ph, site in PLACEHOLDERS.items():
            if ph in text and site in self.urls:
                text = text.replace(ph, self.urls[site])
        return text

    def gitlab_ssh(self) -> str | None:
        """``ssh://git@<GitLab host>:<gitlab_ssh_port>/``; None without a GitLab URL."""
        if "gitlab" not in self.urls:
            return None
        host = urlsplit(self.urls["gitlab"]).hostname or "localhost"
        host = f"[{host}]" if ":" in host else host  # an IPv6 address
        return f"ssh://git@{host}:{self.gitlab_ssh_port}/"

    def substitute_all(self, value: object) -> object:
        """``substitute`` applied to every string inside lists and dicts (an eval spec); a
        reference SSH clone URL on ``localhost:2222`` gets the configured GitLab's."""
        text = self.substitute(json.dumps(value, ensure_ascii=False))
        ssh = self.gitlab_ssh()
        if ssh is not None:
            text = text.replace(REFERENCE_GITLAB_SSH, ssh)
        return json.loads(text)

    def resolve_url(self, url: str) -> str:
        """Placeholders → URLs. For a start URL of several pages (``a |AND| b``), the last:
        the page the episode starts on (``begin`` opens the others before it)."""
        return self.substitute(url.split(AND)[-1].strip())

    def origins(self, task: Task) -> list[str]:
        """Origins of the task's sites (incl. login and helper sites) and its start pages."""
        out = {_origin(self.urls[s]) for s in sites_used(task) if s in self.urls}
        out |= {_origin(self.substitute(u.strip())) for u in task.start_url.split(AND)}
        return sorted(o for o in out if o)

    def login_sites(self, task: Task) -> list[str]:
        """The sites ``begin`` logs in to for ``task``, by the ``login`` policy."""
        if self.login == "none":
            return []
        names = login_sites_of(task) if self.login == "storage_state" else task.sites
        return [s for s in dict.fromkeys(names) if s in LOGIN_SITES]

    def missing_sites(self, tasks: Iterable[Task] | None = None) -> list[str]:
        """Sites the tasks need (all of WebArena's when None) that have no URL."""
        needed = set(SITES) if tasks is None else set().union(*(sites_used(t) for t in tasks))
        return sorted(s for s in needed if s not in self.urls)

    # -- episodes (SiteBackend) ---------------------------------------------------------

    async def begin(self, task: Task, session: BrowserSession) -> str | None:
        """Log in to the task's sites in the episode's context; open extra start pages.

        A start URL of several pages (``a |AND| b |AND| c``; WebArena opens one tab each)
        opens them one after the other in the episode's tab: our action space has no tab
        switching, and this way ``go_backward`` reaches the earlier ones. The env then opens
        the last. Returns None (the sites have no per-episode instance).

        Raises:
            SitesNotConfiguredError: a site of the task has no URL.
            LoginError: a login failed.
            EnvError: an extra start page did not load.
        """
        missing = self.missing_sites([task])
        if missing:
            raise SitesNotConfiguredError(
                f"task {task.task_id} needs site(s) without a URL: set "
                f"{', '.join(ENV_VARS[s] for s in missing)}"
            )
        if task.geolocation:
            await session.context.grant_permissions(["geolocation"])
            await session.context.set_geolocation(task.geolocation)
        for site in self.login_sites(task):
            page = await session.context.new_page()
            try:
                await ui_login(page, site, self.url(site), self.accounts[site])
            finally:
                await page.close()
        for url in task.start_url.split(AND)[:-1]:
            err = await session.goto(self.substitute(url.strip()))
            if err:
                raise EnvError(f"task {task.task_id}: start page failed: {err}")
        return None

    async def end(self, instance_id: str | None) -> None:
        """Nothing to release: the sites are shared (reset them between runs)."""
        return None

    # -- checks and reset ---------------------------------------------------------------

    def unreachable(self, sites: Iterable[str], timeout_s: float = 10.0) -> list[str]:
        """``"site (url): why"`` for each site that does not answer HTTP (or answers 5xx)."""
        bad = []
        with httpx.Client(timeout=timeout_s, follow_redirects=True) as client:
            for site in sites:
                url = self.urls[site]
                try:
                    r = client.get(url)
                except httpx.HTTPError as e:
                    bad.append(f"{site} ({url}): {type(e).__name__}: {str(e)[:80] or 'no answer'}")
                    continue
                if r.status_code >= 500:
                    bad.append(f"{site} ({url}): answered HTTP {r.status_code}")
        return bad

    def reset(self, timeout_s: float = 900.0, poll_s: float = 20.0) -> bool:
        """Run the reset hook between runs; True when one is configured and succeeded.

        First ``reset_command`` (a shell command; must exit 0), then ``reset_url``
        (BrowserGym's protocol: ``GET {url}/reset`` answers 200, or 418 when a reset is
        already running; then ``GET {url}/status`` until it answers ``Ready for duty!``).
        Blocking: call it before a run, or in a thread from async code.

        Raises:
            ResetError: the command failed or timed out, or the reset server refused or
                did not finish within ``timeout_s``.
        """
        if self.reset_command:
            try:
                p = subprocess.run(
                    self.reset_command,
                    shell=True,
                    capture_output=True,
                    text=True,
                    timeout=timeout_s,
                )
            except subprocess.TimeoutExpired:
                raise ResetError(
                    f"reset command {self.reset_command!r} ran past {timeout_s:g} s"
                ) from None
            if p.returncode != 0:
                tail = (p.stderr or p.stdout).strip()[-300:]
                raise ResetError(
                    f"reset command {self.reset_command!r} exited {p.returncode}: {tail}"
                )
        if self.reset_url:
            _full_reset(self.reset_url, timeout_s, poll_s)
        return bool(self.reset_command or self.reset_url)


def _full_reset(base: str, timeout_s: float, poll_s: float) -> None:
    """BrowserGym's ``WA_FULL_RESET`` protocol."""
    t0 = time.monotonic()
    with httpx.Client(timeout=60.0) as client:
        try:
            r = client.get(f"{base}/reset")
        except httpx.HTTPError as e:
            raise ResetError(f"reset server {base}/reset does not answer: {e}") from None
        if r.status_code not in (200, 418):  # 418: a reset is already running
            raise ResetError(f"reset server {base}/reset answered HTTP {r.status_code}: {r.text}")
        while True:
            try:
                r = client.get(f"{base}/status")
            except httpx.HTTPError as e:
                raise ResetError(f"reset server {base}/status does not answer: {e}") from None
            if r.status_code != 200:
                raise ResetError(f"reset server {base}/status answered HTTP {r.status_code}")
            if r.text.strip() == "Ready for duty!":
                return
            if time.monotonic() - t0 > timeout_s:
                raise ResetError(f"the reset at {base} was still running after {timeout_s:g} s")
            time.sleep(poll_s)


def check_configured(
    sites: WebArenaSites | None = None,
    tasks: Iterable[Task] | None = None,
    *,
    check_reachable: bool = True,
    timeout_s: float = 10.0,
) -> None:
    """Fail fast, before any browser starts, when the tasks cannot run.

    Checks, in order: every site the tasks use has a URL; the judge is configured when a
    task uses ``fuzzy_match``; every such site answers HTTP.

    Args:
        sites: the backend; default ``WebArenaSites.from_env()``.
        tasks: the tasks to run; None checks all of WebArena's sites and no judge.
        check_reachable: also request each site once.
        timeout_s: per-site request timeout.

    Raises:
        SitesNotConfiguredError: names the missing ``WA_*`` variables, or the sites that do
            not answer and why.
        JudgeNotConfiguredError: tasks need the LLM judge and none is configured.
    """
    sites = WebArenaSites.from_env() if sites is None else sites
    tasks = None if tasks is None else list(tasks)
    missing = sites.missing_sites(tasks)
    if missing:
        names = ", ".join(ENV_VARS[s] for s in missing)
        raise SitesNotConfiguredError(
            f"WebArena-Lite needs the URLs of the sites it uses: set {names} "
            f"(e.g. export {ENV_VARS[missing[0]]}=http://<host>:<port>); "
            "see docs/webarena-lite.md for hosting the sites"
        )
    if tasks is not None and sites.judge is None:
        n = sum(needs_judge(t) for t in tasks)
        if n:
            raise JudgeNotConfiguredError(judge_message(n))
    if check_reachable:
        used = (
            sorted(set().union(*(sites_used(t) for t in tasks)))
            if tasks is not None
            else sorted(sites.urls)
        )
        bad = sites.unreachable([s for s in used if s in sites.urls], timeout_s)
        if bad:
            raise SitesNotConfiguredError(
                "WebArena site(s) not reachable: "
                + "; ".join(bad)
                + " — start them or fix the WA_* URLs"
            )
