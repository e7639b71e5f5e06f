"""`hearth`: the companion's command line (a thin skin over the library).

Commands that stay off the network and off the model import neither libp2p nor
llama.cpp: heavy imports happen inside the commands that need them.
"""

from __future__ import annotations

from hearth.protocol.kit.interrupts import hold

hold()  # first: a Ctrl-C while the command line loads is reported once it can be

import json
import os
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from hearth.protocol.kit.console import (
    add_version,
    cell,
    emit,
    plain,
    read_uri,
    reporting,
    run_cli,
)
from hearth.protocol.kit.home import resolve_home

from .entry import Route, ToolChoice

if TYPE_CHECKING:
    import anyio

    from hearth.companion.commands import ReportOp
    from hearth.companion.results import AskResult
    from hearth.companion.streaming import StreamingAnswer

T = TypeVar("T")

CANCEL_GRACE_S = 0.5  # after Ctrl-C, for the node to hear "cancel" before the phone hangs up
CANCEL_BOUND_S = 1.8  # after Ctrl-C, the most a request may take to end (the contract says 2 s)
SERVE_LOG = Path("logs", "serve.log")  # `hearth serve`'s log under the home (rotated)
TAMPERED = 11  # `hearth audit --verify`: the log was changed (1 stays `internal`, a bug)

app = typer.Typer(help="Hearth companion: your phone's private assistant.", no_args_is_help=True)
models_app = typer.Typer(help="Tiny test models and real model downloads.", no_args_is_help=True)
config_app = typer.Typer(
    help="The phone's settings (model, api_port, limits.*), validated.", no_args_is_help=True
)
app.add_typer(models_app, name="models")
app.add_typer(config_app, name="config")
add_version(app)

HomeOption = Annotated[
    Path | None, typer.Option("--home", help="State directory (env HEARTH_HOME).")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]


def _home(home: Path | None, *, create: bool = False) -> Path:
    """The home in force; made only by the commands that set one up (`create`)."""
    return resolve_home(home, "HEARTH_HOME", "hearth", create=create)


