"""`hearth-node`: the home node's command line (a thin skin over the library)."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Annotated

import typer

from hearth.protocol.console import emit, reporting, resolve_home

app = typer.Typer(
    help="Hearth home node: your always-on planner, relay and search exit.", no_args_is_help=True
)

HomeOption = Annotated[
    Path | None, typer.Option("--home", help="State directory (env HEARTH_NODE_HOME).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _home(home: Path | None) -> Path:
    return resolve_home(home, "HEARTH_NODE_HOME", "hearth-node")


@app.command()
def init(
    name: Annotated[str, typer.Option(help="Display name in the roster.")] = "",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create this node's identity and found a new private swarm."""
    from hearth.protocol.transport.membership import found_swarm

    with reporting(as_json):
        directory = _home(home)
        roster = found_swarm(directory, name or socket.gethostname())
        payload = {"peer_id": roster.founder, "home": str(directory), "roster_version": 1}
        emit(
            as_json,
            payload,
            lambda: typer.echo(
                f"New swarm founded.\n  node: {roster.founder}\n  home: {directory}"
            ),
        )


@app.command()
def roster(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Show the signed roster: members, roles and expiry."""
    from hearth.protocol.transport.membership import load_roster

    with reporting(as_json):
        directory = _home(home)
        current, _ = load_roster(directory)
        payload = {
            "version": current.version,
            "founder": current.founder,
            "not_after": current.not_after,
            "members": [
                {
                    "peer_id": m.peer_id,
                    "name": m.name,
                    "roles": sorted(m.roles),
                    "expires": m.expires,
                }
                for m in current.members
            ],
        }

        def render() -> None:
            from rich.console import Console
            from rich.table import Table

            table = Table(title=f"Roster v{current.version}")
            for column in ("peer id", "name", "roles", "expires"):
                table.add_column(column)
            for m in current.members:
                table.add_row(
                    m.peer_id,
                    m.name,
                    ", ".join(sorted(m.roles)),
                    "never" if m.expires is None else str(m.expires),
                )
            Console().print(table)

        emit(as_json, payload, render)


def main() -> None:
    app()
