"""`hearth`: the companion's command line (a thin skin over the library).

Commands that stay off the network and off the model import neither libp2p nor
llama.cpp: heavy imports happen inside the commands that need them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from hearth.protocol.console import emit, reporting, resolve_home

app = typer.Typer(help="Hearth companion: your phone's private assistant.", no_args_is_help=True)
models_app = typer.Typer(help="Tiny test models and real model downloads.", no_args_is_help=True)
app.add_typer(models_app, name="models")

HomeOption = Annotated[
    Path | None, typer.Option("--home", help="State directory (env HEARTH_HOME).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _home(home: Path | None) -> Path:
    return resolve_home(home, "HEARTH_HOME", "hearth")


@app.command()
def init(
    model: Annotated[Path | None, typer.Option(help="The phone's local (Q4) GGUF.")] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create the phone's identity (and remember its local model)."""
    from hearth.companion.config import init_phone

    with reporting(as_json):
        directory = _home(home)
        peer_id = init_phone(directory, model)
        payload = {"peer_id": peer_id, "home": str(directory), "model": str(model or "")}
        emit(as_json, payload, lambda: typer.echo(f"Phone identity {peer_id}\n  home: {directory}"))


@app.command()
def pair(
    uri: Annotated[str, typer.Argument(help="The hearth://pair URI, or - to read it from stdin.")],
    name: Annotated[str, typer.Option(help="This phone's name in the roster.")] = "phone",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pair this phone with a home node (a one-time invite from `hearth-node invite`)."""
    from hearth.protocol.transport.host import quiet_libp2p
    from hearth.protocol.transport.keys import load_identity
    from hearth.protocol.transport.pairing import pair_home

    with reporting(as_json):
        quiet_libp2p()
        directory = _home(home)
        result, roster = pair_home(directory, uri, load_identity(directory), name, "phone")
        payload = {
            "peer_id": result.member,
            "node": result.node,
            "founder": result.founder,
            "roles": result.roles,
            "roster_version": roster.version,
        }
        emit(
            as_json,
            payload,
            lambda: typer.echo(
                f"Paired with {result.node} as {result.member} (roles: {', '.join(result.roles)})"
            ),
        )


@app.command()
def ask(
    text: Annotated[str, typer.Argument(help="What you want done.")],
    route: Annotated[str, typer.Option(help="auto, local or remote.")] = "auto",
    tool_choice: Annotated[
        str, typer.Option(help="auto, required (act: plan tool calls) or none (answer in text).")
    ] = "auto",
    yes: Annotated[bool, typer.Option("--yes", help="Confirm what may be confirmed.")] = False,
    no: Annotated[bool, typer.Option("--no", help="Decline every confirmation.")] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Route, plan, execute on the phone, answer."""
    import signal
    import sys

    import anyio
    import trio

    from hearth.companion.confirm import Scripted, Terminal
    from hearth.companion.phone import Phone
    from hearth.protocol.wire.errors import ErrorCode, HearthError

    with reporting(as_json):
        if route not in ("auto", "local", "remote"):
            raise HearthError(ErrorCode.INVALID_INPUT, "--route is auto, local or remote")
        if tool_choice not in ("auto", "required", "none"):
            raise HearthError(ErrorCode.INVALID_INPUT, "--tool-choice is auto, required or none")
        if yes and no:
            raise HearthError(ErrorCode.INVALID_INPUT, "--yes and --no exclude each other")
        confirmer = Scripted(False) if no else Terminal(yes=yes)
        phone = Phone(_home(home), confirmer)

        async def main() -> dict:
            cancel = anyio.Event()

            async def show(piece: str) -> None:
                sys.stderr.write(piece)
                sys.stderr.flush()

            async def on_sigint(scope: trio.CancelScope) -> None:
                with trio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        cancel.set()  # the node is told to stop
                        await trio.sleep(0.5)
                        scope.cancel()
                        return

            async with trio.open_nursery() as nursery:
                nursery.start_soon(on_sigint, nursery.cancel_scope)
                result = await phone.ask(
                    text,
                    route,
                    show,
                    cancel,  # type: ignore[arg-type]
                    tool_choice=tool_choice,
                )
                nursery.cancel_scope.cancel()
                return result

        payload = trio.run(main)
        sys.stderr.write("\n")

        def render() -> None:
            from rich.console import Console

            console = Console()
            console.print(f"[dim]{payload['route']}: {payload['reason']}[/]")
            for plan in payload["plans"]:
                for step in plan["steps"]:
                    console.print(f"  {step['id']} {step['tool']}: {step['status']}")
            console.print(payload["answer"])

        emit(as_json, payload, render)


@app.command()
def tools(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """The phone's tool manifest: tiers, annotations, control arguments."""
    import trio

    from hearth.companion.phone import load_tools, read_config
    from hearth.companion.tools.mcp import mounted

    with reporting(as_json):
        directory = _home(home)
        registry, servers = load_tools(directory, read_config(directory))

        async def listing() -> list[dict]:
            async with mounted(servers, registry):
                return registry.manifest()

        manifest = trio.run(listing)

        def render() -> None:
            from rich.console import Console
            from rich.table import Table

            table = Table("tool", "tier", "control args", "private", "description")
            for t in manifest:
                table.add_row(
                    t["name"],
                    t["tier"],
                    ", ".join(t["control_args"]),
                    "yes" if t["private"] else "",
                    registry.tools[t["name"]].description,
                )
            Console().print(table)

        emit(as_json, {"tools": manifest}, render)


@app.command()
def audit(
    verify: Annotated[
        bool, typer.Option("--verify", help="Check the hash chain and head.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """The audit log of every executor decision (and whether it is intact)."""
    from hearth.companion.audit import AuditLog

    with reporting(as_json):
        log = AuditLog(_home(home))
        records = log.records()
        verified, problem = log.verify() if verify else (None, "")
        payload = {"records": records, "verified": verified}
        if problem:
            payload["problem"] = problem

        def render() -> None:
            from rich.console import Console
            from rich.table import Table

            table = Table("seq", "plan", "step", "decision", "outcome", "reason")
            for r in records:
                table.add_row(
                    str(r["seq"]),
                    r["plan_id"][:12],
                    r["step"],
                    r["decision"],
                    r["outcome"],
                    r["reason"],
                )
            console = Console()
            console.print(table)
            if verify:
                console.print("chain verified" if verified else f"[red]TAMPERED[/]: {problem}")

        emit(as_json, payload, render)
        if verify and not verified:
            raise SystemExit(1)


@app.command()
def status(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Paired nodes: reachable or not and why, latency, their model."""
    import trio

    from hearth.companion.confirm import Scripted
    from hearth.companion.phone import Phone

    with reporting(as_json):
        payload = trio.run(Phone(_home(home), Scripted(None)).status)

        def render() -> None:
            from rich.console import Console
            from rich.table import Table

            table = Table("node", "name", "reachable", "latency ms", "model", "reason")
            for n in payload["nodes"]:
                table.add_row(
                    n["peer_id"],
                    n["name"],
                    "yes" if n["reachable"] else "no",
                    str(n["latency_ms"] or ""),
                    (n["model"] or {}).get("name", ""),
                    n["reason"],
                )
            Console().print(table)

        emit(as_json, payload, render)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to search for.")],
    hops: Annotated[
        int, typer.Option(min=2, max=3, help="2 (relay, exit) or 3 (two relays, exit).")
    ] = 2,
    limit: Annotated[int, typer.Option(min=1, max=50, help="Most results wanted.")] = 10,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """A private web search routed through friends' nodes (results are untrusted)."""
    import trio

    from hearth.companion.confirm import Scripted
    from hearth.companion.phone import Phone

    with reporting(as_json):
        phone = Phone(_home(home), Scripted(None))
        payload = trio.run(phone.search, query, hops, limit)

        def render() -> None:
            for r in payload["results"]:
                typer.echo(f"{r['title']}\n  {r['url']}\n  {r['snippet']}\n")
            typer.echo(
                f"{len(payload['results'])} result(s) over {payload['hops']} hops (untrusted)"
                + (", truncated" if payload["truncated"] else "")
            )

        emit(as_json, payload, render)


@models_app.command("make-tiny")
def make_tiny(
    directory: Annotated[Path, typer.Argument(help="Where to write the two GGUF files.")],
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same files).")] = 0,
    force: Annotated[bool, typer.Option(help="Rewrite files that exist.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Write tiny-bf16.gguf and tiny-q4_k_m.gguf (random weights, real tokenizer)."""
    from hearth.protocol.model.tiny import make_tiny as build

    with reporting(as_json):
        from rich.console import Console

        with Console(stderr=True).status("making tiny qwen35 models"):
            bf16, q4 = build(directory, seed, force=force)
        payload = {"bf16": str(bf16), "q4_k_m": str(q4)}
        emit(as_json, payload, lambda: typer.echo(f"{bf16}\n{q4}"))


@models_app.command("pull")
def pull(
    name: Annotated[str, typer.Argument(help="Model name, e.g. botpsy-0.8b.")],
    quant: Annotated[str, typer.Option(help="q4_k_m, q8_0 or bf16.")] = "q4_k_m",
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Download a real model from the Hugging Face Hub."""
    from hearth.protocol.model.hub import pull as download

    with reporting(as_json):
        path = download(name, quant.lower(), _home(home) / "models")
        emit(as_json, {"path": str(path)}, lambda: typer.echo(str(path)))


@app.command()
def demo() -> None:
    """Run what Hearth has so far, end to end on loopback, in temporary homes."""
    from hearth.companion.demo import run_demo

    with reporting(False):
        run_demo()


def main() -> None:
    app()
