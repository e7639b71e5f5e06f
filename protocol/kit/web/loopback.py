"""Serving a guarded app on 127.0.0.1 with Hypercorn's trio worker, in the caller's loop."""

from __future__ import annotations

import logging
import socket

import anyio
from anyio.abc import TaskStatus
from hypercorn.config import Config
from hypercorn.trio import serve as hypercorn_serve
from starlette.types import ASGIApp

from hearth.protocol.kit.request_log import access_log
from hearth.protocol.wire.errors import ErrorCode, HearthError

log = logging.getLogger(__name__)


def _check_free(port: int) -> None:
    """`busy` now when 127.0.0.1:`port` is taken (rather than an OSError from inside the
    server's task group)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise HearthError(
                ErrorCode.BUSY, f"127.0.0.1:{port} is in use ({exc.strerror})"
            ) from exc


async def serve(
    app: ASGIApp, port: int, *, task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Serve `app` on 127.0.0.1:`port` (0: a free port) with Hypercorn's trio worker until
    cancelled, one line logged per request; `task_status.started` gets the port actually
    bound."""
    app = access_log(app)
    if port:
        _check_free(port)
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.errorlog = log
    config.accesslog = None
    config.include_server_header = False
    config.graceful_timeout = 1.0
    # A flood of clients gets answers, not resets: connections wait in the kernel's queue
    # (Linux caps it at net.core.somaxconn; Hypercorn's 100 overflowed at a few hundred, the
    # kernel then resetting them), and an accepted one waits up to this for the loop to
    # read its first request (Hypercorn's idle timer, 5 s by default, closed it unread).
    config.backlog = 4096
    config.keep_alive_timeout = 30.0

    async def _serve(*, task_status: TaskStatus[list[str]]) -> None:
        # starlette's ASGIApp and hypercorn's Framework type the same ASGI callable differently
        await hypercorn_serve(app, config, task_status=task_status)  # type: ignore[arg-type]

    async with anyio.create_task_group() as group:
        binds: list[str] = await group.start(_serve)
        task_status.started(int(binds[0].rsplit(":", 1)[1]))
