"""One companion per home: the lock a resident companion holds exclusively, and the one
`hearth` commands working in-process share.

The lock file (`companion.lock`, mode 0600) is never followed elsewhere, and says which
process holds it: the holder writes its pid into it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from hearth.protocol.wire.errors import ErrorCode, HearthError

LOCK_NAME = "companion.lock"


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
