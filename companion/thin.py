"""`hearth ask` through a running companion, on the standard library alone.

With a companion serving the home, a command's process does little: send the request,
show the answer as it streams, ask the questions the companion relays, print the result.
This client does that with a blocking Unix socket and `json`, so the process reaches its
first token without loading trio, pydantic, libp2p or llama.cpp (rich only to draw on a
terminal). Replies are checked field by field as they are used: an unknown type or a
field of the wrong kind is `protocol_error`, as the async client's typed models say.
Without a companion, `ask_companion` says so (None) and the command runs in-process.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from hearth.protocol.kit.console import CANCELLED
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .confirm import Confirmation, ask_on_terminal
from .socket_address import (
    GREETING_S,
    MAX_REPLY_LINE,
    check_owner,
    not_accepting,
    reported,
    socket_path,
    stuck,
)
from .streaming import StreamingAnswer

CANCEL_GRACE_S = 0.5  # after Ctrl-C, for the companion to end the request (as in-process)
PROGRESS = frozenset({"route", "step", "hello", "result"})  # nothing to show or answer
STOPPED = "the companion stopped mid-request"


class Reply:
    """One line from the companion, checked as it is read."""

    def __init__(self, line: bytes) -> None:
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "the companion sent no JSON") from exc
        if not isinstance(value, dict) or not isinstance(value.get("type"), str):
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "the companion sent a line of no type")
        self.fields: dict[str, Any] = value
        self.type: str = value["type"]

    def get(self, name: str, kind: type, default: Any = None) -> Any:
        """Field `name`, which must be a `kind` (or absent, when it has a default)."""
        value = self.fields.get(name, default)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise HearthError(
                ErrorCode.PROTOCOL_ERROR, f"the companion sent a {self.type} with a bad {name}"
            )
        return value

    def error(self) -> HearthError:
        return reported(self.get("code", str), self.get("message", str))

    def question(self) -> Confirmation:
        return Confirmation(
            kind=self.get("kind", str),
            plan_id=self.get("plan_id", str),
            summary=self.get("summary", str),
            tool=self.get("tool", str, ""),
            arguments=self.get("arguments", dict, {}),
            tainted={k: str(v) for k, v in self.get("tainted", dict, {}).items()},
        )


class ThinConnection:
    """One blocking connection to the companion serving a home."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._file = sock.makefile("rb")

    def send(self, op: dict[str, Any]) -> None:
        try:
            self._sock.sendall(json.dumps(op).encode() + b"\n")
        except OSError as exc:
            raise HearthError(ErrorCode.UNREACHABLE, STOPPED) from exc

    def receive(self) -> Reply:
        try:
            line = self._file.readline(MAX_REPLY_LINE)
        except OSError as exc:  # a reset, or the socket's timeout (TimeoutError)
            raise HearthError(ErrorCode.UNREACHABLE, STOPPED) from exc
        if not line.endswith(b"\n"):
            if len(line) >= MAX_REPLY_LINE:
                raise HearthError(ErrorCode.PROTOCOL_ERROR, "the companion sent too long a line")
            raise HearthError(ErrorCode.UNREACHABLE, STOPPED)
        return Reply(line)

    def greeted(self, home: Path) -> None:
        """Wait, bounded, for the companion's `hello` (or its `busy`)."""
        self._sock.settimeout(GREETING_S)
        try:
            reply = self.receive()
        except HearthError as exc:
            if isinstance(exc.__cause__, TimeoutError):
                raise stuck(home) from None
            raise
        if reply.type == "error":
            raise reply.error()
        if reply.type != "hello":
            raise HearthError(ErrorCode.PROTOCOL_ERROR, f"the companion sent {reply.type}")
        self._sock.settimeout(None)

    def ask(self, request: dict[str, Any], view: StreamingAnswer) -> dict[str, Any]:
        """The answer's result (the `--json` object) of `request`; its tokens go to `view`,
        questions to this terminal. Ctrl-C tells the companion (which tells the node) and
        ends the request `cancelled`."""
        self.send({"op": "ask", "request": request})
        try:
            return self._until_answered(view)
        except KeyboardInterrupt:
            self._cancel()
            raise CANCELLED from None

    def _until_answered(self, view: StreamingAnswer) -> dict[str, Any]:
        while True:
            reply = self.receive()
            if reply.type == "token":
                if reply.get("thinking", bool, False):
                    view.thinking()
                else:
                    view.put(reply.get("text", str))
            elif reply.type == "answer":
                result: dict[str, Any] = reply.get("result", dict)
                return result
            elif reply.type == "error":
                raise reply.error()
            elif reply.type == "confirm":
                confirm_id, question = reply.get("confirm_id", str), reply.question()
                view.pause()
                approve = sys.stdin.isatty() and ask_on_terminal(question)
                self.send({"op": "confirm", "confirm_id": confirm_id, "approve": approve})
            elif reply.type not in PROGRESS:
                raise HearthError(ErrorCode.PROTOCOL_ERROR, f"the companion sent {reply.type}")

    def _cancel(self) -> None:
        """Tell the companion to stop, and give it `CANCEL_GRACE_S` to end the request."""
        deadline = time.monotonic() + CANCEL_GRACE_S
        try:
            self.send({"op": "cancel"})
            while (left := deadline - time.monotonic()) > 0:
                self._sock.settimeout(left)
                if self.receive().type in ("answer", "error"):
                    return
        except (HearthError, KeyboardInterrupt):
            return

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> ThinConnection:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def connect(home: Path) -> ThinConnection | None:
    """A greeted connection to the companion serving `home`, or None when none listens
    there; `refused` when another user's process serves the socket, `unreachable` when
    the companion does not accept or greet the connection in time."""
    path = socket_path(home)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(GREETING_S)  # a listener whose backlog is full accepts nobody
    try:
        sock.connect(str(path))
    except TimeoutError:
        sock.close()
        raise not_accepting(path) from None
    except OSError:  # no socket, a stale one, or a path too long for a socket
        sock.close()
        return None
    connection = ThinConnection(sock)
    try:
        check_owner(sock, path)
        connection.greeted(home)
    except BaseException:
        connection.close()
        raise
    return connection


