"""``EmbeddedSites.display_url``: the prompt shows each embedded site at its default port,
whatever free port it runs on (pure: no server is started)."""

from __future__ import annotations

from types import SimpleNamespace

from webagent_r1.sites.episodes import EmbeddedSites


def _sites(urls: dict[str, str]) -> EmbeddedSites:
    return EmbeddedSites(SimpleNamespace(urls=urls))  # type: ignore[arg-type]


def test_running_origins_are_shown_at_the_default_ports() -> None:
    # map's default is 3000, reddit's 9999; ":4000" is a prefix of ":40001"
    sites = _sites({"map": "http://127.0.0.1:4000", "reddit": "http://127.0.0.1:40001"})
    show = sites.display_url
    assert (
        show("http://127.0.0.1:4000/place/3?q=a%20b#x") == "http://127.0.0.1:3000/place/3?q=a%20b#x"
    )
    assert show("http://127.0.0.1:40001/f/gardening") == "http://127.0.0.1:9999/f/gardening"
    assert show("http://127.0.0.1:4000") == "http://127.0.0.1:3000"
    # other origins, and another port that starts with a site's, are left alone
    assert show("http://127.0.0.1:40002/f") == "http://127.0.0.1:40002/f"
    assert show("http://example.com:4000/") == "http://example.com:4000/"
    assert show("about:blank") == "about:blank"
    # in text too: a cross-site link
    assert show('href="http://127.0.0.1:40001/f/x"') == 'href="http://127.0.0.1:9999/f/x"'


def test_an_unknown_site_name_is_shown_as_it_runs() -> None:
    sites = _sites({"mystery": "http://127.0.0.1:5555"})
    assert sites.display_url("http://127.0.0.1:5555/a") == "http://127.0.0.1:5555/a"
