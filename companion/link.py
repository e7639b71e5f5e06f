"""The phone's link to its home node: the libp2p host and the kept connection.

`connect` dials the address book's addresses, then today's mDNS answers (hints),
and catches up on the roster and swarm key. A resident companion runs `keep`:
connect, watch the connection with keepalive, re-sync on every (re)connect and on
a period, and after a loss reconnect with a backoff capped at `MAX_BACKOFF_S`
(through a relay friend: over the connection to the relay kept from the last link,
or dialled ahead while the home was reached directly; one gone silent is dialled
afresh). The node pushes roster and key changes to
connected members on `/hearth/roster/1`; the link adopts them as they come (only
from the founder), so a resident phone never misses a rotation.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import anyio

from hearth.protocol.kit.home import storage_problem
from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.transport.circuits import is_circuit, relay_of
from hearth.protocol.transport.discovery import browse
from hearth.protocol.transport.health import ask_health
from hearth.protocol.transport.host import HearthHost, host_for_home, quiet_libp2p
from hearth.protocol.transport.keepalive import watch
from hearth.protocol.transport.rostersync import ROSTER_PROTOCOL, adopt, pull
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.transport.taskgroups import leaves, single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError, reason_about
from hearth.protocol.wire.messages import MemberAddrs, ModelInfo, RosterUpdate, SwarmKeyRotation
from hearth.protocol.wire.roster import Role, Roster

from .audit import AuditLog, AuditRecord

T = TypeVar("T")
log = logging.getLogger("hearth.link")


async def surviving_storage(work: Callable[[], Awaitable[T]], failed: T) -> T:
    """`work()`, or `failed` (logged) when the home cannot be written (a full disk): by
    `work` itself or by the tasks of a task group in it (an exception group of such)."""
    try:
        return await work()
    except (OSError, sqlite3.Error, BaseExceptionGroup) as exc:
        found = list(leaves(exc)) if isinstance(exc, BaseExceptionGroup) else [exc]
        problems = [storage_problem(e) for e in found]
        if not found or None in problems:
            raise
        log.warning("%s", "; ".join(sorted({p.message for p in problems if p is not None})))
        return failed


CONNECT_TIMEOUT_S = 3.0
KEEPALIVE_BOUND_S = 3.0
MDNS_WAIT_S = 1.0  # answers on a LAN take ~0.1-0.3 s; the fallback should not wait longer
FIRST_BACKOFF_S = 0.25
MAX_BACKOFF_S = 5.0
RESYNC_S = 60.0  # a pull now and then, in case a push was lost


class NodeLink:
    """The host of one phone home and its connection to the home node (the founder)."""

    def __init__(self, home: Path, audit: AuditLog) -> None:
        quiet_libp2p()
        self.home = home
        self.audit = audit
        self.host: HearthHost
        self.host, self.roster, self.keys, _ = host_for_home(home)
        self.node = self.roster.roster.founder
        self.reachable = False
        self.reason = "not dialled yet"
        self.dialled = False  # at least once: `reachable` and `reason` mean something
        self.latency_ms: float | None = None
        self.error: HearthError | None = None  # what the last failed dial raised
        self.syncs = 0  # roster/key syncs done (pulls and pushes)
        self.model: ModelInfo | None = None  # the home's model, as its last health answer said
        self._up = anyio.Event()
        self._dialling = anyio.Lock()
        self.on_up: Callable[[], Coroutine[Any, Any, None]] | None = None  # on each (re)connect

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, home: Path, audit: AuditLog) -> AsyncIterator[NodeLink]:
        """The link with its host running (nothing dialled yet)."""
        link = cls(home, audit)
        link.host.handle(ROSTER_PROTOCOL, link._pushed, allow=lambda peer: peer == link.node)
        async with link.host.run([]):
            yield link

    @property
    def connected(self) -> bool:
        return self.reachable and self.host.connected(self.node)

    async def wait_up(self) -> None:
        """Return once the link is up (at once if it is)."""
        while not self.connected:
            await self._up.wait()

    async def ensure(self) -> bool:
        """Up, dialling now if it is not (one dial at a time); if not, `reason` says why
        and `error` is what the dial raised."""
        async with self._dialling:
            if self.connected:
                return True
            self.dialled = True
            try:
                await self._connect()
            except HearthError as exc:
                self._down(reason_about(self.node, exc))
                self.error = exc
                return False
            self.error = None
            return True

    async def keep(self) -> None:
        """Keep the link up until cancelled: keepalive, periodic re-sync, reconnect. A home
        that cannot be written meanwhile (a full disk) fails that round's work, which is
        logged and tried again, never the companion."""
        backoff = FIRST_BACKOFF_S
        while True:
            if await surviving_storage(self.ensure, False):
                backoff = FIRST_BACKOFF_S
                async with anyio.create_task_group() as tg:
                    tg.start_soon(surviving_storage, self._resync_periodically, None)
                    if self.on_up is not None:  # ended with the connection, as the rest
                        tg.start_soon(surviving_storage, self.on_up, None)
                    quiet = await watch(self.host, self.node, KEEPALIVE_BOUND_S)
                    tg.cancel_scope.cancel()
                self._down(f"the home node went silent ({quiet:.1f} s without a byte)")
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    def _down(self, reason: str) -> None:
        self.reachable, self.reason, self.latency_ms = False, reason, None
        if self._up.is_set():  # a fresh event only once it fired: `wait_up` waits on it
            self._up = anyio.Event()

    async def _connect(self) -> None:
        t0 = time.monotonic()
        await self._dial()
        self.latency_ms = round((time.monotonic() - t0) * 1000, 1)
        await self.sync()
        self.reachable, self.reason = True, ""
        self._up.set()

    async def _dial(self) -> None:
        """The address book first; if that fails, mDNS answers with today's tag are hints."""
        book = AddressBook(self.home)
        try:
            await self.host.connect(self.node, book.get(self.node), CONNECT_TIMEOUT_S)
            if self.node in self.host.worked:  # last-known-good first, next time
                book.remember(self.node, [self.host.worked[self.node]])
            return
        except HearthError as exc:
            if exc.code is ErrorCode.REFUSED or os.environ.get("HEARTH_NO_MDNS"):
                raise
            failed = exc
        accepted = self.keys.accepted(time.time())
        hints = await anyio.to_thread.run_sync(browse, accepted, MDNS_WAIT_S)
        addrs = [f"/ip4/{ip}/tcp/{port}/p2p/{self.node}" for ip, port in hints]
        if not addrs:
            raise HearthError(failed.code, f"{failed.message}; no answer on mDNS either")
        await self.host.connect(self.node, addrs, CONNECT_TIMEOUT_S)
        book.remember(self.node, addrs)

    async def sync(self) -> None:
        """Catch up on the roster and swarm key, and learn the node's addresses (its
        circuits through relays included, for when no direct path works) and its
        planners' (to dial a friend's node while the home is down)."""

        async def roster_sync() -> None:
            try:
                with anyio.fail_after(CONNECT_TIMEOUT_S):
                    stream = await self.host.open(self.node, ROSTER_PROTOCOL)
                    await pull(stream, self.home, self.roster, self.keys)
                self.syncs += 1
            except (HearthError, TimeoutError) as exc:  # planning still works on what we hold
                self._audit_sync(str(exc) or "timed out", "error")
                if isinstance(exc, HearthError) and exc.code is ErrorCode.REFUSED:
                    raise  # the home's gate closed the connection the dial made: not up

        members: list[MemberAddrs] = []

        async def addresses() -> None:
            with contextlib.suppress(HearthError):
                health = await ask_health(self.host, self.node, timeout=CONNECT_TIMEOUT_S)
                self.model = health.model
                AddressBook(self.home).add(self.node, health.addrs)
                members.extend(health.members)
                await self._warm_relay(health.addrs)

        with single_error():  # a refusal, as itself
            async with anyio.create_task_group() as tg:
                tg.start_soon(roster_sync)
                tg.start_soon(addresses)
        learn_members(AddressBook(self.home), self.roster.roster, members, now=time.time())

    async def _warm_relay(self, addrs: list[str]) -> None:
        """While the home is reached directly, hold a connection to the relay of its
        first circuit: when the direct path goes, the relayed connect then skips the
        dial to the relay (as after a relayed link, whose relay connection is kept)."""
        circuits = [a for a in addrs if is_circuit(a)]
        via = self.host.worked.get(self.node)
        if not circuits or via is None or is_circuit(via):
            return
        relay, relay_addr = relay_of(circuits[0])
        if not self.host.connected(relay):
            with contextlib.suppress(HearthError):  # a relay away now: dialled when needed
                await self.host.connect(relay, [relay_addr], CONNECT_TIMEOUT_S)

    async def _resync_periodically(self) -> None:
        while True:
            await anyio.sleep(RESYNC_S)
            await self.sync()

    async def _pushed(self, stream: FrameStream) -> None:
        """The founder's push after a roster change: the roster, then the swarm key."""
        update = await stream.receive()
        rotation = await stream.receive()
        if not isinstance(update, RosterUpdate) or not isinstance(rotation, SwarmKeyRotation):
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "expected a roster and the swarm key")
        adopt(self.home, self.roster, self.keys, update, rotation)  # a forged one: refused
        self.syncs += 1

    def _audit_sync(self, reason: str, outcome: str) -> None:
        self.audit.append(AuditRecord("-", self.node, "-", "", "roster-sync", reason, outcome))


def learn_members(
    book: AddressBook, roster: Roster, members: list[MemberAddrs], *, now: float
) -> None:
    """Keep the home's list of where its planners are: only for members of the phone's
    own roster holding `planner` (never the home itself), only addresses that name the
    member, at most the book's 16 per peer."""
    for member in members:
        peer = member.peer_id
        if peer == roster.founder or Role.PLANNER not in roster.roles_of(peer, now):
            continue
        addrs = [a for a in member.addrs if a.endswith(f"/p2p/{peer}")]
        if addrs:
            book.remember(peer, addrs)
