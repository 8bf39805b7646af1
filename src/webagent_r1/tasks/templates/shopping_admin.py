"""Task templates of the shopping_admin site (being written)."""

from webagent_r1.tasks.suite import Template

TEMPLATES: list[Template] = []
