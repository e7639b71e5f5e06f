"""Small writes issued back to back on one connection, sent as one write.

Inside a relay circuit every write is a chunk of its own: a Yamux frame, a Noise
message and a socket write on each leg, and a read and a write on the relay. A
connect writes several small ones in a row that nothing waits for in between (the
phone: Noise's last handshake message, the muxer proposal, a stream's opening and
its request; the home: its multistream answer and Noise's second message, a
stream's answer, its first frame and its close), each from wherever py-libp2p
happens to write it. (A direct pnet link writes as it goes: held, its last Noise
message waited for the muxer's, and a direct connect took longer.)

`HeldWrites` keeps what is written and sends it all once every task of the process
is blocked (waiting for the network, typically for the answer to what was written),
or `HOLD_S` after the first held write if the process never goes idle: a writer
that goes on to write more, in the same task or another, adds to the same write.
Idle is trio's own test of it (`wait_all_tasks_blocked`: no task runnable, no I/O
ready), public in `trio.testing`.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Awaitable, Callable

import trio
from trio.testing import wait_all_tasks_blocked

HOLD_S = 0.005  # the longest a write is held while the process still has work to run
FLUSH_AT = 64 * 1024  # held bytes written at once, by the writer itself
_HOLDING: weakref.WeakSet[HeldWrites] = weakref.WeakSet()  # with a send to come


async def send_held() -> None:
    """Send what every connection of this process holds now (a host stopping: its
    send tasks would go with the process). Inner connections first fill the relay
    links they run in, so this goes on until nothing is held."""
    while _HOLDING:
        for held in list(_HOLDING):
            with contextlib.suppress(Exception):
                await held.flush()


class HeldWrites:
    """A connection's writes, held until its process is idle and then sent as one.

    A write returns at once; the send is a short task of its own (trio's system
    nursery: the connection has none), one per burst, ending with its send. A
    failed send fails the next write (and the flush), as a socket's error would.
    Order is kept: one send at a time, each taking everything held when it starts."""

    def __init__(self, write: Callable[[bytes], Awaitable[None]]) -> None:
        self._write = write
        self._held: list[bytes] = []
        self._size = 0
        self._scheduled = False
        self._sending = trio.Lock()
        self._error: Exception | None = None

    async def write(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        if not data:
            return
        self._held.append(data)
        self._size += len(data)
        _HOLDING.add(self)
        if self._size >= FLUSH_AT:
            await self.flush()
        elif not self._scheduled:
            self._scheduled = True
            trio.lowlevel.spawn_system_task(self._flush_when_idle, name="HeldWrites.flush")

    async def _flush_when_idle(self) -> None:
        with trio.move_on_after(HOLD_S):
            await wait_all_tasks_blocked()
        self._scheduled = False
        with contextlib.suppress(Exception):  # kept for the next write: nobody waits here
            await self.flush()

    async def flush(self) -> None:
        """Send what is held now (and wait for it)."""
        async with self._sending:
            _HOLDING.discard(self)
            if self._error is not None:
                raise self._error
            if not self._held:
                return
            data = b"".join(self._held)
            self._held.clear()
            self._size = 0
            try:
                await self._write(data)
            except Exception as exc:
                self._error = exc
                raise
