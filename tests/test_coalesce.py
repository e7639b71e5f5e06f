"""Writes held and sent together (`HeldWrites`), over real socket pairs."""

from __future__ import annotations

import pytest
import trio
from libp2p.connection_types import ConnectionType
from libp2p.io.trio import TrioTCPStream
from libp2p.network.connection.raw_connection import RawConnection
from trio.testing import wait_all_tasks_blocked

from hearth.protocol.transport.coalesce import HeldWrites
from hearth.protocol.transport.pnet import StampedConn

pytestmark = pytest.mark.timeout(60)


def socket_pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    left, right = trio.socket.socketpair()
    return trio.SocketStream(left), trio.SocketStream(right)


class CountedSends:
    """A socket stream's `send_all`, counting the writes made on it."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.count = 0

    async def __call__(self, data: bytes) -> None:
        self.count += 1
        await self.stream.send_all(data)


async def read_all(stream: trio.SocketStream, size: int) -> bytes:
    got = b""
    while len(got) < size:
        got += await stream.receive_some()
    return got


def test_writes_from_two_tasks_back_to_back_leave_in_one_send() -> None:
    """Two tasks write while the process still has work to run: nothing is sent until
    every task waits, then all of it in one write, in the order written."""

    async def main() -> None:
        near, far = socket_pair()
        sends = CountedSends(near)
        held = HeldWrites(sends)
        async with trio.open_nursery() as nursery:

            async def second() -> None:
                await held.write(b"-second")

            await held.write(b"first")
            nursery.start_soon(second)
            await trio.lowlevel.checkpoint()  # the other task runs: still nothing sent
            assert sends.count == 0
        assert await read_all(far, 12) == b"first-second"
        assert sends.count == 1

    trio.run(main)


def test_a_process_that_never_waits_still_sends_what_it_holds() -> None:
    """A task that keeps running (never all tasks blocked) does not keep a held write
    back for good: it leaves after `HOLD_S`."""

    async def main() -> None:
        near, far = socket_pair()
        held = HeldWrites(near.send_all)
        arrived = trio.Event()

        async def receive() -> None:
            assert await far.receive_some() == b"ping"
            arrived.set()

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(receive)
                await held.write(b"ping")
                while not arrived.is_set():  # busy: always runnable
                    await trio.lowlevel.checkpoint()

    trio.run(main)


def test_a_failed_send_fails_the_next_write() -> None:
    """What the background send met (here a closed stream) is raised to the writer."""

    async def main() -> None:
        near, _far = socket_pair()
        held = HeldWrites(near.send_all)
        await near.aclose()
        await held.write(b"lost")
        await wait_all_tasks_blocked()  # the send is woken with this task
        await wait_all_tasks_blocked()  # and has failed by the next time all wait
        with pytest.raises(trio.ClosedResourceError):
            await held.write(b"again")
        with pytest.raises(trio.ClosedResourceError):
            await held.flush()

    trio.run(main)


def stamped(stream: trio.SocketStream) -> StampedConn:
    raw = RawConnection(TrioTCPStream(stream), True, ConnectionType.RELAYED)
    return StampedConn(raw)


def test_a_relayed_connection_sends_what_it_holds_before_closing() -> None:
    """Closing a connection through a relay sends what was written first (a stream's
    close, a GoAway), then closes."""

    async def main() -> None:
        near, far = socket_pair()
        conn = stamped(near)
        await conn.write(b"bye")
        await conn.close()
        assert await far.receive_some() == b"bye"
        assert await far.receive_some() == b""

    trio.run(main)


def test_a_relayed_connection_closed_while_cancelled_is_still_closed() -> None:
    """A host shutting down closes its connections inside a cancelled scope: the held
    write is dropped (as an unsent one would be), the socket is closed all the same."""

    async def main() -> None:
        near, far = socket_pair()
        conn = stamped(near)
        await conn.write(b"unsent")
        with trio.CancelScope() as scope:
            scope.cancel()
            await conn.close()
        assert await far.receive_some() == b""

    trio.run(main)
