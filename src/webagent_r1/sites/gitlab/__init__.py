"""The code-hosting site ("gitlab"): WebArena's GitLab, served on port 8023.

Projects with repository files, commits, issues, merge requests, members and stars, under
GitLab's URLs (``/{namespace}/{project}/-/issues`` ...), so WebArena's GitLab task configs and
their ``__GITLAB__`` start URLs work. Default account: ``byteblaze`` / ``hello1234``.
"""

from __future__ import annotations

from webagent_r1.sites.base import Site
from webagent_r1.sites.gitlab import views
from webagent_r1.sites.gitlab.db import GITLAB_BACKEND, GITLAB_USERS, SITE_VERSION

GITLAB = Site.from_views(
    views, "GitLab", 8023, GITLAB_BACKEND, GITLAB_USERS, login_redirect="/dashboard/projects"
)
"""The code-hosting site."""

__all__ = ["GITLAB", "GITLAB_BACKEND", "SITE_VERSION"]
