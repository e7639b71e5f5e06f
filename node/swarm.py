"""The node's side of membership: roster sync, founder changes, revocation.

Any member answers a `RosterPull` with the roster and swarm key it holds. Pushes
(roster and key) are taken only from the founder. The founder's changes (grant,
deny, revoke) sign a new roster version and push it to every connected member;
a revocation also rotates the swarm key (the previous one stays accepted for the
grace window so offline members can catch up), refuses the revoked peer at the gate
at once (it is no longer on the roster) and closes its open connections.
"""

from __future__ import annotations

import logging
import secrets
import time
from pathlib import Path

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.transport.host import HearthHost
from hearth.protocol.transport.keys import SwarmKeys
from hearth.protocol.transport.membership import RosterHolder
from hearth.protocol.transport.rostersync import ROSTER_PROTOCOL, adopt, pull, send_state
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import RosterPull, RosterUpdate, SwarmKeyRotation
from hearth.protocol.wire.roster import Role

from .control import RevokeReply, RoleReply

log = logging.getLogger("hearth.swarm")
CATCH_UP_MAX_WAIT_S = 30.0
RENEW_CHECK_S = 3600.0


class Swarm:
    """Membership state of one node, and the roster protocol."""

    def __init__(
        self,
        home: Path,
        key: Ed25519PrivateKey,
        host: HearthHost,
        roster: RosterHolder,
        keys: SwarmKeys,
        grace_s: float,
    ) -> None:
        self.home = home
        self.peer_id = peer_id_of(key)
        self.host = host
        self.roster = roster
        self.keys = keys
        self.grace_s = grace_s
        self._changed = anyio.Event()
        host.handle(ROSTER_PROTOCOL, self.serve)

    def changed(self) -> None:
        """The roster changed outside this class (a pairing): push it soon."""
        self._changed.set()

    async def push_changes(self) -> None:
        while True:
            await self._changed.wait()
            self._changed = anyio.Event()
            await self.push()

    @property
    def founder(self) -> bool:
        return self.roster.roster.founder == self.peer_id

    async def serve(self, stream: FrameStream) -> None:
        first = await stream.receive()
        if isinstance(first, RosterPull):
            await send_state(stream, self.roster, self.keys)
            return
        if not isinstance(first, RosterUpdate):
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "expected roster_pull or roster")
        if stream.peer_id != self.roster.roster.founder:
            raise HearthError(ErrorCode.REFUSED, "only the founder pushes rosters and keys")
        rotation = await stream.receive()
        adopt(
            self.home,
            self.roster,
            self.keys,
            first,
            rotation if isinstance(rotation, SwarmKeyRotation) else None,
        )

    async def catch_up(self) -> None:
        """A member's start: pull from the founder, retrying (with backoff) until it
        answers; the connection it leaves open lets the founder reach this node."""
        if self.founder:
            return
        founder = self.roster.roster.founder
        wait = 1.0
        while True:
            try:
                stream = await self.host.open(
                    founder, ROSTER_PROTOCOL, AddressBook(self.home).get(founder)
                )
                await pull(stream, self.home, self.roster, self.keys)
                return
            except HearthError as exc:
                log.warning("could not pull the roster from the founder: %s", exc.message)
            await anyio.sleep(wait)
            wait = min(wait * 2, CATCH_UP_MAX_WAIT_S)

    async def renew(self) -> None:
        """The founder's re-signing: a fresh `not_after` well before the old one passes."""
        while True:
            if self.founder and self.roster.renew_if_due(time.time()) is not None:
                log.info("roster re-signed as version %d", self.roster.roster.version)
                await self.push()
            await anyio.sleep(RENEW_CHECK_S)

    def _founder_only(self) -> None:
        if not self.founder:
            raise HearthError(ErrorCode.INVALID_INPUT, "only the founder changes the roster")

    async def set_role(self, peer_id: str, role: Role, granted: bool) -> RoleReply:
        self._founder_only()
        member = self.roster.roster.member(peer_id)
        if member is None:
            raise HearthError(ErrorCode.INVALID_INPUT, f"{peer_id} is not on the roster")
        roles = member.roles | {role} if granted else member.roles - {role}
        roster = self.roster.set_roles(peer_id, frozenset(roles))
        pushed = await self.push()
        return RoleReply(
            version=roster.version, peer_id=peer_id, roles=sorted(roles), pushed_to=pushed
        )

    async def revoke(self, peer_id: str) -> RevokeReply:
        self._founder_only()
        if peer_id == self.peer_id:
            raise HearthError(ErrorCode.INVALID_INPUT, "the founder cannot revoke itself")
        started = time.monotonic()
        roster = self.roster.remove(peer_id)  # the gate refuses it from here on
        await self.host.disconnect(peer_id)
        self.keys.rotate(
            secrets.token_bytes(32),
            now=time.time(),
            grace=self.grace_s,
            key_id=self.keys.key_id + 1,
        )
        self.keys.save(self.home)
        pushed = await self.push()
        log.info("revoked %s; roster v%d, swarm key %d", peer_id, roster.version, self.keys.key_id)
        return RevokeReply(
            version=roster.version,
            revoked=peer_id,
            key_id=self.keys.key_id,
            previous_key_valid_until=self.keys.previous_valid_until,
            cut_off_ms=round((time.monotonic() - started) * 1000, 1),
            pushed_to=pushed,
        )

    async def push(self) -> list[str]:
        """Send the roster and key to every connected member; returns who got them."""
        reached = []
        for member in self.roster.roster.members:
            if member.peer_id == self.peer_id or not self.host.connected(member.peer_id):
                continue
            try:
                with anyio.fail_after(5):
                    stream = await self.host.open(member.peer_id, ROSTER_PROTOCOL)
                    await send_state(stream, self.roster, self.keys)
                    await stream.close()
                reached.append(member.peer_id)
            except (HearthError, TimeoutError) as exc:
                log.warning("roster push to %s failed: %s", member.peer_id, exc)
        return reached
