"""Task templates of the embedded sites, one module per site."""

from webagent_r1.tasks.templates import cross_site, gitlab, map, reddit, shopping, shopping_admin

TEMPLATE_MODULES = [shopping, shopping_admin, reddit, map, gitlab, cross_site]
