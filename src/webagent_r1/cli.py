"""The ``webagent-r1`` command line.

Errors a user can hit (bad config, missing browser, missing model, malformed task file) are
printed as one line without a traceback; ``WEBAGENT_R1_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Annotated

import typer
from rich.console import Console

from webagent_r1 import __version__

app = typer.Typer(
    name="webagent-r1",
    help="Train web agents with end-to-end multi-turn RL (WebAgent-R1).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
model_app = typer.Typer(help="Prepare and inspect policy models.", no_args_is_help=True)
sites_app = typer.Typer(help="The embedded web sites.", no_args_is_help=True)
app.add_typer(model_app, name="model")
app.add_typer(sites_app, name="sites")

console = Console(stderr=True)

ConfigOpt = Annotated[
    str | None, typer.Option("--config", "-c", help="YAML recipe (see configs/).")
]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(help="Config overrides as section.key=value, e.g. env.max_turns=5."),
]


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version.")] = False,
) -> None:
    if version:
        print(__version__)
        raise typer.Exit()


@model_app.command("prepare")
def model_prepare(
    name: Annotated[str, typer.Argument(help="Registry name of a bundled model.")] = (
        "smollm2-135m-instruct"
    ),
    force: Annotated[bool, typer.Option(help="Convert again even if cached.")] = False,
) -> None:
    """Convert the bundled offline model to a cached Hugging Face folder (once)."""
    from webagent_r1.policy.models import prepare_model

    path = prepare_model(name, force=force, progress=lambda m: console.print(f"[bold]{m}"))
    print(path)


@model_app.command("list")
def model_list() -> None:
    """List registry models and whether they are prepared."""
    from webagent_r1.policy.models import REGISTRY, GGUFSource, is_prepared

    for name, src in REGISTRY.items():
        where = "bundled (offline)" if isinstance(src, GGUFSource) else f"hub: {src}"
        ready = "prepared" if is_prepared(name) else ""
        print(f"{name:28s} {where:30s} {ready}")


@sites_app.command("serve")
def sites_serve(
    host: Annotated[str, typer.Option(help="Interface to bind (keep it local).")] = "127.0.0.1",
    port_offset: Annotated[int, typer.Option(help="Added to every site's default port.")] = 0,
    only: Annotated[
        list[str] | None, typer.Option("--site", help="Serve only these sites.")
    ] = None,
) -> None:
    """Serve the embedded sites until Ctrl-C and print their URLs."""
    from webagent_r1.sites.server import serve_forever

    serve_forever(site_names=only or None, host=host, port_offset=port_offset)


@app.command()
def quickstart(
    config: ConfigOpt = None,
    overrides: OverridesArg = None,
    episodes: Annotated[int, typer.Option(help="Episodes to run.")] = 3,
) -> None:
    """Run the main end-to-end path on this machine (embedded sites, bundled model, CPU)."""
    from webagent_r1.quickstart import run_quickstart

    asyncio.run(run_quickstart(config, overrides or [], episodes=episodes))


def main() -> None:
    """Console entry point: run the app, turning user errors into one-line messages."""
    from webagent_r1.errors import user_error_types

    try:
        app()
    except user_error_types() as e:
        if os.environ.get("WEBAGENT_R1_DEBUG"):
            raise
        console.print(f"[red]error:[/red] {e}")
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        sys.exit(130)


if __name__ == "__main__":
    main()
