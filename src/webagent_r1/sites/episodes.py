"""The env's view of the embedded sites: one isolated instance and login per episode.

``EmbeddedSites`` implements ``env.SiteBackend``: ``begin`` creates a fresh instance (a copy
of the pristine database), sets the instance cookie on the episode's browser context and, for
tasks that name a user, the site's login-session cookie, so the episode starts logged in
without typing a password; ``end`` deletes the instance.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import urlsplit

from webagent_r1.sites.server import RunningSites, start_sites
from webagent_r1.types import Task


class EmbeddedSites:
    """Site backend over running embedded sites (``start_sites``).

    Args:
        running: the servers; ``EmbeddedSites.start()`` starts them for you.
    """

    def __init__(self, running: RunningSites) -> None:
        self.running = running
        self.urls = dict(running.urls)

    @classmethod
    def start(
        cls, site_names: list[str] | None = None, ports: str | dict | None = "auto"
    ) -> EmbeddedSites:
        """Start the sites (free ports by default) and wrap them."""
        return cls(start_sites(site_names, ports=ports))

    def stop(self) -> None:
        self.running.stop()

    def resolve_url(self, url: str) -> str:
        # Longest names first: __SHOPPING_ADMIN__ must not be eaten by __SHOPPING__.
        for name in sorted(self.urls, key=len, reverse=True):
            url = url.replace(f"__{name.upper()}__", self.urls[name])
        return url

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

    async def begin(self, task: Task, session) -> str | None:
        instance_id = await asyncio.to_thread(self.running.create_instance)
        cookies = self.running.instance_cookies(instance_id)
        if task.user:
            for site in task.sites:
                cookies.append(self.running.login_cookie(site, instance_id, task.user))
        await session.context.add_cookies(cookies)
        return instance_id

    async def end(self, instance_id: str | None) -> None:
        if instance_id is not None:
            await asyncio.to_thread(self.running.delete_instance, instance_id)
