"""Where the companion listens and whose process is at the other end of its socket.

Standard library only: the thin client (`companion/thin.py`) needs these before, and
often instead of, anything heavier.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

from hearth.protocol.wire.errors import ErrorCode, HearthError

SOCKET_NAME = "companion.sock"
# bytes in one line from the companion (the user's own process, checked by uid): a report
# such as `hearth audit` grows with the home, and must read as it does in-process
MAX_REPLY_LINE = 1 << 28
GREETING_S = 10.0  # a companion that does not greet a new connection this fast is stuck


def socket_path(home: Path) -> Path:
    """Where the companion serving `home` listens."""
    return home / SOCKET_NAME


def check_owner(raw: socket.socket, path: Path) -> None:
    """`refused` unless this user's own process serves `path` (`SO_PEERCRED`): a client
    never sends a request to, nor trusts an answer from, someone else, whatever the
    socket's mode says."""
    if (uid := socket_owner(raw)) != os.getuid():
        raise HearthError(
            ErrorCode.REFUSED, f"{path} is served by user {uid}, not by you: remove it"
        )


def not_accepting(path: Path) -> HearthError:
    """A listener whose backlog is full accepts nobody."""
    return HearthError(ErrorCode.UNREACHABLE, f"the companion at {path} accepts no connection")


def stuck(home: Path) -> HearthError:
    """A companion that accepted a connection but never greeted it."""
    return HearthError(
        ErrorCode.UNREACHABLE,
        f"the companion serving {home} does not answer (stuck?): stop it, "
        f"or remove {socket_path(home)} if no companion runs",
    )


def reported(code: str, message: str) -> HearthError:
    """The error a companion reported, as the `HearthError` the command line reports."""
    try:
        known = ErrorCode(code)
    except ValueError:
        known = ErrorCode.INTERNAL
    return HearthError(known, message)


def socket_owner(raw: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket (`SO_PEERCRED`)."""
    pid_uid_gid = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", pid_uid_gid)[1]
    return uid
