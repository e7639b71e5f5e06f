"""`hearth serve`: the resident companion as a real process with tiny models and a real
node. The `hearth` commands go through its companion.sock (and say so), conversations
survive a restart, signals stop it, one companion per home, and no socket client can
take it down."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from .conftest import Processes
from .hostile.harness import start_bench
from .hostile.script import Script
from .nodes import BIN, cli, paired_phone, wait_ready, wait_until
from .terminal import on_terminal

pytestmark = pytest.mark.timeout(600)
T = TypeVar("T")

STOP_BOUND_S = 5.0  # the contract is 2 s; this bound leaves room for a loaded machine
SEND = {"id": "s1", "tool": "message_send", "arguments": {"to": "alice", "body": "hi"}}
SEND_SCRIPT = Script.model_validate({"rounds": [{"steps": [SEND]}]}).model_dump_json()


def hearth(home: Path, *args: str) -> tuple[int, dict]:
    result = subprocess.run(
        [str(BIN / "hearth"), *args, "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    return result.returncode, json.loads(lines[0])


@dataclass
class Companion:
    proc: subprocess.Popen[str]
    ready: dict

    def stop(self, signum: int = signal.SIGTERM) -> int:
        os.kill(self.proc.pid, signum)
        return self.proc.wait(timeout=STOP_BOUND_S)


def start_companion(processes: Processes, home: Path) -> Companion:
    ready = home / "serve-ready.json"
    ready.unlink(missing_ok=True)
    proc = processes.spawn(
        str(BIN / "hearth"), "serve", "--home", str(home), "--api-port", "0",
        "--ready-file", str(ready), stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return Companion(proc, wait_ready(proc, ready, timeout=120))


@pytest.fixture(scope="module")
def phone(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> Iterator[Path]:
    """A phone with the tiny Q4 model, paired with a real node running the tiny bf16."""
    processes = Processes()
    root = tmp_path_factory.mktemp("serve")
    try:
        yield paired_phone(processes, root, tiny_models)
    finally:
        processes.cleanup()


@pytest.fixture
def companion(processes, phone) -> Iterator[Companion]:
    running = start_companion(processes, phone)
    yield running
    if running.proc.poll() is None:
        running.stop()


class SocketClient:
    """A raw companion.sock client, as hostile as a test needs it to be."""

    def __init__(self, home: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(str(home / "companion.sock"))
        self.buffer = b""

    def send(self, data: bytes | dict) -> None:
        self.sock.sendall(data if isinstance(data, bytes) else json.dumps(data).encode() + b"\n")

    def receive(self) -> dict | None:
        """The next line but the greeting, as JSON; None when the companion hung up."""
        for _ in range(1000):
            while b"\n" not in self.buffer:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return None
                self.buffer += chunk
            line, self.buffer = self.buffer.split(b"\n", 1)
            if (reply := json.loads(line))["type"] != "hello":
                return reply
        raise AssertionError("only greetings")

    def until(self, *types: str) -> dict:
        """Events up to the first of `types` (bounded by the socket's timeout)."""
        for _ in range(100_000):
            event = self.receive()
            assert event is not None, "the companion hung up"
            if event["type"] in types:
                return event
        raise AssertionError(f"no {types} event")

    def close(self) -> None:
        self.sock.close()


def test_ask_through_the_companion_has_the_in_process_shape(companion, phone, tmp_path) -> None:
    assert companion.ready["socket"] == str(phone / "companion.sock")
    assert (phone / "companion.sock").stat().st_mode & 0o777 == 0o600
    assert companion.ready["peer_id"].startswith("12D3KooW")
    code, served = hearth(phone, "ask", "hello there", "--route", "local")
    assert code == 0, served
    assert served["served_by"] == "companion"
    alone = tmp_path / "alone"  # the same phone with no companion: the work is done in-process
    shutil.copytree(phone, alone, ignore=shutil.ignore_patterns("companion.*", "*.json"))
    code, local = hearth(alone, "ask", "hello there", "--route", "local")
    assert code == 0, local
    assert local["served_by"] == "process"
    assert set(served) == set(local)
    assert served["route"] == local["route"] == "local"
    for command in ("tools", "audit", "conversations", "inbox"):  # one shape either way
        code, by_companion = hearth(phone, command)
        code_alone, by_process = hearth(alone, command)
        assert code == code_alone == 0, (by_companion, by_process)
        assert set(by_companion) == set(by_process), command
    code, status = hearth(phone, "status")
    assert code == 0 and status["nodes"][0]["reachable"] is True
    token = (phone / "api.token").read_text().strip()  # the HTTP API runs in the same loop
    models = httpx.get(
        f"{companion.ready['api']}/v1/models", headers={"Authorization": f"Bearer {token}"}
    )
    assert models.status_code == 200 and "hearth" in [m["id"] for m in models.json()["data"]]


# `hearth ask` run in a Python that reports, at exit, which heavy modules it loaded: the
# thin client reaches its first token on the standard library alone (issue 34)
LOADS_PROBE = """
import atexit, json, sys
heavy = ("libp2p", "llama_cpp", "hearth.companion.service", "hearth.protocol.wire.messages",
         "trio", "anyio", "pydantic", "rich", "typer")
loaded = lambda: [m for m in heavy if m in sys.modules]
atexit.register(lambda: sys.stderr.write("\\nLOADED=" + json.dumps(loaded()) + "\\n"))
sys.argv = ["hearth", "ask", "hi", "--route", "local", "--json", "--home", sys.argv[1]]
from hearth.companion.entry import main
main()
"""


def test_a_served_command_loads_neither_libp2p_nor_llama_cpp(companion, phone) -> None:
    result = subprocess.run(
        [str(BIN / "python"), "-c", LOADS_PROBE, str(phone)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["served_by"] == "companion"
    [loaded] = [line for line in result.stderr.splitlines() if line.startswith("LOADED=")]
    assert json.loads(loaded.removeprefix("LOADED=")) == []


def test_a_conversation_continues_across_asks_and_a_restart(processes, phone) -> None:
    running = start_companion(processes, phone)
    code, first = hearth(phone, "ask", "remember the milk", "--route", "local")
    assert code == 0 and first["served_by"] == "companion", first
    conversation = first["conversation_id"]
    code, second = hearth(phone, "ask", "and the bread", "--route", "local", "--continue")
    assert code == 0 and second["conversation_id"] == conversation
    assert running.stop() == 0  # SIGTERM: a clean stop, socket and ready file gone
    assert not (phone / "companion.sock").exists()
    assert not (phone / "serve-ready.json").exists()
    running = start_companion(processes, phone)
    code, third = hearth(
        phone, "ask", "and eggs", "--route", "local", "--conversation", conversation
    )
    assert code == 0 and third["conversation_id"] == conversation
    assert third["served_by"] == "companion"
    code, detail = hearth(phone, "conversations", conversation)
    assert code == 0
    assert [t["text"] for t in detail["turns"]] == [
        "remember the milk",
        "and the bread",
        "and eggs",
    ]
    code, listing = hearth(phone, "conversations")
    assert conversation in [c["id"] for c in listing["conversations"]]
    assert running.stop(signal.SIGINT) == 130  # Ctrl-C stops it too, as the contract says


def test_one_companion_per_home(companion, phone) -> None:
    result = subprocess.run(
        [str(BIN / "hearth"), "serve", "--home", str(phone), "--api-port", "0"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 5, result.stderr  # busy
    assert "already serves" in result.stderr
    assert companion.proc.poll() is None
    code, out = hearth(phone, "status")
    assert code == 0 and out["peer_id"] == companion.ready["peer_id"]


def test_after_a_crash_commands_fall_back_and_a_new_companion_starts(processes, phone) -> None:
    crashed = start_companion(processes, phone)
    os.kill(crashed.proc.pid, signal.SIGKILL)  # no clean-up: a stale socket stays behind
    crashed.proc.wait(timeout=10)
    assert (phone / "companion.sock").exists()
    code, out = hearth(phone, "ask", "anyone there?", "--route", "local")
    assert code == 0 and out["served_by"] == "process", out
    with socket.socket() as taken:  # the API's port is someone else's: a clear `busy`
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = subprocess.run(
            [str(BIN / "hearth"), "serve", "--home", str(phone), "--api-port",
             str(taken.getsockname()[1])],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert result.returncode == 5 and "is in use" in result.stderr, result.stderr
    restarted = start_companion(processes, phone)
    code, out = hearth(phone, "ask", "anyone there?", "--route", "local")
    assert code == 0 and out["served_by"] == "companion", out
    assert restarted.stop() == 0


def test_a_home_too_long_for_a_socket_is_refused_clearly(tmp_path) -> None:
    home = tmp_path / ("h" * 120)
    cli("hearth", "init", "--json", "--home", str(home))
    result = subprocess.run(
        [str(BIN / "hearth"), "serve", "--home", str(home), "--api-port", "0"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 9 and "too long for a Unix socket" in result.stderr
    code, out = hearth(home, "status")  # the commands still work, in-process
    assert code == 0 and out["nodes"] == []


def test_hostile_socket_clients_never_take_it_down(companion, phone) -> None:
    garbage = SocketClient(phone)
    garbage.send(b"\x00\xffnot json at all\n")
    reply = garbage.receive()
    assert reply is not None and (reply["type"], reply["code"]) == ("error", "invalid_input")
    garbage.send({"op": "ask", "request": {"text": "hi"}, "smuggled": 1})
    assert garbage.until("error")["code"] == "invalid_input"  # unknown fields are refused
    garbage.send({"op": "confirm", "confirm_id": "nobody asked", "approve": True})
    garbage.send({"op": "status"})  # a stray answer is ignored, the connection still works
    assert garbage.until("result", "error")["type"] == "result"
    garbage.close()

    huge = SocketClient(phone)
    huge.send(b"{" + b" " * (1 << 20) + b"}\n")
    reply = huge.receive()
    assert reply is not None and reply["code"] == "invalid_input"
    assert huge.receive() is None  # and the connection is closed
    huge.close()

    quitter = SocketClient(phone)  # hangs up mid-ask: the request is cancelled
    quitter.send({"op": "ask", "request": {"text": "tell me a story", "route": "local"}})
    quitter.close()

    crowd = [SocketClient(phone) for _ in range(20)]
    try:
        for client in crowd:
            client.send({"op": "status"})
        replies = [client.receive() for client in crowd]
        busy = [r for r in replies if r is not None and r.get("code") == "busy"]
        served = [r for r in replies if r is not None and r["type"] == "result"]
        assert len(served) + len(busy) == 20 and len(served) <= 16, replies
    finally:
        for client in crowd:
            client.close()

    assert companion.proc.poll() is None
    code, out = hearth(phone, "ask", "still there?", "--route", "local")
    assert code == 0 and out["served_by"] == "companion"


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory):
    """A phone paired with a home that plans from a script, and its companion running."""
    processes = Processes()
    try:
        bench = start_bench(processes, tmp_path_factory.mktemp("bench"))
        yield bench, start_companion(processes, bench.phone)
    finally:
        processes.cleanup()


def test_a_confirmation_round_trips_over_the_socket(scripted) -> None:
    bench, _ = scripted
    for approve, status in ((True, "ok"), (False, "refused")):
        bench.script.write_text(SEND_SCRIPT)
        client = SocketClient(bench.phone)
        client.send({"op": "ask", "request": {"text": "send it", "route": "remote"}})
        question = client.until("confirm", "answer", "error")
        assert question["type"] == "confirm", question
        assert question["tool"] == "message_send" and "alice" in question["text"]
        client.send({"op": "confirm", "confirm_id": question["confirm_id"], "approve": approve})
        answer = client.until("answer", "error")
        client.close()
        assert answer["type"] == "answer", answer
        [step] = answer["result"]["plans"][0]["steps"]
        assert step["status"] == status
        assert answer["result"]["served_by"] == "companion"


def test_a_client_that_hangs_up_mid_ask_cancels_it_at_the_node(scripted) -> None:
    bench, _ = scripted
    bench.script.write_text(SEND_SCRIPT)

    def cancelled() -> list[dict]:
        frames = [json.loads(line) for line in bench.heard.read_text().splitlines()]
        return [f for f in frames if f["frame"] == "cancel"]

    before = len(cancelled())
    client = SocketClient(bench.phone)
    client.send({"op": "ask", "request": {"text": "send it", "route": "remote"}})
    assert client.until("confirm", "answer", "error")["type"] == "confirm"
    client.close()  # with a question open: nobody answers it, and the node is told
    wait_until(lambda: len(cancelled()) > before, "the node to hear the cancel")
    client = SocketClient(bench.phone)
    client.send({"op": "status"})
    assert client.until("result", "error")["type"] == "result"
    client.close()


def test_the_cli_asks_a_relayed_confirmation_on_its_terminal(scripted) -> None:
    bench, _ = scripted
    bench.script.write_text(SEND_SCRIPT)
    term = on_terminal(
        str(BIN / "hearth"), "ask", "--route", "remote", "--json", "--home", str(bench.phone),
        "send it", stdout=subprocess.PIPE,
    )  # fmt: skip
    term.expect("Go ahead?")
    term.type("y")
    assert term.finish() == 0, term.text()
    assert term.proc.stdout is not None
    out = json.loads(term.proc.stdout.read().decode())
    assert out["served_by"] == "companion"
    assert out["plans"][0]["steps"][0]["status"] == "ok"


def test_yes_and_no_answer_for_the_served_command_line(scripted) -> None:
    bench, _ = scripted
    for flag, status, exit_status in (("--no", "refused", 8), ("--yes", "ok", 0)):
        bench.script.write_text(SEND_SCRIPT)
        code, out = hearth(bench.phone, "ask", "send it", "--route", "remote", flag)
        assert code == exit_status, out
        assert out["served_by"] == "companion"
        assert out["plans"][0]["steps"][0]["status"] == status


@pytest.mark.timing
def test_ctrl_c_on_a_served_ask_exits_130(scripted) -> None:
    bench, _ = scripted
    bench.script.write_text(SEND_SCRIPT)
    term = on_terminal(
        str(BIN / "hearth"), "ask", "--route", "remote", "--home", str(bench.phone), "send it"
    )
    term.expect("Go ahead?")
    os.kill(term.proc.pid, signal.SIGINT)
    assert term.finish(timeout=STOP_BOUND_S) == 130, term.text()
    assert "Traceback" not in term.text()
    client = wait_until(lambda: SocketClient(bench.phone), "the companion to answer")
    client.send({"op": "status"})
    assert client.until("result", "error")["type"] == "result"
    client.close()


def test_a_relayed_question_nobody_answers_is_a_refusal() -> None:
    import trio

    from hearth.companion.client_confirm import RelayedConfirmer
    from hearth.companion.confirm import Confirmation

    asked = []

    async def emit(event) -> None:
        asked.append(event)

    question = Confirmation("step", "p1", "send?", "message_send", {"to": "x"}, {"to": "web"})

    async def unanswered() -> tuple[bool, bool]:
        relay = RelayedConfirmer(emit, timeout_s=0.05)
        approved = await relay.confirm(question)
        return approved, relay.answer(asked[-1].confirm_id, True)  # closed by now

    async def answered_twice() -> tuple[bool, bool, bool]:
        relay = RelayedConfirmer(emit, timeout_s=60)
        answers: list[bool] = []

        async def ask() -> None:
            answers.append(await relay.confirm(question))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            with trio.fail_after(30):
                while len(asked) < 2:
                    await trio.sleep(0.001)
            first = relay.answer(asked[1].confirm_id, False)
            second = relay.answer(asked[1].confirm_id, True)  # a second answer changes nothing
        return answers[0], first, second

    assert trio.run(unanswered) == (False, False)
    assert trio.run(answered_twice) == (False, True, False)
    assert asked[0].tainted == {"to": "web"} and "untrusted" in asked[0].text


# Attacks on companion.sock from the outside: a stuck companion, another user's socket or
# client. Light: no model, no node (the server side runs in this process on a bare home).

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")

# binds `argv[1]` as root, listens as user nobody (whose credentials the socket then carries)
# and answers every request with a forged status
IMPOSTER = """
import os, socket, sys
server = socket.socket(socket.AF_UNIX)
server.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
os.setgid(65534)
os.setuid(65534)
server.listen(8)
for _ in range(8):
    client, _ = server.accept()
    client.settimeout(30)
    try:
        client.recv(65536)
        client.sendall(b'{"type":"hello","pid":1}\\n{"type":"result","result":{"forged":true}}\\n')
    except OSError:
        pass
    client.close()
"""


def hearth_run(home: Path, *args: str) -> tuple[int, dict]:
    """`hearth ARGS --json`, bounded: a command that hangs fails the test."""
    result = subprocess.run(
        [str(BIN / "hearth"), *args, "--json", "--home", str(home)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return result.returncode, json.loads(result.stdout.strip().splitlines()[-1])


def test_a_companion_that_never_answers_is_an_error_not_a_hang(tmp_path) -> None:
    home = tmp_path / "home"
    cli("hearth", "init", "--json", "--home", str(home))
    with socket.socket(socket.AF_UNIX) as stuck:  # listening, never accepting (SIGSTOPped)
        stuck.bind(str(home / "companion.sock"))
        stuck.listen(1)
        for args in (("status",), ("ask", "hello", "--route", "local")):
            code, out = hearth_run(home, *args)
            assert (code, out["error"]["code"]) == (3, "unreachable"), out
            assert "does not answer" in out["error"]["message"]


@as_root
def test_a_socket_served_by_another_user_is_refused(processes, tmp_path) -> None:
    home = tmp_path / "home"
    cli("hearth", "init", "--json", "--home", str(home))
    imposter = tmp_path / "imposter.sock"
    processes.spawn(str(BIN / "python"), "-c", IMPOSTER, str(imposter))
    wait_until(imposter.exists, "the imposter to listen")
    (home / "companion.sock").symlink_to(imposter)  # or a socket of theirs in a shared home
    code, out = hearth_run(home, "status")
    assert (code, out["error"]["code"]) == (4, "refused"), out
    assert "not by you" in out["error"]["message"]


def while_serving(home: Path, work: Callable[[Path], Awaitable[T]]) -> T:
    """`work(socket path)` while this process serves companion.sock for `home` (a bare
    `Service`: no model, no node)."""
    import trio

    from hearth.companion.service import Service
    from hearth.companion.socket_server import serve_socket

    async def main() -> T:
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                path = await nursery.start(serve_socket, Service(home), home / "companion.sock")
                result = await work(path)
                nursery.cancel_scope.cancel()
            return result

    return trio.run(main)


@as_root
def test_the_companion_serves_only_its_own_user() -> None:
    import tempfile

    import trio

    top = Path(tempfile.mkdtemp(dir="/tmp"))  # a short path others can traverse
    try:
        home = top / "h"
        cli("hearth", "init", "--json", "--home", str(home))
        probe = (
            "import os, socket, sys\n"
            f"os.setgid({NOBODY}); os.setuid({NOBODY})\n"
            "s = socket.socket(socket.AF_UNIX); s.settimeout(30); s.connect(sys.argv[1])\n"
            "try:\n"
            "    s.sendall(b'{\"op\": \"status\"}\\n'); print(s.recv(65536).decode() or 'closed')\n"
            "except OSError:\n"
            "    print('closed')\n"
        )

        async def outsider_then_owner(path: Path) -> tuple[str, str]:
            for folder in (top, home):  # a home (and socket) left open, by mistake
                folder.chmod(0o711)
            path.chmod(0o666)
            outsider = await trio.run_process(
                [str(BIN / "python"), "-c", probe, str(path)], capture_stdout=True
            )
            owner = SocketClient(home)
            owner.send({"op": "tools"})
            mine = await trio.to_thread.run_sync(owner.receive)
            owner.close()
            return outsider.stdout.decode().strip(), mine["type"] if mine else "closed"

        assert while_serving(home, outsider_then_owner) == ("closed", "result")
    finally:
        shutil.rmtree(top)


def test_a_storage_problem_reads_the_same_served_and_in_process(tmp_path) -> None:
    import trio

    home = tmp_path / "home"
    cli("hearth", "init", "--json", "--home", str(home))

    async def damaged(path: Path) -> tuple[int, dict]:
        (home / "audit.db").unlink()  # the audit database can no longer be opened
        (home / "audit.db").mkdir()
        return await trio.to_thread.run_sync(hearth_run, home, "audit")

    served = while_serving(home, damaged)
    assert not (home / "companion.sock").exists()
    assert served == hearth_run(home, "audit")  # in-process
    assert (served[0], served[1]["error"]["code"]) == (9, "invalid_input"), served


def test_a_storage_problem_reads_the_same_over_http_as_over_the_socket(tmp_path) -> None:
    """Every door reports a command's failure through the core: the HTTP API answers an
    unwritable home as `invalid_input` (400) with the message the socket gives, not 500."""
    import secrets

    import trio

    from hearth.companion.api import serve_api
    from hearth.companion.service import Service
    from hearth.companion.socket_server import serve_socket

    home = tmp_path / "home"
    cli("hearth", "init", "--json", "--home", str(home))
    token = secrets.token_urlsafe(32)

    def over_http(port: int) -> httpx.Response:
        auth = {"authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=auth, timeout=60) as http:
            return http.get("/api/audit")

    async def main() -> tuple[httpx.Response, tuple[int, dict]]:
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                service = Service(home)
                await nursery.start(serve_socket, service, home / "companion.sock")
                port = await nursery.start(serve_api, service, 0, token)
                (home / "audit.db").unlink()  # the audit database can no longer be opened
                (home / "audit.db").mkdir()
                answered = await trio.to_thread.run_sync(over_http, port)
                served = await trio.to_thread.run_sync(hearth_run, home, "audit")
                nursery.cancel_scope.cancel()
        return answered, served

    answered, (status, served) = trio.run(main)
    assert (answered.status_code, answered.json()) == (400, served), answered.text
    assert (status, served["error"]["code"]) == (9, "invalid_input")


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path) -> None:
    from hearth.companion.home_lock import instance_lock
    from hearth.protocol.wire.errors import HearthError

    home = tmp_path / "home"
    home.mkdir()
    precious = tmp_path / "precious"
    precious.write_text("keep me\n")
    (home / "companion.lock").symlink_to(precious)
    with pytest.raises(HearthError, match="symbolic link") as refused, instance_lock(home):
        pass
    assert refused.value.code.value == "invalid_input"
    assert precious.read_text() == "keep me\n"


def test_a_companion_gone_while_its_question_is_open_is_unreachable(tmp_path) -> None:
    """The companion stops (SIGTERM) while the terminal asks its question: the answer
    finds nobody, and the command says so instead of crashing."""
    import threading

    import trio

    from hearth.companion.client import companion
    from hearth.companion.events import AskRequest, discard
    from hearth.protocol.wire.errors import HearthError

    question = {
        "type": "confirm", "confirm_id": "q1", "kind": "step", "plan_id": "p1",
        "tool": "message_send", "summary": "send?", "text": "send?",
    }  # fmt: skip
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "companion.sock"))
    listener.listen(1)
    listener.settimeout(60)

    def asks_then_stops() -> None:
        client, _ = listener.accept()
        with client:
            client.settimeout(60)
            client.sendall(b'{"type":"hello","pid":1}\n')
            client.recv(65536)  # the ask
            client.sendall(json.dumps(question).encode() + b"\n")
        stopped.set()

    class AnswersOnceStopped:
        async def confirm(self, request: object) -> bool:
            return await trio.to_thread.run_sync(stopped.wait, 60)

    stopped = threading.Event()
    server = threading.Thread(target=asks_then_stops)
    server.start()

    async def ask() -> None:
        with trio.fail_after(60):
            async with companion(tmp_path) as connection:
                assert connection is not None
                await connection.ask(
                    AskRequest(text="send it"), discard, AnswersOnceStopped(), trio.Event()
                )

    try:
        with pytest.raises(HearthError) as gone:
            trio.run(ask)
        assert gone.value.code.value == "unreachable"
    finally:
        server.join(timeout=60)
        listener.close()


def lock_is_shared(home: Path) -> bool:
    """Whether someone holds `home`'s companion lock (so that it cannot be taken)."""
    import fcntl

    with open(home / "companion.lock", "rb") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(lock, fcntl.LOCK_UN)
        return False


def test_no_command_works_in_process_beside_a_starting_companion(tmp_path) -> None:
    """A companion holds the home while it starts (resuming interrupted plans) before its
    socket is up: a command then must not resume the same plans in-process."""
    from hearth.companion.home_lock import instance_lock

    home = tmp_path / "home"
    cli("hearth", "init", "--json", "--home", str(home))
    with instance_lock(home):  # started, not serving yet
        code, out = hearth_run(home, "status")
    assert (code, out["error"]["code"]) == (5, "busy"), out
    assert f"pid {os.getpid()}" in out["error"]["message"]
    code, out = hearth_run(home, "status")  # and once it is gone, in-process again
    assert code == 0 and out["nodes"] == [], out


def test_a_restarted_companion_waits_for_an_in_process_command_instead_of_exiting_busy(
    tmp_path, processes
) -> None:
    """A companion restarted while an ask that fell back to its own process still works
    (issue 33): it waits for it, then starts; it never resumes that ask's plan."""
    home = tmp_path / "phone"
    cli("hearth", "init", "--json", "--home", str(home))
    chat = processes.spawn(  # no companion: the chat works in its own process, holding the home
        str(BIN / "hearth"), "chat", "--home", str(home), stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_until(lambda: (home / "companion.lock").exists() and lock_is_shared(home), "the chat")
    log = tmp_path / "serve.log"
    with log.open("w") as err:
        serve = processes.spawn(
            str(BIN / "hearth"), "serve", "--home", str(home), "--api-port", "0",
            "--ready-file", str(tmp_path / "ready.json"), stderr=err,
        )  # fmt: skip
        wait_until(lambda: "waiting" in log.read_text() or serve.poll() is not None, "serve")
        assert serve.poll() is None, log.read_text()  # not `busy` (exit 5): it waits
        assert chat.stdin is not None
        chat.stdin.close()  # the chat ends
        assert chat.wait(timeout=60) == 0
        wait_until(lambda: (tmp_path / "ready.json").exists(), "the companion serving")
        os.kill(serve.pid, signal.SIGTERM)
        assert serve.wait(timeout=30) == 0


def test_the_ready_file_never_follows_a_planted_link(tmp_path) -> None:
    """`--ready-file` in a shared folder: a link planted where the partial file was
    expected (`.NAME.PID`) must not make the companion overwrite the link's target."""
    from hearth.companion.resident import write_ready

    precious = tmp_path / "precious"
    precious.write_text("keep me\n")
    ready = tmp_path / "ready.json"
    (tmp_path / f".ready.json.{os.getpid()}").symlink_to(precious)
    write_ready(ready, {"socket": "s"})
    assert precious.read_text() == "keep me\n"
    assert json.loads(ready.read_text()) == {"socket": "s"}
    assert ready.stat().st_mode & 0o777 == 0o600


def test_out_of_bounds_arguments_are_invalid_input_served_or_not(tmp_path) -> None:
    import trio

    home = tmp_path / "home"
    cli("hearth", "init", "--json", "--home", str(home))
    commands = [
        ("search", ""),
        ("search", "x" * 5000),
        ("conversations", "x" * 200),
        ("ask", "x" * (32 * 1024 + 1)),  # the thin client leaves the check to the companion
        ("ask", "hi", "--conversation", "x" * 65),
    ]

    def run_all() -> list[tuple[int, dict]]:
        return [hearth_run(home, *command) for command in commands]

    async def served_runs(path: Path) -> list[tuple[int, dict]]:
        return await trio.to_thread.run_sync(run_all)

    served = while_serving(home, served_runs)
    assert served == run_all()  # in-process: the same objects and exit statuses
    for code, out in served:
        assert (code, out["error"]["code"]) == (9, "invalid_input"), out


def test_a_report_larger_than_a_request_line_reads_the_same_served(tmp_path) -> None:
    """A long-lived phone's audit log outgrows companion.sock's 1 MiB request lines: the
    served `hearth audit` must still print it, as the in-process one does."""
    import trio

    from hearth.companion.audit import AuditLog, AuditRecord

    home = tmp_path / "home"
    cli("hearth", "init", "--json", "--home", str(home))
    log = AuditLog(home)
    record = AuditRecord("p" * 32, "s" * 52, "message_send", "0" * 64, "run", "r" * 200, "ok")
    for _ in range(3000):  # about 1.5 MB of JSON
        log.append(record)

    async def served_audit(path: Path) -> tuple[int, dict]:
        return await trio.to_thread.run_sync(hearth_run, home, "audit")

    code, served = while_serving(home, served_audit)
    assert code == 0 and len(served["records"]) == 3000, served.get("error")
    assert (code, served) == hearth_run(home, "audit")


def test_sigterm_while_a_question_is_open_stops_and_nothing_runs_unasked(
    scripted, processes
) -> None:
    """Runs last on `scripted`: its companion is stopped here."""
    bench, running = scripted
    bench.script.write_text(SEND_SCRIPT)
    client = SocketClient(bench.phone)
    client.send({"op": "ask", "request": {"text": "send it", "route": "remote"}})
    question = client.until("confirm", "answer", "error")
    assert question["type"] == "confirm", question
    assert running.stop() == 0  # SIGTERM with the question open: a clean stop, in bound
    assert client.receive() is None  # the client sees the companion hang up
    client.close()
    restarted = start_companion(processes, bench.phone)  # it resumes the interrupted plan
    code, audit = hearth(bench.phone, "audit")
    assert code == 0
    ran = [r for r in audit["records"] if r["plan_id"] == question["plan_id"]]
    assert all(r["outcome"] != "ok" for r in ran), ran  # never run without a yes
    assert restarted.stop() == 0
