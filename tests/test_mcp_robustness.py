"""MCP servers that misbehave never hang the phone: frozen, never initialising, failing
to start, flooding stderr, writing junk. Each ends in a typed outcome within a bound; what was left
out is reported; a plain question still works."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio

from hearth.companion.executor import SessionState
from hearth.companion.tools.mcp import LOG_CAP, McpServer, ToolRules, mounted
from hearth.companion.tools.registry import ToolContext
from hearth.protocol.wire.errors import HearthError

from .nodes import BIN
from .phone_kit import make_executor, make_plan

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def pids(tmp_path):  # type: ignore[no-untyped-def]
    """The test servers' pid directory; whatever is left of them is killed by PID."""
    directory = tmp_path / "mcp"
    directory.mkdir()
    yield directory
    for pidfile in directory.glob("*.pid"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(int(pidfile.stem), signal.SIGKILL)


def server(pids: Path, name: str, mode: str = "serve", **settings) -> McpServer:  # type: ignore[no-untyped-def]
    return McpServer(
        name=name,
        command=sys.executable,
        args=["-m", "tests.mcp_server", mode],
        env={"PYTHONPATH": str(ROOT), "HEARTH_TEST_MCP_DIR": str(pids)},
        **settings,
    )


def toml_of(servers: list[McpServer]) -> str:
    out = []
    for s in servers:
        out.append(
            f"[[mcp]]\nname = {json.dumps(s.name)}\ncommand = {json.dumps(s.command)}\n"
            f"args = {json.dumps(s.args)}\nstart_timeout_s = {s.start_timeout_s}\n"
            f"env = {{ {', '.join(f'{k} = {json.dumps(v)}' for k, v in (s.env or {}).items())} }}\n"
        )
    return "".join(out)


def hearth(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "hearth"), *args], capture_output=True, text=True, timeout=120)


def test_servers_that_do_not_start_are_left_out_in_parallel_and_reported(pids, tmp_path) -> None:
    registry = make_executor(tmp_path / "phone")[0].registry
    servers = [
        server(pids, "frozen", "stop-at-start", start_timeout_s=3),
        server(pids, "mute", "no-init", start_timeout_s=3),
        server(pids, "broken", "exit", start_timeout_s=60),
        McpServer(name="missing", command=str(tmp_path / "no-such-server")),
        server(pids, "good", start_timeout_s=60),
    ]

    async def go():
        async with mounted(servers, registry, tmp_path / "logs") as warnings:
            return {w.source: w for w in warnings if w.tool is None}

    left_out = trio.run(go)
    assert {k: w.code.value for k, w in left_out.items()} == {
        "mcp:frozen": "timed_out",
        "mcp:mute": "timed_out",
        "mcp:broken": "unreachable",
        "mcp:missing": "invalid_input",
    }
    assert "within 3 s" in left_out["mcp:frozen"].message
    assert "good.lookup" in registry.tools
    assert not any(name.startswith(("frozen.", "mute.", "broken.")) for name in registry.tools)
    assert "cannot open its database" in (tmp_path / "logs" / "mcp-broken.log").read_text()


def test_hearth_tools_and_a_plain_ask_end_with_a_frozen_server_and_say_so(
    pids, tmp_path, tiny_models
) -> None:
    home = tmp_path / "home"
    assert hearth("init", "--model", str(tiny_models[1]), "--home", str(home)).returncode == 0
    with (home / "config.toml").open("a") as config:
        config.write(
            toml_of(
                [
                    server(pids, "frozen", "stop-at-start", start_timeout_s=2),
                    server(pids, "demo", start_timeout_s=30),
                ]
            )
        )
    tools = hearth("tools", "--json", "--home", str(home))
    assert tools.returncode == 0, tools.stderr
    listing = json.loads(tools.stdout)
    assert "demo.lookup" in {t["name"] for t in listing["tools"]}
    [frozen] = [w for w in listing["warnings"] if w["source"] == "mcp:frozen"]
    assert frozen["code"] == "timed_out" and frozen["tool"] is None

    ask = hearth("ask", "what is two plus two", "--route", "local", "--json", "--home", str(home))
    assert ask.returncode == 0, ask.stderr
    answer = json.loads(ask.stdout)
    assert answer["route"] == "local"
    assert [w["source"] for w in answer["warnings"] if w["tool"] is None] == ["mcp:frozen"]


