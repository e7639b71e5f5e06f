"""The daemon's local control socket (`control.sock`, mode 0600): one JSON line in,
one JSON line out. `hearth-node invite` and `status` talk to a running daemon here."""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketStream, TaskStatus

from hearth.protocol.wire.errors import ErrorCode, HearthError

log = logging.getLogger("hearth.control")
CONTROL_SOCKET = "control.sock"
MAX_LINE = 64 * 1024
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


async def serve_control(
    home: Path, handle: Handler, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Answer control requests until cancelled."""
    path = home / CONTROL_SOCKET
    path.unlink(missing_ok=True)
    listener = await anyio.create_unix_listener(path)
    os.chmod(path, 0o600)
    task_status.started()

    async def one(client: SocketStream) -> None:
        async with client:
            data = b""
            with anyio.move_on_after(10):
                while not data.endswith(b"\n") and len(data) < MAX_LINE:
                    chunk = await client.receive(MAX_LINE)
                    if not chunk:
                        break
                    data += chunk
            try:
                reply = await handle(json.loads(data))
            except HearthError as exc:
                reply = exc.to_json()
            except (ValueError, KeyError, TypeError) as exc:
                reply = HearthError(
                    ErrorCode.INVALID_INPUT, f"bad control request: {exc}"
                ).to_json()
            await client.send(json.dumps(reply).encode() + b"\n")

    try:
        async with listener:
            await listener.serve(one)
    finally:
        path.unlink(missing_ok=True)


def request(home: Path, message: dict[str, Any], timeout: float = 30.0) -> dict[str, Any]:
    """Ask the running daemon; `unreachable` when none runs under `home`."""
    path = home / CONTROL_SOCKET
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(str(path))
        except OSError as exc:
            raise HearthError(
                ErrorCode.UNREACHABLE, f"no hearth-node is running with home {home}"
            ) from exc
        sock.sendall(json.dumps(message).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(MAX_LINE)
            if not chunk:
                break
            data += chunk
    reply: dict[str, Any] = json.loads(data)
    if "error" in reply:
        error = reply["error"]
        raise HearthError(
            ErrorCode(error["code"]), error["message"], retry_after=error.get("retry_after")
        )
    return reply
