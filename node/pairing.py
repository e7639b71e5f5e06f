"""Pairing: one-time invites, and the short-lived listener that redeems them.

An invite's token never leaves the node except in the URI the owner is shown; the
node keeps its hash, the role and grants, and the private-network key derived from
it. The pairing listener runs only while an invite is live, keyed by the live
invites' keys, and serves `/hearth/pair/1` alone: a wrong token fails at the
private-network handshake (`refused`), a used or expired one finds no listener or
no key (`unreachable`/`refused`), and failed handshakes are rate-limited per
source address: a throttled address gets less time to send its handshake, but what
it sends is still tried with every live invite's key, so a correct token always
gets in. Failed-handshake memory expires and is bounded (`KeyRing`).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hearth.protocol.transport.host import HearthHost
from hearth.protocol.transport.keys import SwarmKeys, pairing_key
from hearth.protocol.transport.membership import RosterHolder
from hearth.protocol.transport.pairing import PAIR_PROTOCOL
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.invite import TOKEN_SIZE, Invite, token_hash
from hearth.protocol.wire.messages import PairRequest, PairResult
from hearth.protocol.wire.roster import Member, Role

from .status import HandshakeStats

log = logging.getLogger("hearth.pairing")
CONNECTION_LIMIT_S = 30.0
FAILED_HANDSHAKES_PER_MINUTE = 5
MAX_LIVE_INVITES = 32  # each live invite is one more key every handshake is tried with
FRIEND_DEFAULT_GRANTS = frozenset({Role.RELAY})


@dataclass(frozen=True)
class PendingInvite:
    """What the node remembers of an invite: never the token itself."""

    token_hash: str
    pnet_key: bytes
    roles: frozenset[Role]
    expires: float


def parse_roles(text: str) -> frozenset[Role]:
    """`relay,search-exit` → roles; `invalid_input` for an unknown one."""
    try:
        return frozenset(Role(r.strip()) for r in text.split(",") if r.strip())
    except ValueError as exc:
        known = ", ".join(r.value for r in Role)
        raise HearthError(
            ErrorCode.INVALID_INPUT, f"unknown role in {text!r}; known: {known}"
        ) from exc


def invite_roles(kind: str, grants: frozenset[Role] | None) -> frozenset[Role]:
    if kind == "phone":
        return frozenset({Role.PHONE})
    if kind == "friend":
        roles = grants or FRIEND_DEFAULT_GRANTS
        if Role.PHONE in roles or Role.HOME in roles:
            raise HearthError(ErrorCode.INVALID_INPUT, "a friend's node gets no phone or home role")
        return roles
    raise HearthError(ErrorCode.INVALID_INPUT, f"--role is phone or friend, not {kind!r}")


class Pairing:
    """Live invites and the pairing listener (started and stopped as they come and go)."""

    def __init__(
        self,
        key: Ed25519PrivateKey,
        roster: RosterHolder,
        swarm_keys: SwarmKeys,
        main_addrs: Callable[[], list[str]],
        listen: str,
        on_paired: Callable[[Member], None] = lambda _: None,
    ) -> None:
        self.key = key
        self.peer_id = peer_id_of(key)
        self.roster = roster
        self.swarm_keys = swarm_keys
        self.main_addrs = main_addrs
        self.listen = listen
        self.on_paired = on_paired
        self.invites: dict[str, PendingInvite] = {}
        self.addrs: list[str] = []
        self.listen_error: str | None = None
        self._redeeming = 0
        self._changed = anyio.Event()
        self._host: HearthHost | None = None
        self._past = HandshakeStats()  # of listeners that have stopped

    def handshakes(self) -> HandshakeStats:
        """Failed and throttled handshakes on the pairing listener, since start."""
        ring = self._host.keyring if self._host is not None else None
        if ring is None:
            return self._past
        return HandshakeStats(
            failed=self._past.failed + ring.failed,
            throttled=self._past.throttled + ring.throttled_total,
            remembered=ring.remembered(),
        )

    def live(self, now: float) -> list[PendingInvite]:
        for h in [h for h, inv in self.invites.items() if inv.expires <= now]:
            del self.invites[h]
        return list(self.invites.values())

    async def create(self, kind: str, grants: frozenset[Role] | None, ttl: float) -> Invite:
        """A new invite; the pairing listener is up when this returns."""
        if not 1 <= ttl <= 7 * 24 * 3600:
            raise HearthError(ErrorCode.INVALID_INPUT, "--ttl must be between 1s and 7d")
        roles = invite_roles(kind, grants)
        if len(self.live(time.time())) >= MAX_LIVE_INVITES:
            raise HearthError(
                ErrorCode.BUSY, f"{MAX_LIVE_INVITES} invites are live already", retry_after=60
            )
        token = secrets.token_bytes(TOKEN_SIZE)
        expires = time.time() + ttl
        pending = PendingInvite(token_hash(token), pairing_key(token), roles, expires)
        self.invites[pending.token_hash] = pending
        self._changed.set()
        with anyio.move_on_after(10):
            while not self.addrs and self.listen_error is None:
                await anyio.sleep(0.02)
        if not self.addrs:
            del self.invites[pending.token_hash]
            raise HearthError(
                ErrorCode.INTERNAL, f"the pairing listener did not start: {self.listen_error}"
            )
        return Invite(node=self.peer_id, addrs=tuple(self.addrs), token=token, expires=int(expires))

    async def run(self) -> None:
        """Keep the pairing listener up exactly while an invite is live."""
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            if self.live(time.time()):
                try:
                    self.listen_error = None
                    await self._listen_while_live()
                except Exception as exc:  # a bad --pair-listen must not stop the node
                    self.listen_error = str(exc) or type(exc).__name__
                    log.error("pairing listener on %s failed: %s", self.listen, exc)
                    self.addrs = []

    async def _listen_while_live(self) -> None:
        host = HearthHost(
            self.key,
            lambda: [i.pnet_key for i in self.live(time.time())],
            lambda _peer: True,
            max_handshake_failures=FAILED_HANDSHAKES_PER_MINUTE,
        )
        host.handle(PAIR_PROTOCOL, self._redeem, allow=lambda _peer: True)
        host.serve_only({PAIR_PROTOCOL})
        self._host = host
        try:
            async with host.run([self.listen]):
                self.addrs = host.addrs()
                log.info("pairing listener up (%d live invite(s))", len(self.invites))
                while self.live(time.time()) or self._redeeming:
                    with anyio.move_on_after(1.0):
                        await self._changed.wait()
                        self._changed = anyio.Event()
                self.addrs = []
        finally:
            self._past = self.handshakes().model_copy(update={"remembered": 0})
            self._host = None
        log.info("pairing listener down: no live invite")

    async def _redeem(self, stream: FrameStream) -> None:
        """Redeem one token; the connection ends when the redeemer closes it, or at 30 s."""
        self._redeeming += 1
        try:
            with anyio.move_on_after(CONNECTION_LIMIT_S):
                await self._answer(stream)
                await stream.read_some()  # until the redeemer hangs up (so the answer lands)
        finally:
            self._redeeming -= 1
            self._changed.set()
            if self._host is not None:
                await self._host.disconnect(stream.peer_id)

    async def _answer(self, stream: FrameStream) -> None:
        request = await stream.receive()
        if not isinstance(request, PairRequest):
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "expected a pair_request")
        pending = self.invites.pop(token_hash(request.token), None)
        if pending is None or pending.expires <= time.time():
            raise HearthError(ErrorCode.REFUSED, "invite expired or already used")
        member = Member(
            peer_id=stream.peer_id, name=request.name or request.device, roles=pending.roles
        )
        roster = self.roster.add(member)
        await stream.send(
            PairResult(
                member=stream.peer_id,
                roles=sorted(pending.roles),
                swarm_key=self.swarm_keys.current,
                roster=self.roster.signed,
                founder=roster.founder,
                node=self.peer_id,
                addrs=self.main_addrs(),
            )
        )
        log.info(
            "paired %s (%s) with roles %s",
            stream.peer_id,
            member.name,
            ",".join(sorted(pending.roles)),
        )
        self.on_paired(member)
