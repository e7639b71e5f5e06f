"""The thin `hearth ask` (companion/entry.py, companion/thin.py): it reads exactly the
arguments the command line reads, and anything else goes to the command line; what a
companion sends it is checked, a bad line is `protocol_error`, never a traceback.

The companion here is a script on a real Unix socket that sends the lines a test needs
(a real companion answers in tests/test_serve.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hearth.companion.entry import OPTIONS, NotPlain, plain_ask

from .nodes import BIN, cli

pytestmark = pytest.mark.timeout(120)

RESULT = {
    "request_id": "r1", "route": "local", "reason": "the phone's model", "answer": "milk noted",
    "plans": [], "warnings": [], "served_by": "companion",
}  # fmt: skip
REFUSED_STEP = {"id": "s1", "tool": "message_send", "arguments": {}, "status": "refused"}


def test_the_thin_parser_takes_exactly_the_options_of_hearth_ask() -> None:
    import typer.main

    from hearth.companion.cli import app

    ask = typer.main.get_command(app).commands["ask"]  # type: ignore[attr-defined]
    declared = {opt for param in ask.params for opt in param.opts if opt.startswith("--")}
    assert declared - {"--help"} == OPTIONS


@pytest.mark.parametrize(
    "args",
    [
        ("--", "-x"),  # `--`: the command line's to read
        ("-5",),  # a value like an option
        ("hi", "--help"),
        ("hi", "--rout", "local"),  # no abbreviations, as the command line has none
        ("hi", "--route", "sideways"),  # a usage error: the command line's own message
        ("hi", "there"),  # two texts
        (),
    ],
)
def test_arguments_read_otherwise_go_to_the_command_line(args: tuple[str, ...]) -> None:
    with pytest.raises(NotPlain):
        plain_ask(list(args))


def test_plain_arguments_read_as_the_command_line_reads_them() -> None:
    args = plain_ask(
        ["--route=remote", "note milk", "--attach", "a.txt", "--attach", "b.md", "--json"]
    )
    assert (args.text, args.route, args.tool_choice) == ("note milk", "remote", "auto")
    assert args.attach == ["a.txt", "b.md"] and args.as_json and not args.yes


class ScriptedCompanion:
    """Listens on `home`'s companion.sock; each connection is greeted, its one request
    read, then answered with `lines` (JSON values, or raw bytes)."""

    def __init__(self, home: Path, lines: list[object]) -> None:
        self.requests: list[dict] = []
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(home / "companion.sock"))
        self.listener.listen(4)
        self.listener.settimeout(60)
        self.lines = lines
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        client, _ = self.listener.accept()
        with client, client.makefile("rb") as reader:
            client.sendall(b'{"type":"hello","pid":1}\n')
            self.requests.append(json.loads(reader.readline()))
            for line in self.lines:
                raw = line if isinstance(line, bytes) else json.dumps(line).encode() + b"\n"
                client.sendall(raw)
                if isinstance(line, dict) and line.get("type") == "confirm":
                    answer = reader.readline()  # none from a client that found the line bad
                    self.requests.extend([json.loads(answer)] if answer else [])

    def close(self) -> None:
        self.thread.join(timeout=60)
        self.listener.close()


@pytest.fixture
def home(tmp_path) -> Iterator[Path]:
    directory = tmp_path / "phone"
    cli("hearth", "init", "--json", "--home", str(directory))
    yield directory


def ask(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "hearth"), "ask", *args, "--home", str(home)],
        capture_output=True, text=True, timeout=100, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_served_answer_prints_the_companions_object_and_its_exit_status(home) -> None:
    refused = {**RESULT, "plans": [{"plan_id": "p" * 16, "round": 1, "signer": "node",
                                    "steps": [REFUSED_STEP]}]}  # fmt: skip
    for result, status in ((RESULT, 0), (refused, 8)):
        companion = ScriptedCompanion(home, [{"type": "token", "text": "milk"},
                                             {"type": "answer", "result": result}])  # fmt: skip
        try:
            out = ask(home, "note milk", "--json", "--yes")
        finally:
            companion.close()
            (home / "companion.sock").unlink()
        assert out.returncode == status, out.stderr
        assert json.loads(out.stdout) == result
        assert companion.requests[0] == {
            "op": "ask",
            "request": {
                "text": "note milk", "route": "auto", "tool_choice": "auto", "thinking": False,
                "conversation_id": None, "continue_last": False, "attachments": [],
                "confirm": "yes",
            },
        }  # fmt: skip


def test_a_question_without_a_terminal_is_declined(home) -> None:
    question = {
        "type": "confirm", "confirm_id": "q1", "kind": "step", "plan_id": "p1",
        "tool": "message_send", "summary": "send?", "text": "send?", "arguments": {"to": "a"},
    }  # fmt: skip
    companion = ScriptedCompanion(home, [question, {"type": "answer", "result": RESULT}])
    try:
        out = ask(home, "send it", "--json")
    finally:
        companion.close()
    assert out.returncode == 0, out.stderr
    assert companion.requests[1] == {"op": "confirm", "confirm_id": "q1", "approve": False}


@pytest.mark.parametrize(
    "line",
    [
        b"not json\n",
        b"[1, 2]\n",
        {"type": "surprise"},
        {"type": "token", "text": 7},
        {"type": "answer", "result": "not an object"},
        {"type": "confirm", "confirm_id": "q1", "kind": "step", "plan_id": 3, "summary": "?"},
    ],
)
def test_a_bad_line_from_the_companion_is_a_protocol_error(home, line) -> None:
    companion = ScriptedCompanion(home, [line])
    try:
        out = ask(home, "hi", "--json")
    finally:
        companion.close()
    assert "Traceback" not in out.stderr
    assert json.loads(out.stdout)["error"]["code"] == "protocol_error", out.stdout
    assert out.returncode == 10


def test_a_companion_that_hangs_up_mid_answer_is_unreachable(home) -> None:
    companion = ScriptedCompanion(home, [{"type": "token", "text": "mi"}, b'{"type": "tok'])
    try:
        out = ask(home, "hi", "--json")
    finally:
        companion.close()
    assert json.loads(out.stdout)["error"]["code"] == "unreachable", out.stdout
    assert out.returncode == 3


@pytest.mark.timing
def test_ctrl_c_while_a_stuck_companion_is_awaited_exits_130(home) -> None:
    """A companion that accepts and never greets is waited for at most 10 s; a Ctrl-C in
    that wait ends the command at once, as cancelled."""
    import os
    import signal
    import time

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(home / "companion.sock"))
    listener.listen(1)
    listener.settimeout(60)
    proc = subprocess.Popen(
        [str(BIN / "hearth"), "ask", "hi", "--json", "--home", str(home)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        client, _ = listener.accept()  # connected: the command waits for a greeting
        with client:
            time.sleep(0.5)
            os.kill(proc.pid, signal.SIGINT)
            out, err = proc.communicate(timeout=5)  # well before the 10 s greeting bound
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        listener.close()
    assert proc.returncode == 130, err
    assert json.loads(out)["error"]["code"] == "cancelled"
    assert "Traceback" not in err