def ask_companion(
    home: Path, request: dict[str, Any], view: StreamingAnswer
) -> dict[str, Any] | None:
    """`request`'s result from the companion serving `home`, or None when none runs."""
    connection = connect(home)
    if connection is None:
        return None
    with connection:
        return connection.ask(request, view)


def ask_fields(
    text: str,
    route: str,
    tool_choice: str,
    *,
    thinking: bool,
    conversation: str | None,
    continue_last: bool,
    attach: list[Path] | list[str],
    yes: bool,
    no: bool,
) -> dict[str, Any]:
    """`hearth ask`'s request (an `AskRequest`'s fields) from its arguments."""
    return {
        "text": text,
        "route": route,
        "tool_choice": tool_choice,
        "thinking": thinking,
        "conversation_id": conversation,
        "continue_last": continue_last,
        # absolute: a resident companion reads them from its own working directory
        "attachments": [os.path.abspath(path) for path in attach],
        "confirm": "yes" if yes else "no" if no else "ask",
    }


def finish(result: dict[str, Any], as_json: bool) -> None:
    """Print an ask's result (its JSON object, or the outcome for a person) and end with
    its status: 8 when a step was refused."""
    from hearth.protocol.kit.console import emit, plain

    def render() -> None:
        from .terminal import ask_outcome, print_lines

        print_lines(ask_outcome(result))
        for w in result["warnings"]:  # MCP servers left out, tools refused
            sys.stderr.write(f"warning: {plain(w['message'])}\n")

    emit(as_json, result, render)
    if any(s["status"] == "refused" for p in result["plans"] for s in p["steps"]):
        raise SystemExit(ErrorCode.PLAN_REJECTED.exit_status)
