"""Membership on disk: the signed roster (`roster.signed`, kept exactly as signed),
the pinned founder, and the founder's roster changes."""

from __future__ import annotations

import time
from pathlib import Path

import msgpack

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import Signed
from hearth.protocol.wire.roster import Member, Role, Roster, open_roster, sign_roster

from .keys import SwarmKeys, create_identity, load_identity, read_secret, write_secret

ROSTER_FILE = "roster.signed"
FOUNDER_FILE = "founder"
ROSTER_TTL = 30 * 24 * 3600.0
FOUNDER_ROLES = frozenset({Role.HOME, Role.PLANNER, Role.RELAY})


def save_roster(home: Path, signed: Signed, founder: str) -> None:
    """Store a signed roster and pin its founder."""
    write_secret(home / ROSTER_FILE, msgpack.packb(signed.model_dump(), use_bin_type=True))
    write_secret(home / FOUNDER_FILE, founder.encode() + b"\n")


def load_roster(home: Path) -> tuple[Roster, Signed]:
    """The stored roster, verified against the pinned founder."""
    path = home / ROSTER_FILE
    if not path.exists():
        raise HearthError(ErrorCode.INVALID_INPUT, f"no roster in {home}: init or pair first")
    founder = read_secret(home / FOUNDER_FILE).decode().strip()
    signed = Signed.model_validate(msgpack.unpackb(read_secret(path), raw=False))
    return open_roster(signed, founder), signed


def found_swarm(
    home: Path, name: str, roles: frozenset[Role] = FOUNDER_ROLES, now: float | None = None
) -> Roster:
    """A new identity, swarm key and roster version 1 signed by this node, its founder."""
    now = time.time() if now is None else now
    key = create_identity(home)
    SwarmKeys.new().save(home)
    founder = peer_id_of(key)
    roster = Roster(
        version=1,
        founder=founder,
        issued_at=now,
        not_after=now + ROSTER_TTL,
        members=(Member(peer_id=founder, name=name, roles=roles),),
    )
    save_roster(home, sign_roster(roster, key), founder)
    return roster


class RosterHolder:
    """The roster in force for one home: what the gate and role checks consult.

    `update` takes a newer signed roster (verified against the pinned founder) and
    stores it; an older or forged one is refused with `refused`.
    """

    def __init__(self, home: Path) -> None:
        self.home = home
        self.roster, self.signed = load_roster(home)

    def admits(self, peer_id: str) -> bool:
        return self.roster.admits(peer_id, time.time())

    def roles_of(self, peer_id: str) -> frozenset[Role]:
        return self.roster.roles_of(peer_id, time.time())

    def update(self, signed: Signed) -> Roster:
        roster = open_roster(signed, self.roster.founder, newer_than=self.roster.version)
        save_roster(self.home, signed, self.roster.founder)
        self.roster, self.signed = roster, signed
        return roster

    def add(self, member: Member) -> Roster:
        """Founder only: sign and store the next version with `member` in it."""
        return self._sign_next(self.roster.with_member(member, now=time.time(), ttl=ROSTER_TTL))

    def remove(self, peer_id: str) -> Roster:
        """Founder only: sign and store the next version without `peer_id`."""
        return self._sign_next(self.roster.without(peer_id, now=time.time(), ttl=ROSTER_TTL))

    def set_roles(self, peer_id: str, roles: frozenset[Role]) -> Roster:
        """Founder only: sign and store the next version with `peer_id`'s roles changed."""
        member = self.roster.member(peer_id)
        if member is None:
            raise HearthError(ErrorCode.INVALID_INPUT, f"{peer_id} is not on the roster")
        return self.add(member.model_copy(update={"roles": roles}))

    def renew_if_due(self, now: float) -> Roster | None:
        """Founder only: re-sign the roster (same members) once a third of its life is
        left, so that no member ever holds an expired one; None when not yet due."""
        if self.roster.not_after - now > ROSTER_TTL / 3:
            return None
        return self._sign_next(self.roster.renewed(now=now, ttl=ROSTER_TTL))

    def _sign_next(self, roster: Roster) -> Roster:
        signed = sign_roster(roster, load_identity(self.home))
        save_roster(self.home, signed, roster.founder)
        self.roster, self.signed = roster, signed
        return roster