def test_a_servers_stderr_goes_to_a_capped_private_log_never_the_terminal(pids, tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(toml_of([server(pids, "chatty", "spam", start_timeout_s=60)]))
    tools = hearth("tools", "--home", str(home))  # the human table: a terminal's view
    assert tools.returncode == 0, tools.stderr
    assert "server is chatty" not in tools.stderr and "\x1b[31m" not in tools.stderr + tools.stdout
    assert "JSON" not in tools.stderr  # nor the client's complaint about its junk
    assert "chatty.shout" in tools.stdout
    log = home / "logs" / "mcp-chatty.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    assert LOG_CAP <= log.stat().st_size < LOG_CAP + 200  # capped, the cut marked
    assert log.read_text().endswith("the rest of this run was dropped]\n")


def test_a_call_to_a_frozen_server_times_out_and_later_calls_do_not_wait(pids, tmp_path) -> None:
    executor, _, _ = make_executor(tmp_path / "phone", answer=True)
    relaxed = {"freeze": ToolRules(tier="read-only"), "lookup": ToolRules(tier="read-only")}
    servers = [server(pids, "demo", call_timeout_s=2, tools=relaxed)]
    first = make_plan(
        ("s1", "demo.freeze", {}, []),
        ("s2", "demo.lookup", {"city": "Oslo"}, []),  # same server: no second wait
    )
    later = make_plan(("s1", "notes_search", {"query": "milk"}, []))

    async def go():
        async with mounted(servers, executor.registry, tmp_path / "logs"):
            frozen = await executor.execute(first, SessionState())
            return frozen, await executor.execute(later, SessionState())

    frozen, after = trio.run(go)
    assert [o.status for o in frozen] == ["timed_out", "timed_out"]
    assert "no answer within 2 s" in (frozen[0].error or "")
    assert [o.status for o in after] == ["ok"]
    assert trio.run(executor.resume) == []  # journaled as finished: nothing to rerun


def test_an_interrupted_idempotent_call_rerun_on_resume_times_out_instead_of_hanging(
    pids, tmp_path
) -> None:
    executor, _, _ = make_executor(tmp_path / "phone", answer=True)
    servers = [
        server(pids, "demo", call_timeout_s=2, tools={"freeze": ToolRules(tier="read-only")})
    ]
    plan = make_plan(("s1", "demo.freeze", {}, []))

    async def crash():  # the step is cut off mid-call, as by a killed process
        async with mounted(servers, executor.registry, tmp_path / "logs"):
            with anyio.move_on_after(1):
                await executor.execute(plan, SessionState())

    trio.run(crash)
    assert executor.journal.steps(plan.plan_id)["s1"].state == "running"
    fresh = make_executor(tmp_path / "phone", answer=True)[0]

    async def resume():
        async with mounted(servers, fresh.registry, tmp_path / "logs"):
            return await fresh.resume()

    assert trio.run(resume) == [plan.plan_id]
    assert fresh.journal.steps(plan.plan_id)["s1"].state == "timed_out"


def rogue(pids: Path, name: str, mode: str, **settings) -> McpServer:  # type: ignore[no-untyped-def]
    return McpServer(
        name=name,
        command=sys.executable,
        args=["-m", "tests.hostile.rogue_mcp_server", mode],
        env={"PYTHONPATH": str(ROOT), "HEARTH_TEST_MCP_DIR": str(pids)},
        **settings,
    )


_FLOODED = """
import json, sys, trio
from pathlib import Path
from hearth.companion.tools.mcp import McpServer, mounted
from hearth.companion.tools.registry import Registry, ToolContext
from hearth.protocol.wire.errors import HearthError

def peak_mib():
    # VmHWM, not ru_maxrss: Linux carries the forking parent's (pytest's) peak into
    # ru_maxrss across exec, so a long suite read as this process's own memory
    status = Path("/proc/self/status").read_text()
    return int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1]) // 1024

async def main():
    registry = Registry()
    servers = [McpServer.model_validate_json(s) for s in sys.argv[2:]]
    async with mounted(servers, registry, Path(sys.argv[1])) as warnings:
        try:
            await registry.tools["late.echo"].run({"text": "hi"}, ToolContext("p:s1"))
            call = {"code": "ok"}
        except HearthError as exc:
            call = {"code": exc.code.value, "message": exc.message}
    print(json.dumps({
        "left_out": {w.source: w.code.value for w in warnings if w.tool is None},
        "call": call,
        "maxrss_mib": peak_mib(),
    }))

trio.run(main)
"""


def flooded(tmp_path: Path, *servers: McpServer) -> dict[str, Any]:
    """Mount `servers` in a child process (memory capped), call `late.echo`, and say
    what was left out, how the call ended and the child's peak memory."""
    done = subprocess.run(
        [sys.executable, "-c", _FLOODED, str(tmp_path / "logs")]
        + [s.model_dump_json() for s in servers],
        capture_output=True,
        text=True,
        timeout=150,
        cwd=ROOT,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_server_line_that_never_ends_costs_bounded_memory_and_ends_typed(pids, tmp_path) -> None:
    """1 GiB without a newline, at start-up and in answer to a call: the phone keeps
    at most LINE_CAP of it (was: the mcp client kept all of it, copying it per read)."""
    result = flooded(
        tmp_path,
        rogue(pids, "early", "flood-at-start", start_timeout_s=60),
        rogue(pids, "late", "flood-on-call", start_timeout_s=60, call_timeout_s=60),
    )
    assert result["left_out"] == {"mcp:early": "protocol_error"}
    assert result["call"]["code"] == "protocol_error", result
    assert "over 4 MiB" in result["call"]["message"]
    assert result["maxrss_mib"] < 256, result


def test_a_server_asking_without_reading_the_answers_costs_bounded_memory(pids, tmp_path) -> None:
    """A server that floods the phone with pings (requests: each waits to write its
    answer) and never reads its stdin: the phone stops reading it after `REQUESTS_CAP`
    unanswered ones, and the call times out (was: about 1 KiB kept per ping, without
    bound: 263 MiB after 20 s)."""
    result = flooded(
        tmp_path, rogue(pids, "late", "pings-on-call", start_timeout_s=60, call_timeout_s=20)
    )
    assert result["left_out"] == {}
    assert result["call"]["code"] == "timed_out", result
    assert result["maxrss_mib"] < 160, result


def test_a_server_that_exits_mid_call_is_unreachable_at_once(pids, tmp_path) -> None:
    """The server exits instead of answering: the call ends at once, `unreachable`, and
    so does a later one (was: the client library's bare `MCPError`, which the executor
    reports by its type name only)."""
    registry = make_executor(tmp_path / "phone")[0].registry

    async def go():
        async with mounted([rogue(pids, "gone", "exit-on-call")], registry, tmp_path / "logs"):
            codes = []
            for _ in range(2):
                with pytest.raises(HearthError) as caught:
                    await registry.tools["gone.echo"].run({"text": "hi"}, ToolContext("p:s1"))
                codes.append(caught.value.code.value)
            return codes, caught.value.message

    codes, message = trio.run(go)
    assert codes == ["unreachable", "unreachable"]
    assert "gone.echo" in message


def test_a_deaf_server_times_out_and_stopping_it_leaves_no_process(pids, tmp_path) -> None:
    """A server that stops reading its stdin (a 4 MiB argument fills the pipe: the
    write blocks) and started a helper that ignores SIGTERM and holds its stdout: the
    call times out, the next is refused at once, and on stop both are gone (killed and
    reaped, checked by PID)."""
    registry = make_executor(tmp_path / "phone")[0].registry
    helper = tmp_path / "helper.pid"
    deaf = McpServer(
        name="deaf",
        command="sh",
        args=[
            "-c",
            f'(trap "" TERM; sleep 600) & echo $! > {helper}; '
            f"exec {sys.executable} -m tests.hostile.rogue_mcp_server deaf",
        ],
        env={"PYTHONPATH": str(ROOT), "HEARTH_TEST_MCP_DIR": str(pids)},
        call_timeout_s=2,
    )

    async def go():
        async with mounted([deaf], registry, tmp_path / "logs"):
            codes = []
            for _ in range(2):
                with pytest.raises(HearthError) as caught:
                    await registry.tools["deaf.echo"].run(
                        {"text": "x" * (4 << 20)}, ToolContext("p:s1")
                    )
                codes.append(caught.value.code.value)
            return codes

    try:
        assert trio.run(go) == ["timed_out", "timed_out"]
        [server_pid] = [int(p.stem) for p in pids.glob("*.pid")]
        with pytest.raises(ProcessLookupError):  # our child: killed and reaped, no zombie
            os.kill(server_pid, 0)
        stat = Path(f"/proc/{helper.read_text().strip()}/stat")  # init reaps the orphan
        assert not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z"
    finally:
        if helper.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(helper.read_text()), signal.SIGKILL)


def test_tool_schemas_no_validator_can_afford_are_refused_at_mount(pids, tmp_path) -> None:
    """A server's schema travels in every request (the node refuses the request if it
    fails `check_schemas`) and is checked on the phone: one no validator can afford is
    refused when mounted, and the server's other tools work (was: every ask failed).
    A property schema `true` mounts (was: AttributeError, and no tool mounted)."""
    registry = make_executor(tmp_path / "phone")[0].registry

    async def go():
        async with mounted([rogue(pids, "rogue", "serve")], registry, tmp_path / "logs") as found:
            return {w.tool: w for w in found}

    warnings = trio.run(go)
    refused = {"rogue.fan_out", "rogue.huge", "rogue.lookbehind"}
    assert set(warnings) == refused
    assert all(w.code.value == "invalid_input" for w in warnings.values())
    assert {"rogue.echo", "rogue.any_value"} <= set(registry.tools)
    assert not refused & set(registry.tools)