@app.command()
def init(
    model: Annotated[Path | None, typer.Option(help="The phone's local (Q4) GGUF.")] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Create the phone's identity (and remember its local model)."""
    from hearth.companion.config import init_phone

    with reporting(as_json):
        directory = _home(home, create=True)
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
    with reporting(as_json):
        directory = _home(home)
        invite = read_uri(uri)
        from hearth.protocol.transport.host import quiet_libp2p
        from hearth.protocol.transport.keys import load_identity
        from hearth.protocol.transport.pairing import pair_home

        quiet_libp2p()
        result, roster = pair_home(directory, invite, load_identity(directory), name, "phone")
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
    route: Annotated[
        Route,
        typer.Option(help="auto; local (the phone's model, the home is not dialled); remote."),
    ] = "auto",
    tool_choice: Annotated[
        ToolChoice,
        typer.Option(help="auto, required (act: plan tool calls) or none (answer in text)."),
    ] = "auto",
    yes: Annotated[
        bool, typer.Option("--yes", help="Confirm what may be confirmed (never tainted steps).")
    ] = False,
    no: Annotated[bool, typer.Option("--no", help="Decline every confirmation.")] = False,
    think: Annotated[
        bool,
        typer.Option(
            "--think", help="Let the model think first (bounded by limits.max_thinking_tokens)."
        ),
    ] = False,
    conversation: Annotated[
        str | None,
        typer.Option("--conversation", help="Continue this conversation (`hearth conversations`)."),
    ] = None,
    continue_last: Annotated[
        bool, typer.Option("--continue", help="Continue the most recent conversation.")
    ] = False,
    attach: Annotated[
        list[Path] | None,
        typer.Option(
            "--attach", help="A document for this request (text, Markdown, HTML, PDF); repeatable."
        ),
    ] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Route, plan, execute on the phone, answer (through the resident companion when it
    runs). Exit 8 when a step was refused, 130 on Ctrl-C (the node is told to stop)."""
    with reporting(as_json):
        from hearth.companion.streaming import StreamingAnswer
        from hearth.companion.thin import ask_companion, ask_fields, finish
        from hearth.protocol.wire.errors import ErrorCode, HearthError

        if yes and no:
            raise HearthError(ErrorCode.INVALID_INPUT, "--yes and --no exclude each other")
        if conversation is not None and continue_last:
            raise HearthError(
                ErrorCode.INVALID_INPUT, "--conversation and --continue exclude each other"
            )
        fields = ask_fields(
            text,
            route,
            tool_choice,
            thinking=think,
            conversation=conversation,
            continue_last=continue_last,
            attach=attach or [],
            yes=yes,
            no=no,
        )
        with StreamingAnswer() as view:
            served = _served_home(home)  # the companion checks the request as below
            payload = None if served is None else ask_companion(served, fields, view)
            if payload is None:
                payload = _ask_here(home, fields, view, as_json)
        finish(payload, as_json)


def _served_home(home: Path | None) -> Path | None:
    """The home in force when it exists (where a companion may serve it), else None."""
    from hearth.protocol.wire.errors import HearthError

    try:
        return _home(home)
    except HearthError:  # reported in-process, after the request is checked
        return None


def _ask_here(
    home: Path | None, fields: dict[str, Any], view: StreamingAnswer, as_json: bool
) -> dict[str, Any]:
    """An ask's `--json` object, through the async client: in this process (`Service`), or
    through a companion that started since the thin client looked."""
    import trio

    from hearth.companion.client import ask_request, asking
    from hearth.companion.confirm import Terminal
    from hearth.companion.streaming import QuietWhileAsking

    request = ask_request(**fields)
    directory = _home(home)
    confirmer = QuietWhileAsking(Terminal(), view)

    async def answer(cancel: anyio.Event) -> AskResult:
        async with asking(directory) as asker:
            return await asker(request, view.show, confirmer, cancel)

    result = trio.run(until_interrupted, answer, as_json)
    payload: dict[str, Any] = result.model_dump(mode="json")
    return payload


async def until_interrupted(request: Callable[[anyio.Event], Awaitable[T]], as_json: bool) -> T:
    """`request(cancel)`; on Ctrl-C `cancel` is set (the node is told to stop), and after
    `CANCEL_GRACE_S` the request is cut off. Either way the outcome is `cancelled`, within
    `CANCEL_BOUND_S` even when a worker thread is stuck in C code (loading a model)."""
    import signal

    import anyio
    import trio

    from hearth.protocol.kit.console import CANCELLED, report

    def give_up() -> None:
        report(as_json, CANCELLED)
        os._exit(CANCELLED.exit_status)

    cancel = anyio.Event()
    result: T | None = None
    backstop = threading.Timer(CANCEL_BOUND_S, give_up)
    backstop.daemon = True
    with trio.open_signal_receiver(signal.SIGINT) as interrupts, _cancelling(backstop):
        async with trio.open_nursery() as nursery:

            async def on_interrupt() -> None:
                async for _ in interrupts:
                    cancel.set()
                    backstop.start()
                    await trio.sleep(CANCEL_GRACE_S)
                    nursery.cancel_scope.cancel()

            nursery.start_soon(on_interrupt)
            try:
                result = await request(cancel)
            except Exception as exc:
                if cancel.is_set():  # whatever the cut-off request raised
                    raise CANCELLED from exc
                raise
            nursery.cancel_scope.cancel()
    if cancel.is_set() or result is None:
        raise CANCELLED
    return result


@contextmanager
def _cancelling(timer: threading.Timer) -> Iterator[None]:
    try:
        yield
    finally:
        timer.cancel()


def _call(home: Path | None, op: ReportOp) -> dict[str, Any]:
    """`op`'s `--json` object: from the companion when it runs, else in this process."""
    import trio

    from hearth.companion.client import call

    return trio.run(call, _home(home), op)


@app.command()
def tools(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """The phone's tool manifest: tiers, annotations, control arguments."""
    from hearth.companion.commands import ToolsOp

    with reporting(as_json):
        payload = _call(home, ToolsOp())
        manifest, warnings = payload["tools"], payload["warnings"]

        def render() -> None:
            from rich.console import Console
            from rich.table import Table

            table = Table("tool", "tier", "control args", "private", "description")
            for t in manifest:  # names and descriptions may come from an MCP server
                table.add_row(
                    cell(t["name"]),
                    cell(t["tier"]),
                    cell(", ".join(t["control_args"])),
                    "yes" if t["private"] else "",
                    cell(t.get("description", "")),
                )
            Console().print(table)
            for w in warnings:  # servers left out, tools refused
                typer.echo(f"warning: {plain(w['message'])}", err=True)

        emit(as_json, payload, render)


@app.command()
def audit(
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help=f"Check the hash chain and head (exit {TAMPERED} if tampered with)."
        ),
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """The audit log of every executor decision (and whether it is intact)."""
    from hearth.companion.commands import AuditOp

    with reporting(as_json):
        payload = _call(home, AuditOp(verify=verify))
        records, verified, problem = payload["records"], payload["verified"], payload.get("problem")

        def render() -> None:
            from rich.console import Console
            from rich.table import Table
            from rich.text import Text

            table = Table("seq", "plan", "step", "decision", "outcome", "reason")
            for r in records:  # reasons quote planners, tools and peers
                table.add_row(
                    cell(r["seq"]),
                    cell(str(r["plan_id"])[:12]),
                    cell(r["step"]),
                    cell(r["decision"]),
                    cell(r["outcome"]),
                    cell(r["reason"]),
                )
            console = Console()
            console.print(table)
            if verified:
                console.print("chain verified")
            elif verify:
                console.print(Text.assemble(("TAMPERED", "bold red"), f": {plain(problem or '')}"))

        emit(as_json, payload, render)
        if verify and not verified:
            raise SystemExit(TAMPERED)


@app.command()
def status(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Paired nodes: reachable or not and why, latency, their model."""
    from hearth.companion.commands import StatusOp

    with reporting(as_json):
        payload = _call(home, StatusOp())

        def render() -> None:
            from rich.console import Console
            from rich.table import Table

            if not payload["nodes"]:
                typer.echo(
                    f"Phone {payload['peer_id']} is not paired with a home node yet: run "
                    "`hearth-node invite` on the home PC, then `hearth pair -` here."
                )
                return
            table = Table("node", "name", "reachable", "path", "latency ms", "model", "reason")
            for n in payload["nodes"]:  # names, models and reasons come from peers
                path = "" if not n["reachable"] else f"via {n['relay']}" if n["relay"] else "direct"
                table.add_row(
                    cell(n["peer_id"]),
                    cell(n["name"]),
                    "yes" if n["reachable"] else "no",
                    cell(path),
                    cell(n["latency_ms"]),
                    cell((n["model"] or {}).get("name", "")),
                    cell(n["reason"]),
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
    with reporting(as_json):
        from hearth.companion.client import valid
        from hearth.companion.commands import SearchOp

        payload = _call(home, valid(SearchOp, query=query, hops=hops, limit=limit))

        def render() -> None:
            for r in payload["results"]:  # what the exit found: untrusted text
                typer.echo(
                    f"{plain(r['title'], 200)}\n  {plain(r['url'], 200)}\n"
                    f"  {plain(r['snippet'], 400)}\n"
                )
            typer.echo(
                f"{len(payload['results'])} result(s) over {payload['hops']} hops (untrusted)"
                + (", truncated" if payload["truncated"] else "")
            )

        emit(as_json, payload, render)


@app.command()
def conversations(
    conversation: Annotated[
        str | None, typer.Argument(help="One conversation's id, to show its turns.")
    ] = None,
    everyone: Annotated[
        bool, typer.Option("--all", help="Apps' requests over the local API too.")
    ] = False,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Past conversations, or one of them turn by turn."""
    with reporting(as_json):
        from hearth.companion.client import valid
        from hearth.companion.commands import ConversationsOp

        payload = _call(home, valid(ConversationsOp, id=conversation, all=everyone))

        def render() -> None:
            from hearth.companion.terminal import conversation_lines, print_lines

            print_lines(conversation_lines(payload))

        emit(as_json, payload, render)


@app.command()
def inbox(home: HomeOption = None, as_json: JsonOption = False) -> None:
    """Requests waiting for the home node, and the answers that came back."""
    from hearth.companion.commands import InboxOp

    with reporting(as_json):
        payload = _call(home, InboxOp())

        def render() -> None:
            from hearth.companion.terminal import inbox_lines, print_lines

            print_lines(inbox_lines(payload))

        emit(as_json, payload, render)


@app.command()
def chat(
    conversation: Annotated[
        str | None, typer.Option("--conversation", help="Continue this conversation.")
    ] = None,
    route: Annotated[Route, typer.Option(help="auto, local or remote.")] = "auto",
    home: HomeOption = None,
) -> None:
    """A conversation in the terminal: type a request, Enter (/help lists the commands).
    Ctrl-C stops an answer; a second Ctrl-C (exit 130), Ctrl-D or /quit leaves."""
    with reporting(False):
        import trio

        from hearth.companion.chat import converse

        trio.run(converse, _home(home), conversation, route)


@app.command()
def serve(
    api_port: Annotated[
        int | None,
        typer.Option(min=0, max=65535, help="The HTTP API's port (default api_port; 0: any)."),
    ] = None,
    ready_file: Annotated[
        Path | None,
        typer.Option(help="Where to write {peer_id, api, socket} as JSON once serving."),
    ] = None,
    home: HomeOption = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log debug output too.")] = False,
) -> None:
    """The resident companion (warm model, kept link, companion.sock, local HTTP API).
    Logs one line per request to stderr and logs/serve.log under the home. SIGTERM stops
    it (exit 0), Ctrl-C too (130)."""
    with reporting(False):
        import logging

        import trio

        from hearth.companion.resident import exit_now
        from hearth.companion.resident import serve as run
        from hearth.protocol.kit.console import configure_logging

        directory = _home(home)
        configure_logging(logging.DEBUG if verbose else logging.INFO, directory / SERVE_LOG)
        exit_now(trio.run(run, directory, api_port, ready_file))


@config_app.command("get")
def config_get(
    key: Annotated[str | None, typer.Argument(help="One setting (omit for all).")] = None,
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the settings in force (defaults for what config.toml leaves out)."""
    from hearth.companion.settings import get_setting, settings_in_force

    with reporting(as_json):
        directory = _home(home)
        if key is None:
            payload = settings_in_force(directory)
            lines = [f"{k} = {json.dumps(v)}" for k, v in payload.items()]
        else:
            payload = {"key": key, "value": get_setting(directory, key)}
            lines = [json.dumps(payload["value"])]
        emit(as_json, payload, lambda: typer.echo("\n".join(lines)))


@config_app.command("set")
def config_set(
    key: Annotated[str, typer.Argument(help="model, api_port or limits.max_steps, …")],
    value: Annotated[str, typer.Argument(help="The new value (checked before it is saved).")],
    home: HomeOption = None,
    as_json: JsonOption = False,
) -> None:
    """Change one setting in config.toml (the rest of the file is kept)."""
    from hearth.companion.settings import set_setting

    with reporting(as_json):
        stored = set_setting(_home(home), key, value)
        payload = {"key": key, "value": stored}
        emit(as_json, payload, lambda: typer.echo(f"{key} = {json.dumps(stored)}"))


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


@models_app.command("micro")
def micro(
    directory: Annotated[Path, typer.Argument(help="Where to copy the two GGUF files.")],
    as_json: JsonOption = False,
) -> None:
    """Copy micro-planner-bf16.gguf and micro-planner-q4_k_m.gguf (trained on synthetic
    requests for the built-in tools) into DIRECTORY."""
    from hearth.protocol.model.micro.files import copy_to

    with reporting(as_json):
        bf16, q4 = copy_to(directory)
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
        path = download(name, quant.lower(), _home(home, create=True) / "models")
        emit(as_json, {"path": str(path)}, lambda: typer.echo(str(path)))


@app.command()
def demo(
    model: Annotated[
        Path | None,
        typer.Option(help="A real GGUF for the node and the phone (default: the micro-planner)."),
    ] = None,
) -> None:
    """The end-to-end walk-through on loopback, in temporary homes: every command shown."""
    from hearth.companion.demo import run_demo

    with reporting(False):
        if model is not None and not model.is_file():
            from hearth.protocol.wire.errors import ErrorCode, HearthError

            raise HearthError(ErrorCode.INVALID_INPUT, f"no model file at {model}")
        run_demo(model)


def main() -> None:
    run_cli(app)
