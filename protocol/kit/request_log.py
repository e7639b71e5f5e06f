"""One log line per request a server answers, and the rotating file a server logs to.

A line carries a short id, the route (an HTTP method and route template, a socket op, a
protocol), the outcome (a status or an error code) and the duration; never a prompt, a
query string, a path parameter or a token (the dashboard's QR paths are secrets).
`hearth serve` and `hearth-node serve` log to stderr and to a file under their home,
rotated by size, mode 0600.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hearth.protocol.wire.errors import HearthError

log = logging.getLogger("hearth.requests")
LOG_BYTES = 1_000_000  # a log file's size before it is rotated
LOG_FILES_KEPT = 3  # rotated files kept beside the current one


class PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A `RotatingFileHandler` whose files (the first and every rotated one) are 0600,
    whatever the umask."""

    def _open(self):  # type: ignore[no-untyped-def]  # the base class leaves it untyped
        descriptor = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(descriptor, 0o600)
        return os.fdopen(descriptor, self.mode.replace("w", "a"), encoding=self.encoding)


def log_file_handler(path: Path) -> logging.Handler:
    """A handler writing to `path` (its folder made 0700), rotated past `LOG_BYTES`."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return PrivateRotatingFileHandler(
        path, maxBytes=LOG_BYTES, backupCount=LOG_FILES_KEPT, encoding="utf-8"
    )


@dataclass
class Logged:
    """A request being timed: its id, what it is (`route`) and how it ended (`outcome`),
    each set as it becomes known."""

    route: str
    outcome: str = "ok"
    id: str = field(default_factory=lambda: secrets.token_hex(4))


@contextmanager
def logged(entry: Logged) -> Iterator[Logged]:
    """Log `entry` in one line when the block ends, with the block's duration. A
    `HearthError` leaving the block is its outcome (its code); another exception, when no
    outcome was set, is `internal` (`cancelled` for a cancellation)."""
    started = time.monotonic()
    try:
        yield entry
    except HearthError as exc:
        entry.outcome = exc.code.value
        raise
    except Exception:
        entry.outcome = "internal" if entry.outcome == "ok" else entry.outcome
        raise
    except BaseException:  # cancelled: the server stops, or the client hung up
        entry.outcome = "cancelled" if entry.outcome == "ok" else entry.outcome
        raise
    finally:
        took_ms = (time.monotonic() - started) * 1000
        log.info("request %s %s: %s in %.0f ms", entry.id, entry.route, entry.outcome, took_ms)


def access_log(app: ASGIApp) -> ASGIApp:
    """`app` with one line logged per HTTP request: method, route template (path
    parameters replaced by their names), status, duration."""

    async def logging_app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        with logged(Logged(scope["method"], outcome="no answer")) as entry:

            async def noting(message: Message) -> None:
                if message["type"] == "http.response.start":
                    entry.outcome = str(message["status"])
                await send(message)

            try:
                await app(scope, receive, noting)
            finally:
                entry.route = f"{scope['method']} {_template(scope)}"

    return logging_app


def _template(scope: Scope) -> str:
    """The request's path with each path parameter's value replaced by `{name}`."""
    path = str(scope.get("path", ""))[:200]
    for name, value in dict(scope.get("path_params") or {}).items():
        if value:
            path = path.replace(str(value), f"{{{name}}}")
    return path
