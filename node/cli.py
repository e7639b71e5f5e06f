"""`hearth-node`: the home node's command line (a thin skin over the library)."""

from __future__ import annotations

from hearth.protocol.kit.interrupts import hold

hold()  # first: a Ctrl-C while the command line loads is reported once it can be

import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from hearth.protocol.kit.console import (
    add_version,
    cell,
    configure_logging,
    emit,
    read_uri,
    reporting,
    run_cli,
)
from hearth.protocol.kit.home import resolve_home

if TYPE_CHECKING:
    from hearth.node.status import NodeStatus

app = typer.Typer(
    help="Hearth home node: your always-on planner, relay and search exit.", no_args_is_help=True
)
add_version(app)

index_app = typer.Typer(help="This node's local search index (what it answers as an exit).")
app.add_typer(index_app, name="index")

HomeOption = Annotated[
    Path | None, typer.Option("--home", help="State directory (env HEARTH_NODE_HOME).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
SERVE_LOG = Path("logs", "node.log")  # `hearth-node serve`'s log under the home (rotated)


def _home(home: Path | None, *, create: bool = False) -> Path:
    """The home in force, its format checked (`formats.py`); made only by the commands
    that set one up (`create`)."""
    from .formats import check_node_home

    directory = resolve_home(home, "HEARTH_NODE_HOME", "hearth-node", create=create)
    check_node_home(directory)
    return directory


@app.command()
def init(
    name: Annotated[str, typer.Option(help="Display name in the roster.")] = "",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create this node's identity and found a new private swarm."""
    from hearth.protocol.transport.membership import found_swarm

    with reporting(as_json):
        directory = _home(home, create=True)
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
def roster(
    action: Annotated[str | None, typer.Argument(help="grant or deny (omit to show).")] = None,
    peer: Annotated[str | None, typer.Argument(help="The member's peer id.")] = None,
    role: Annotated[
        str | None, typer.Argument(help="relay, search-relay, search-exit, planner, …")
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the signed roster, or grant/deny a member a role (founder, daemon running)."""
    from hearth.node.control import RoleReply, control_request, request
    from hearth.protocol.transport.membership import load_roster

    if action is not None and (action not in ("grant", "deny") or not peer or not role):
        raise typer.BadParameter("usage: roster [grant|deny PEER ROLE]")  # exit 2
    with reporting(as_json):
        directory = _home(home)
        if action is not None:
            reply = request(directory, control_request(op=action, peer=peer, role=role), RoleReply)
            emit(
                as_json,
                reply.model_dump(mode="json"),
                lambda: typer.echo(
                    f"roster v{reply.version}: {peer} has "
                    f"{', '.join(reply.roles) or 'no roles'}"
                    f" (pushed to {len(reply.pushed_to)} connected member(s))"
                ),
            )
            return
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
            for m in current.members:  # a name is whatever the member said at pairing
                table.add_row(
                    cell(m.peer_id),
                    cell(m.name),
                    cell(", ".join(sorted(m.roles))),
                    "never" if m.expires is None else cell(m.expires),
                )
            Console().print(table)

        emit(as_json, payload, render)


@app.command()
def revoke(
    peer: Annotated[str, typer.Argument(help="The peer id to remove from the swarm.")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Remove a device: new roster, fresh swarm key, its connections closed at once."""
    from hearth.node.control import RevokeReply, control_request, request

    with reporting(as_json):
        reply = request(_home(home), control_request(op="revoke", peer=peer), RevokeReply)
        emit(
            as_json,
            reply.model_dump(mode="json"),
            lambda: typer.echo(
                f"revoked {peer}: roster v{reply.version}, swarm key {reply.key_id} "
                f"(pushed to {len(reply.pushed_to)} connected member(s); the previous key "
                "stays accepted for the grace window)"
            ),
        )


@app.command()
def join(
    uri: Annotated[str, typer.Argument(help="The hearth://pair URI, or - to read it from stdin.")],
    name: Annotated[str, typer.Option(help="This node's name in the roster.")] = "",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """A friend's node joins a swarm with a one-time invite (`invite --role friend`). A node
    that founded its own swarm with `init` may join as long as nobody joined it."""
    with reporting(as_json):
        directory = _home(home, create=True)
        invite = read_uri(uri)
        from hearth.protocol.transport.host import quiet_libp2p
        from hearth.protocol.transport.keys import create_identity, load_identity
        from hearth.protocol.transport.pairing import pair_home

        quiet_libp2p()
        key = (
            load_identity(directory)
            if (directory / "identity.key").exists()
            else create_identity(directory)
        )
        result, roster = pair_home(directory, invite, key, name or socket.gethostname(), "node")
        payload = {
            "peer_id": result.member,
            "founder": result.founder,
            "roles": result.roles,
            "roster_version": roster.version,
        }
        emit(
            as_json,
            payload,
            lambda: typer.echo(
                f"Joined {result.founder}'s swarm as {result.member} "
                f"(roles: {', '.join(result.roles)}).\n"
                "Now run (or restart) `hearth-node serve` to take part."
            ),
        )


@app.command()
def serve(
    listen: Annotated[
        list[str] | None, typer.Option("--listen", help="Multiaddr to listen on (repeatable).")
    ] = None,
    model: Annotated[Path | None, typer.Option(help="GGUF model to serve (bf16).")] = None,
    upstream: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server URL to plan with instead.")
    ] = None,
    upstream_model: Annotated[str | None, typer.Option(help="Model name at the upstream.")] = None,
    script: Annotated[
        Path | None,
        typer.Option(help="Play the exact plans of this JSON script file instead (tests)."),
    ] = None,
    no_mdns: Annotated[bool, typer.Option("--no-mdns", help="Do not advertise on mDNS.")] = False,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus metrics on 127.0.0.1:PORT.")
    ] = None,
    dashboard_port: Annotated[
        int | None,
        typer.Option(help="Serve the dashboard on 127.0.0.1:PORT (token in dashboard.token)."),
    ] = None,
    ready_file: Annotated[
        Path | None, typer.Option(help="Write {peer_id, addrs} as JSON here once listening.")
    ] = None,
    home: HomeOption = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug output too.")] = False,
) -> None:
    """Run the home node daemon until SIGTERM or Ctrl-C. Logs one line per request to
    stderr and logs/node.log under the home."""
    import logging

    import trio

    from hearth.node.config import load_config
    from hearth.node.daemon import serve as run

    with reporting(False):
        directory = _home(home)
        configure_logging(logging.DEBUG if verbose else logging.INFO, directory / SERVE_LOG)
        config = load_config(
            directory,
            listen=listen or None,
            model=str(model) if model else None,
            upstream=upstream,
            upstream_model=upstream_model,
            script=str(script) if script else None,
            mdns=False if no_mdns else None,
            metrics_port=metrics_port,
            dashboard_port=dashboard_port,
        )
        trio.run(run, directory, config, ready_file)


@app.command()
def invite(
    role: Annotated[Literal["phone", "friend"], typer.Option(help="phone or friend.")] = "phone",
    grant: Annotated[
        str | None, typer.Option(help="Roles for a friend, comma-separated (default relay).")
    ] = None,
    ttl: Annotated[str, typer.Option(help="Lifetime, e.g. 10m, 1h, 90s.")] = "10m",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print a one-time pairing URI (and a QR code) for a phone or a friend's node."""
    from hearth.node.control import InviteReply, control_request, request

    with reporting(as_json):
        ask = control_request(op="invite", role=role, grant=grant, ttl=parse_duration(ttl))
        reply = request(_home(home), ask, InviteReply)

        def render() -> None:
            import segno

            where = (
                "On the friend's PC, run `hearth-node join -` and paste"
                if role == "friend"
                else "On the phone, run `hearth pair -` and paste (or scan)"
            )
            typer.echo(f"{where} this one-time URI:\n")
            typer.echo(reply.uri + "\n")
            segno.make(reply.uri, error="m").terminal(compact=True)

        emit(as_json, reply.model_dump(mode="json"), render)


@app.command()
def status(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """The node's identity, model, load and peers."""
    from hearth.node.control import StatusRequest, request
    from hearth.node.status import NodeStatus
    from hearth.protocol.wire.errors import ErrorCode, HearthError

    with reporting(as_json):
        directory = _home(home)
        try:
            current = request(directory, StatusRequest(op="status"), NodeStatus, timeout=5)
        except HearthError as exc:
            if exc.code is not ErrorCode.UNREACHABLE:
                raise
            from hearth.protocol.transport.keys import load_identity
            from hearth.protocol.wire.identity import peer_id_of

            current = NodeStatus.stopped(peer_id_of(load_identity(directory)))
        emit(as_json, current.model_dump(mode="json"), lambda: _render_status(current))


def _render_status(status: NodeStatus) -> None:
    """`status` for a person (every name and reason came from a peer: no markup)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    state = "running" if status.running else "not running"
    model = status.model.name if status.model else "none"
    console.print(
        cell(
            f"{status.peer_id} ({state}) model: {model}, "
            f"sessions: {status.sessions}, queue: {status.queue}, "
            f"served for friends: {status.served_for_others}"
        )
    )
    for addr in status.addrs:
        console.print(cell(f"  {addr}"))
    if status.peers:
        table = Table("peer", "name", "reachable", "reason")
        for peer in status.peers:
            table.add_row(
                cell(peer.peer_id),
                cell(peer.name),
                "yes" if peer.reachable else "no",
                cell(peer.reason),
            )
        console.print(table)
    else:
        console.print("no other members yet: `hearth-node invite` pairs a phone or friend")
    for relay, held in status.relays.items():
        state = f"{len(held.circuits)} circuit address(es)" if held.circuits else ""
        console.print(cell(f"relay {relay}: {state or held.problem or ''}"))
    if search := status.search:
        console.print(
            cell(
                f"search: epoch {search.epoch}, {len(search.known_nodes)} node(s) "
                f"known, served {search.served or 'nothing'}, "
                f"dropped {search.dropped or 'nothing'}"
                + (f", EQUIVOCATING {search.equivocating}" if search.equivocating else "")
            )
        )


@index_app.command("add")
def index_add(
    paths: Annotated[
        list[Path], typer.Argument(help="Text, Markdown or HTML files, or directories.")
    ],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add documents to this node's local full-text search index."""
    from hearth.search.index import INDEX_FILE, FtsIndex

    with reporting(as_json):
        index = FtsIndex(_home(home) / INDEX_FILE)
        added = index.add(paths)
        payload = {"added": added, "documents": index.count(), "index": str(index.path)}
        emit(
            as_json,
            payload,
            lambda: typer.echo(f"indexed {added} document(s); {payload['documents']} in all"),
        )


def parse_duration(text: str) -> float:
    """`90s`, `10m`, `2h`, `1d` (or plain seconds) → seconds."""
    from hearth.protocol.wire.errors import ErrorCode, HearthError

    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        if text[-1:] in units:
            return float(text[:-1]) * units[text[-1]]
        return float(text)
    except ValueError as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, f"not a duration: {text!r}") from exc


def main() -> None:
    run_cli(app)
