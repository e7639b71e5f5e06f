"""The libp2p private-network protector, as the pnet spec says (go-libp2p, js-libp2p).

Each side sends a random 24-byte nonce, then XSalsa20(key, nonce) of everything it
writes. py-libp2p 0.8.1's own protector uses Salsa20 with an 8-byte nonce and
cannot talk to other implementations; this one replaces it through the swarm's
`new_protected_conn` hook.

The first bytes multistream-select sends are always its header
`\\x13/multistream/1.0.0\\n`. A listener holding more than one key (during a
rotation's grace window) trial-decrypts those 20 bytes with each and keeps the one
that fits; with none, the connection is closed at once and the failure is a
`KeyMismatch`, so a wrong key is noticed in milliseconds instead of at the 10 s
upgrade timeout. A dialer checks the listener's header the same way.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import trio
from libp2p.abc import IRawConnection
from libp2p.io.exceptions import IOException
from libp2p.network.connection.exceptions import RawConnError
from libp2p.network.connection.raw_connection import RawConnection

from .coalesce import HeldWrites
from .xsalsa20 import NONCE_SIZE, XSalsa20

MULTISTREAM_HEADER = b"\x13/multistream/1.0.0\n"
FAILURE_WINDOW_S = 60.0
MAX_REMEMBERED = 1024  # addresses whose failed handshakes are kept (oldest dropped first)
THROTTLED_HANDSHAKE_S = 3.0  # how long a throttled address's nonce and header may take
READ_AHEAD = 64 * 1024  # the most one read of a connection takes from the socket


class KeyMismatch(RawConnError):
    """The peer does not hold a swarm key we accept (or closed on ours)."""


class StampedConn(RawConnection):
    """A raw connection that records when bytes last arrived (for keepalive). Used as
    is for a connection through a circuit relay: that one already runs inside the
    relay link's private network, so it gets no second pnet layer, and its writes
    are held and sent together (`HeldWrites`): each would be a relayed chunk.

    Reads take whatever has arrived (up to `READ_AHEAD`) and serve later reads from
    it: py-libp2p reads a Noise message as its 2-byte length and then its body, and
    a multistream answer a byte at a time, each read a socket call (or a Yamux read)
    and a pass of the scheduler otherwise."""

    def __init__(self, conn: IRawConnection) -> None:
        self._conn = conn
        self.is_initiator = conn.is_initiator
        self.last_rx = time.monotonic()
        self._pending, self._at = b"", 0  # arrived; read up to `_at`
        self._held: HeldWrites | None = None  # made by the first write held

    async def write(self, data: bytes) -> None:
        if self._held is None:
            self._held = HeldWrites(self._conn.write)
        await self._held.write(data)

    async def read(self, n: int | None = None) -> bytes:
        if self._at >= len(self._pending):
            data = await self._conn.read(READ_AHEAD)
            if not data:
                return b""
            self.last_rx = time.monotonic()
            self._pending, self._at = self._decode(data), 0
        start = self._at
        self._at = len(self._pending) if n is None or n < 0 else min(start + n, len(self._pending))
        return self._pending[start : self._at]

    def _decode(self, data: bytes) -> bytes:
        """What the bytes read from the connection carry (as is: no pnet layer)."""
        return data

    async def close(self) -> None:
        try:
            if self._held is not None:
                with contextlib.suppress(Exception):  # what is held goes before the close
                    await self._held.flush()
        finally:  # closed even when cancelled (a host shutting down)
            await self._conn.close()

    def get_remote_address(self) -> tuple[str, int] | None:
        return self._conn.get_remote_address()

    def get_transport_addresses(self) -> Any:
        return self._conn.get_transport_addresses()

    def get_connection_type(self) -> Any:
        return self._conn.get_connection_type()


class PnetConn(StampedConn):
    """A raw connection encrypted with a swarm key; records when bytes last arrived.
    Its writes go out as they come: held, the last Noise message of a direct connect
    waited for the muxer's, and the connect took longer (bench/README, relay34b)."""

    def __init__(self, conn: IRawConnection, ring: KeyRing) -> None:
        super().__init__(conn)
        self._ring = ring
        self._remote = conn.get_remote_address()  # kept: a reset socket no longer says
        self._key: bytes | None = ring.keys()[0] if conn.is_initiator else None
        self._reader: XSalsa20 | None = None
        self._writer: XSalsa20 | None = None
        self._nonce = os.urandom(NONCE_SIZE)
        self._nonce_sent = False
        self._handshake = trio.Lock()

    async def write(self, data: bytes) -> None:
        if self._writer is None:
            if self._key is None:  # a listener answers with the key the dialer chose
                await self._identify()
            assert self._key is not None
            self._writer = XSalsa20(self._key, self._nonce)
        sealed = self._writer.process(data)
        if not self._nonce_sent:  # a dialer's nonce goes with its first bytes
            self._nonce_sent = True
            sealed = self._nonce + sealed
        try:
            await self._conn.write(sealed)
        except (RawConnError, IOException, OSError) as exc:
            if self._reader is None:  # the peer hung up before it ever answered in our key
                self._ring.record_mismatch(self._remote)
                raise KeyMismatch(
                    "connection closed during the private-network handshake "
                    "(swarm key mismatch suspected)"
                ) from exc
            raise

    async def _send_nonce(self) -> None:
        """Send our nonce first, before waiting for anything: the spec's peers (js,
        go) wait for the other side's nonce before they send their first data."""
        if not self._nonce_sent:
            self._nonce_sent = True
            try:
                await self._conn.write(self._nonce)
            except (RawConnError, IOException, OSError) as exc:
                self._ring.record_mismatch(self._remote)
                raise KeyMismatch(
                    "connection closed during the private-network handshake "
                    "(swarm key mismatch suspected)"
                ) from exc

    async def read(self, n: int | None = None) -> bytes:
        if self._reader is None:
            await self._identify()
        return await super().read(n)

    def _decode(self, data: bytes) -> bytes:
        assert self._reader is not None
        return self._reader.process(data)

    async def _identify(self) -> None:
        """Read the peer's nonce and first 20 bytes (and whatever came with them); pick
        the key they decrypt under."""
        async with self._handshake:
            if self._reader is not None:
                return
            throttled = not self.is_initiator and self._ring.throttled(self._remote)
            await self._send_nonce()
            try:
                with trio.fail_after(THROTTLED_HANDSHAKE_S if throttled else math.inf):
                    arrived = await self._read_at_least(NONCE_SIZE + len(MULTISTREAM_HEADER))
            except trio.TooSlowError:
                await self._conn.close()
                self._ring.record_mismatch(self._remote)
                raise KeyMismatch("a throttled address sent its handshake too slowly") from None
            nonce, sealed = arrived[:NONCE_SIZE], arrived[NONCE_SIZE:]
            candidates = [self._key] if self._key is not None else self._ring.keys()
            for key in candidates:
                assert key is not None
                reader = XSalsa20(key, nonce)
                plain = reader.process(sealed)
                if plain.startswith(MULTISTREAM_HEADER):
                    self._key, self._reader = key, reader
                    self._pending, self._at = plain, 0
                    return
            await self._conn.close()
            self._ring.record_mismatch(self._remote)
            raise KeyMismatch("private-network key mismatch: the peer uses another swarm key")

    async def _read_at_least(self, size: int) -> bytes:
        buf = b""
        while len(buf) < size:
            try:
                chunk = await self._conn.read(READ_AHEAD)
            except (RawConnError, IOException, OSError):
                chunk = b""
            if not chunk:
                self._ring.record_mismatch(self._remote)
                raise KeyMismatch(
                    "connection closed during the private-network handshake "
                    "(swarm key mismatch suspected)"
                )
            buf += chunk
        self.last_rx = time.monotonic()
        return buf


