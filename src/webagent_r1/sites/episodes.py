"""The env's view of the embedded sites: one isolated instance and login per episode.

``EmbeddedSites`` implements ``grading.base.SiteBackend``: ``begin`` creates a fresh instance
(a copy of the pristine database), sets the instance cookie on the episode's browser context
and, for tasks that name a user, the site's login-session cookie, so the episode starts logged
in without typing a password; ``end`` deletes the instance. A cross-site task may name one
account per site (``task.extra["logins"]``), and its pages link to its other sites (the
agent's only way there).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from urllib.parse import urlsplit

from webagent_r1.sites.server import RunningSites, _registry, start_sites
from webagent_r1.types import Task


def logins(task: Task) -> dict[str, str]:
    """Site -> account the episode starts logged in as.

    ``task.extra["logins"]`` (cross-site tasks, whose sites have different accounts) names
    one account per site; otherwise ``task.user`` is logged in on every site of the task.
    """
    per_site = task.extra.get("logins")
    if per_site:
        return {str(k): str(v) for k, v in per_site.items()}
    return {site: task.user for site in task.sites} if task.user else {}


class EmbeddedSites:
    """Site backend over running embedded sites (``start_sites``).

    Args:
        running: the servers; ``EmbeddedSites.start()`` starts them for you.
    """

    def __init__(self, running: RunningSites) -> None:
        self.running = running
        self.urls = dict(running.urls)
        # what the agent is shown: each site at its default port, whatever port it runs on
        # (free ports by default), so that prompts do not depend on the run
        shown = {}
        for name, url in self.urls.items():
            site = _registry().get(name)
            p = urlsplit(url)
            if site is not None and p.hostname is not None:
                shown[f"{p.scheme}://{p.netloc}"] = f"{p.scheme}://{p.hostname}:{site.default_port}"
        self._shown = shown
        # an origin followed by a digit is another port (":3000" in ":30001")
        self._origin = re.compile("|".join(f"{re.escape(o)}(?![0-9])" for o in shown) or "(?!)")

    @classmethod
    def start(
        cls,
        site_names: list[str] | None = None,
        ports: str | dict | None = "auto",
        latency_ms: float = 0.0,
    ) -> EmbeddedSites:
        """Start the sites (free ports by default) and wrap them; ``latency_ms`` delays every
        page response (see ``start_sites``)."""
        return cls(start_sites(site_names, ports=ports, latency_ms=latency_ms))

    def stop(self) -> None:
        self.running.stop()

    def resolve_url(self, url: str) -> str:
        # Longest names first: __SHOPPING_ADMIN__ must not be eaten by __SHOPPING__.
        for name in sorted(self.urls, key=len, reverse=True):
            url = url.replace(f"__{name.upper()}__", self.urls[name])
        return url

    def display_url(self, url: str) -> str:
        """``url`` (or any text) as the agent's prompt shows it: each running site's origin
        at the site's default port (the one ``webagent-r1 sites serve`` and WebArena use)
        rather than the port it runs on; other URLs unchanged."""
        return self._origin.sub(lambda m: self._shown[m.group()], url)

    def origins(self, task: Task) -> list[str]:
        names = task.sites or list(self.urls)
        unknown = [n for n in names if n not in self.urls]
        if unknown:
            raise ValueError(
                f"task {task.task_id} needs site(s) {unknown}, not running "
                f"(running: {sorted(self.urls)})"
            )
        out = set()
        for n in names:
            p = urlsplit(self.urls[n])
            out.add(f"{p.scheme}://{p.netloc}")
        return sorted(out)

    def instance_db_path(self, site: str, instance_id: str) -> Path:
        return self.running.instance_db_path(site, instance_id)

    def pristine_db_path(self, site: str) -> Path:
        return self.running.pristine_db_path(site)

    async def begin(self, task: Task, session) -> str | None:
        instance_id = await asyncio.to_thread(self.running.create_instance)
        cookies = self.running.instance_cookies(instance_id)
        for site, user in logins(task).items():
            cookies.append(self.running.login_cookie(site, instance_id, user))
        if len(task.sites) > 1:  # cross-site: every page links to the task's other sites
            cookies += self.running.sites_cookies(task.sites)
        await session.context.add_cookies(cookies)
        return instance_id

    def keep_alive(self, instance_id: str) -> bool:
        """Called by the env at every step: an episode whose actions make no request (typing,
        scrolling, invalid actions) while it waits its turns must not lose its instance to
        the idle reaper, which is there for instances a dead client left behind. False: the
        instance is gone (the env then ends the episode as an env error)."""
        return self.running.touch_instance(instance_id)

    async def end(self, instance_id: str | None) -> None:
        if instance_id is not None:
            await asyncio.to_thread(self.running.delete_instance, instance_id)
