"""`hearth serve`: the resident companion, one task group for everything it serves.

The `Service` (warm model, kept link to the home node, conversations, executor, the
journal resumed at start), companion.sock for the `hearth` commands and the HTTP API on
127.0.0.1. One companion per home (a lock file says which process holds it); SIGTERM
stops it cleanly and SIGINT as Ctrl-C does, both within `STOP_BOUND_S`.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import trio

from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .home_lock import commands_done, instance_lock
from .socket_messages import socket_path
from .socket_server import check_socket_path, serve_socket

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .service import Service

STOP_BOUND_S = 1.8  # after a stop signal, the most the companion takes to end (contract: 2 s)
STOPPED_BY_INTERRUPT = 130


def write_ready(path: Path, ready: dict[str, str]) -> None:
    """The ready file (mode 0600), written whole: a reader never sees half of it. The
    partial file has a fresh, unguessable name (never a link planted in a shared folder)."""
    fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(ready))
    os.replace(partial, path)


async def serve(home: Path, api_port: int | None, ready_file: Path | None) -> int:
    """Run the companion until SIGTERM (exit 0) or SIGINT (exit 130)."""
    from .service import Service
    from .settings import load_settings

    port = load_settings(home).api_port if api_port is None else api_port
    check_socket_path(socket_path(home))  # before anything slow is loaded
    await commands_done(home)
    stopped_by = 0
    with instance_lock(home), trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with anyio.create_task_group() as everything:

            async def stop_on_signal() -> None:  # during start-up too
                nonlocal stopped_by
                async for signum in signals:
                    stopped_by = STOPPED_BY_INTERRUPT if signum == signal.SIGINT else 0
                    _backstop(stopped_by)
                    everything.cancel_scope.cancel()
                    return

            everything.start_soon(stop_on_signal)
            try:
                async with (
                    Service.open(home, resident=True) as service,
                    anyio.create_task_group() as tg,
                ):
                    sock = await tg.start(serve_socket, service, socket_path(home))
                    actual = await _start_api(tg, service, port)
                    ready = {
                        "peer_id": service.peer_id,
                        "api": f"http://127.0.0.1:{actual}",
                        "socket": str(sock),
                    }
                    if ready_file is not None:
                        write_ready(ready_file, ready)
                    sys.stderr.write(f"hearth companion ready: {json.dumps(ready)}\n")
                    sys.stderr.flush()
            finally:
                if ready_file is not None:
                    ready_file.unlink(missing_ok=True)
    return stopped_by


async def _start_api(tg: TaskGroup, service: Service, port: int) -> int:
    """The HTTP API (`serve_api`) in the companion's task group, with the home's token;
    `busy` when the port is taken."""
    from .api import api_token, serve_api

    token = api_token(service.home)
    try:
        with single_error():
            port_bound: int = await tg.start(serve_api, service, port, token)
            return port_bound
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        raise HearthError(
            ErrorCode.BUSY,
            f"127.0.0.1:{port} is in use: free it, or pick another port with --api-port "
            "or `hearth config set api_port`",
        ) from None


def exit_now(status: int) -> None:
    """End the process once the companion has stopped: everything it holds is closed, and
    the interpreter's own teardown (a second or more on a busy phone) would only delay a
    stop the contract bounds."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def _backstop(status: int) -> None:
    """Exit with `status` after `STOP_BOUND_S` even if a worker thread is stuck in C code."""
    timer = threading.Timer(STOP_BOUND_S, os._exit, (status,))
    timer.daemon = True
    timer.start()
