"""Task templates of the shopping site (being written)."""

from webagent_r1.tasks.suite import Template

TEMPLATES: list[Template] = []