class KeyRing:
    """What the swarm's `psk` slot holds for a Hearth host: the keys accepted now,
    and when a handshake with each remote address last failed on the key (py-libp2p
    flattens the exception on its way up, so the dialer asks here).

    Failure memory is bounded: entries older than `window` are forgotten, and at most
    `max_remembered` addresses (and address:port pairs) are kept, the oldest dropped
    first. With `max_failures`, an address that failed that often within the window
    is throttled: its next handshakes get `THROTTLED_HANDSHAKE_S` to arrive, and are
    still tried with every live key, so a correct one always gets in."""

    def __init__(
        self,
        keys: Callable[[], list[bytes]],
        *,
        max_failures: int = 0,
        window: float = FAILURE_WINDOW_S,
        max_remembered: int = MAX_REMEMBERED,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.keys = keys
        self.max_failures = max_failures  # per source address and window; 0: no limit
        self.window = window
        self.max_remembered = max_remembered
        self.clock = clock
        self.mismatches: OrderedDict[tuple[str, int], float] = OrderedDict()
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self.failed = 0  # handshakes that failed on the key, ever
        self.throttled_total = 0  # handshakes from a throttled address

    def record_mismatch(self, remote: tuple[str, int] | None) -> None:
        self.failed += 1
        if remote is None:
            return
        now = self.clock()
        self._expire(now)
        _remember(self.mismatches, (str(remote[0]), int(remote[1])), now, self.max_remembered)
        if self.max_failures:
            failures = self._failures.pop(str(remote[0]), None) or deque(maxlen=self.max_failures)
            failures.append(now)
            _remember(self._failures, str(remote[0]), failures, self.max_remembered)

    def _expire(self, now: float) -> None:
        while self.mismatches and now - next(iter(self.mismatches.values())) > self.window:
            self.mismatches.popitem(last=False)
        while self._failures and now - next(iter(self._failures.values()))[-1] > self.window:
            self._failures.popitem(last=False)

    def remembered(self) -> int:
        """How many addresses' failures are held now."""
        self._expire(self.clock())
        return len(self.mismatches) + len(self._failures)

    def mismatch_since(self, host: str, port: int, since: float) -> bool:
        return self.mismatches.get((host, port), -1.0) >= since

    def throttled(self, remote: tuple[str, int] | None) -> bool:
        """Whether `remote`'s address failed the handshake too often lately."""
        if not self.max_failures or remote is None:
            return False
        failures = self._failures.get(str(remote[0]))
        throttled = (
            failures is not None
            and len(failures) >= self.max_failures
            and self.clock() - failures[0] < self.window
        )
        self.throttled_total += throttled
        return throttled


def _remember(store: OrderedDict[Any, Any], key: Any, value: Any, limit: int) -> None:
    """Put `key` last (newest) in `store`, dropping the oldest past `limit`."""
    store.pop(key, None)
    store[key] = value
    while len(store) > limit:
        store.popitem(last=False)


class _Protector:
    """py-libp2p's pnet hook, giving a `PnetConn` where the psk is a `KeyRing`."""

    def __init__(self, original: Callable[[Any, Any], Any]) -> None:
        self.original = original

    def __call__(self, conn: Any, psk: Any) -> Any:
        if _relayed(conn):  # inside a circuit: the relay's own link is already protected
            return StampedConn(conn)
        if isinstance(psk, KeyRing):
            return PnetConn(conn, psk)
        return self.original(conn, psk)


def install_protector() -> None:
    """Route py-libp2p's pnet hook to `PnetConn` for hosts whose psk is a `KeyRing`."""
    import libp2p.network.swarm as swarm_module

    # libp2p's swarm module imports its pnet hook without re-exporting it
    original = swarm_module.new_protected_conn  # type: ignore[attr-defined]
    if not isinstance(original, _Protector):
        swarm_module.new_protected_conn = _Protector(original)  # type: ignore[attr-defined]


def _relayed(conn: Any) -> bool:
    from libp2p.connection_types import ConnectionType

    kind = getattr(conn, "get_connection_type", None)
    return kind is not None and kind() is ConnectionType.RELAYED
