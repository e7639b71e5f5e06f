"""`hearth serve`: the resident companion, one task group for everything it serves.

The `Service` (warm model, kept link to the home node, conversations, executor, the
journal resumed at start), companion.sock for the `hearth` commands and the HTTP API on
127.0.0.1. One companion per home (a lock file says which process holds it); SIGTERM
stops it cleanly and SIGINT as Ctrl-C does, both within `STOP_BOUND_S`.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import trio

from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .client import socket_path
from .server import check_socket_path, serve_socket

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .service import Service

LOCK_NAME = "companion.lock"
TOKEN_NAME = "api.token"
STOP_BOUND_S = 1.8  # after a stop signal, the most the companion takes to end (contract: 2 s)
STOPPED_BY_INTERRUPT = 130


@contextmanager
def instance_lock(home: Path) -> Iterator[None]:
    """Hold the home's companion lock, exclusively: `busy` while another companion (or a
    `hearth` command working in-process, see `command_lock`) uses the home. The lock file
    is never followed elsewhere: the holder's pid is written into it."""
    path = home / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        symlink = f"{path} is a symbolic link: remove it"
        raise HearthError(ErrorCode.INVALID_INPUT, symlink) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
            who = f"pid {holder}" if holder else "a `hearth` command working in-process"
            raise HearthError(
                ErrorCode.BUSY, f"a companion already serves {home}, or is starting ({who})"
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            yield
        finally:
            os.ftruncate(fd, 0)  # nobody holds it now
    finally:
        os.close(fd)  # closing the descriptor releases the lock


async def commands_done(home: Path, poll_s: float = 0.05) -> None:
    """Wait while only `hearth` commands working in-process hold the home (an ask that
    fell back to its own process when the companion was gone, say): a restarted
    companion starts once they end, instead of exiting `busy`. Returns at once when
    nobody holds the home, or a companion does (`instance_lock` then says `busy`)."""
    try:
        fd = os.open(home / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return  # no lock file yet: nobody holds it; other problems are instance_lock's
    told = False
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # a companion holds it
            fcntl.flock(fd, fcntl.LOCK_UN)
            if not told:
                sys.stderr.write("waiting for a `hearth` command working in-process to end\n")
                sys.stderr.flush()
                told = True
            await anyio.sleep(poll_s)
    finally:
        os.close(fd)


@contextmanager
def command_lock(home: Path) -> Iterator[None]:
    """A `hearth` command working in-process shares the home's lock with other commands,
    never with a companion: one starting (lock held, socket not yet up) would resume the
    same interrupted plans, and one started later would resume this command's plan as
    interrupted. `busy` while a companion holds it; a home with no lock file to open
    (missing, read-only, a file) is left for the command itself to report."""
    try:
        fd = os.open(home / LOCK_NAME, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise HearthError(
                ErrorCode.BUSY,
                f"a companion (pid {holder}) holds {home} but does not serve it yet: "
                "try again once it is ready",
            ) from None
        yield
    finally:
        os.close(fd)


def api_token(home: Path) -> str:
    """The HTTP API's bearer token in `api.token` (mode 0600), made on first use."""
    from hearth.protocol.web import load_token

    try:
        return load_token(home / TOKEN_NAME)
    except ValueError as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, str(exc)) from exc


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
                    actual = await _start_api(tg, service, port, api_token(home))
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


async def _start_api(tg: TaskGroup, service: Service, port: int, token: str) -> int:
    """C2's `serve_api` in the companion's task group; `busy` when the port is taken."""
    from .api import serve_api

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
