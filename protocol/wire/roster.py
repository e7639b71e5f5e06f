"""The swarm roster: who is a member, with which roles, signed by the founder.

A roster travels as `Signed` bytes. `open_roster` verifies the founder's signature
before it decodes, and refuses a roster older than the one held. No role is
granted from an expired roster (`not_after`) or to an expired member.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import Field, ValidationError

from .errors import ErrorCode, HearthError
from .identity import peer_id_of, sign, verify
from .messages import Id, Model, Signed

ROSTER_KIND = "roster"


class Role(StrEnum):
    """What a member may do in the swarm."""

    PHONE = "phone"
    HOME = "home"
    RELAY = "relay"
    SEARCH_RELAY = "search-relay"
    SEARCH_EXIT = "search-exit"
    PLANNER = "planner"


class Member(Model):
    """One member: peer id, display name, roles and an optional expiry (unix time)."""

    peer_id: Id
    name: Annotated[str, Field(max_length=64)] = ""
    roles: frozenset[Role] = frozenset()
    expires: float | None = None

    def active(self, now: float) -> bool:
        return self.expires is None or now < self.expires


class Roster(Model):
    """A version of the membership list."""

    version: Annotated[int, Field(ge=1)]
    founder: Id
    issued_at: float
    not_after: float
    members: tuple[Member, ...] = ()

    def member(self, peer_id: str) -> Member | None:
        return next((m for m in self.members if m.peer_id == peer_id), None)

    def expired(self, now: float) -> bool:
        return now >= self.not_after

    def roles_of(self, peer_id: str, now: float) -> frozenset[Role]:
        """The roles `peer_id` holds now: none from an expired roster or membership."""
        member = self.member(peer_id)
        if member is None or self.expired(now) or not member.active(now):
            return frozenset()
        return member.roles

    def admits(self, peer_id: str, now: float) -> bool:
        """Whether the connection gate lets `peer_id` in (listed and not expired).

        An expired roster still admits its members, so that they can fetch the
        re-signed one; it grants them no roles.
        """
        member = self.member(peer_id)
        return member is not None and member.active(now)

    def with_member(self, member: Member, *, now: float, ttl: float) -> Roster:
        """The next version, with `member` added or replaced."""
        others = tuple(m for m in self.members if m.peer_id != member.peer_id)
        return self._next((*others, member), now=now, ttl=ttl)

    def without(self, peer_id: str, *, now: float, ttl: float) -> Roster:
        """The next version, with `peer_id` removed."""
        if self.member(peer_id) is None:
            raise HearthError(ErrorCode.INVALID_INPUT, f"{peer_id} is not on the roster")
        return self._next(tuple(m for m in self.members if m.peer_id != peer_id), now=now, ttl=ttl)

    def renewed(self, *, now: float, ttl: float) -> Roster:
        """The next version, same members, with a fresh `not_after`."""
        return self._next(self.members, now=now, ttl=ttl)

    def _next(self, members: tuple[Member, ...], *, now: float, ttl: float) -> Roster:
        return Roster(
            version=self.version + 1,
            founder=self.founder,
            issued_at=now,
            not_after=now + ttl,
            members=members,
        )


def sign_roster(roster: Roster, founder_key: Ed25519PrivateKey) -> Signed:
    """Encode and sign a roster with the founder's key."""
    if peer_id_of(founder_key) != roster.founder:
        raise HearthError(ErrorCode.INVALID_INPUT, "only the founder signs the roster")
    payload: bytes = msgpack.packb(roster.model_dump(mode="json"), use_bin_type=True)
    return Signed(payload=payload, signature=sign(founder_key, ROSTER_KIND, payload))


def open_roster(signed: Signed, founder: str, *, newer_than: int = 0) -> Roster:
    """Verify (founder's signature) then decode; refuse a roster not newer than held.

    Raises `refused` for a bad signature, a foreign founder or a stale version, and
    `protocol_error` for a payload that does not decode.
    """
    verify(founder, ROSTER_KIND, signed.payload, signed.signature)
    try:
        roster = Roster.model_validate(msgpack.unpackb(signed.payload, raw=False))
    except (ValidationError, ValueError, msgpack.UnpackException) as exc:
        raise HearthError(ErrorCode.PROTOCOL_ERROR, "signed roster does not decode") from exc
    if roster.founder != founder:
        raise HearthError(ErrorCode.REFUSED, "roster names another founder")
    if roster.version <= newer_than:
        raise HearthError(
            ErrorCode.REFUSED, f"stale roster version {roster.version} (have {newer_than})"
        )
    return roster
