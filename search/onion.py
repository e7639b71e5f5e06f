"""This node's onion keys and the announcements of every search node it knows.

A node with a search role holds one X25519 key per epoch, in memory only (a restart
starts a new epoch, numbered by its start time, so no epoch ever has two keys from
an honest node), and the previous epoch's key for a grace period. Each key has its
own replay cache, dropped with the key; a tag is kept until its packet expires,
which may be at most `MAX_PACKET_TTL_S` ahead, and the cache is capped. Announcements
(key, epoch, expiry, the node's addresses) are signed by the node's identity,
domain-separated; a node seen with two keys for one epoch is dropped from search
paths and reported. Per node, only the newest `EPOCHS_KEPT` epochs are held.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

import msgpack
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from pydantic import Field, ValidationError

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of, sign, verify
from hearth.protocol.wire.messages import MAX_ANNOUNCEMENTS, Model, Signed, SignedAnnouncement
from hearth.protocol.wire.roster import Role, Roster

from .packets import Drop, Dropped, Peeled, peel, raw_public

log = logging.getLogger("hearth.search")
ONION_KIND = "onion-key"
EPOCH_S = 6 * 3600.0
GRACE_S = 600.0
CLOCK_SKEW_S = 300.0  # how far ahead of ours another node's clock may run
EPOCHS_KEPT = 2  # per node: the current epoch and the previous one
MAX_PACKET_TTL_S = 600  # a hop keeps a packet's replay tag until it expires, so no longer
MAX_REPLAY_TAGS = 100_000  # unexpired tags per epoch key (about 10 MB)
SEARCH_ROLES = frozenset({Role.SEARCH_RELAY, Role.SEARCH_EXIT})


class OnionAnnouncement(Model):
    """What a search node tells the swarm: its onion key for one epoch, and where it listens."""

    peer_id: str
    key: Annotated[bytes, Field(min_length=32, max_length=32)]
    epoch: int
    expires: float
    addrs: Annotated[list[str], Field(max_length=32)] = []


def announce(identity: Ed25519PrivateKey, announcement: OnionAnnouncement) -> SignedAnnouncement:
    payload = msgpack.packb(announcement.model_dump(), use_bin_type=True)
    return SignedAnnouncement(
        peer_id=peer_id_of(identity),
        signed=Signed(payload=payload, signature=sign(identity, ONION_KIND, payload)),
    )


def open_announcement(signed: SignedAnnouncement) -> OnionAnnouncement:
    """Verify (by the claimed node's key), then decode; `refused` if either fails."""
    verify(signed.peer_id, ONION_KIND, signed.signed.payload, signed.signed.signature)
    try:
        announcement = OnionAnnouncement.model_validate(msgpack.unpackb(signed.signed.payload))
    except (ValidationError, ValueError, msgpack.UnpackException) as exc:
        raise HearthError(
            ErrorCode.PROTOCOL_ERROR, "onion-key announcement does not decode"
        ) from exc
    if announcement.peer_id != signed.peer_id:
        raise HearthError(ErrorCode.REFUSED, "announcement signed for another node")
    return announcement


@dataclass
class Epoch:
    number: int
    key: X25519PrivateKey
    started: float
    seen: dict[bytes, int] = field(default_factory=dict)  # replay tag → packet expiry
    pruned: float = 0.0  # when expired tags were last swept out

    def remember(self, peeled: Peeled, now: float) -> None:
        """Keep `peeled`'s replay tag until its packet expires; a replay, a packet
        that would outlive `MAX_PACKET_TTL_S`, or one more tag than
        `MAX_REPLAY_TAGS` unexpired ones is dropped."""
        if peeled.expires > now + MAX_PACKET_TTL_S:
            raise Dropped(Drop.EXPIRES_TOO_LATE)
        if peeled.replay_tag in self.seen:
            raise Dropped(Drop.REPLAYED)
        if len(self.seen) >= MAX_REPLAY_TAGS and now - self.pruned >= 1.0:
            self.seen = {tag: exp for tag, exp in self.seen.items() if exp >= now}
            self.pruned = now
        if len(self.seen) >= MAX_REPLAY_TAGS:
            raise Dropped(Drop.REPLAY_CACHE_FULL)
        self.seen[peeled.replay_tag] = peeled.expires


class EpochKeys:
    """The current epoch's key and, for `GRACE_S`, the previous one."""

    def __init__(self, now: float) -> None:
        self.epochs = [Epoch(int(now * 1000), X25519PrivateKey.generate(), now)]

    @property
    def current(self) -> Epoch:
        return self.epochs[0]

    def rotate_if_due(self, now: float) -> bool:
        rotated = False
        if now - self.current.started >= EPOCH_S:
            number = max(int(now * 1000), self.current.number + 1)
            self.epochs.insert(0, Epoch(number, X25519PrivateKey.generate(), now))
            rotated = True
        self.epochs = [self.epochs[0]] + [
            e for e in self.epochs[1:2] if now - self.epochs[0].started < GRACE_S
        ]
        return rotated

    def announcement(self, peer_id: str, addrs: list[str]) -> OnionAnnouncement:
        epoch = self.current
        return OnionAnnouncement(
            peer_id=peer_id,
            key=raw_public(epoch.key),
            epoch=epoch.number,
            expires=epoch.started + EPOCH_S + GRACE_S,
            addrs=addrs,
        )

    def peel(self, packet: bytes, now: float) -> Peeled:
        """Peel with whichever epoch key opens the packet; a replay is dropped."""
        peeled, index = peel(packet, [e.key for e in self.epochs], now)
        self.epochs[index].remember(peeled, now)
        return peeled


class Refusal(StrEnum):
    """Why an onion-key announcement was not taken (each counted)."""

    INVALID = "invalid"  # signature or encoding
    EXPIRED = "expired"
    EXPIRES_TOO_LATE = "expires_too_late"  # past any epoch's life from now
    NO_SEARCH_ROLE = "no_search_role"
    EQUIVOCATION = "equivocation"  # a second key for an epoch held
    STALE_EPOCH = "stale_epoch"  # older than every epoch held for that node


class Directory:
    """Announcements known to this member, by node and epoch, and the nodes caught
    announcing two keys for one epoch.

    Bounded: per node, only the newest `EPOCHS_KEPT` epochs (an honest node has at
    most the current one and the previous one in its grace period); expired ones
    are forgotten; an answer to a pull carries at most `MAX_ANNOUNCEMENTS`, each
    node's newest first. What is not taken is counted by `Refusal`."""

    def __init__(self) -> None:
        # node → epoch → (as signed, as verified and decoded)
        self.known: dict[str, dict[int, tuple[SignedAnnouncement, OnionAnnouncement]]] = {}
        self.equivocating: set[str] = set()
        self.refused: Counter[Refusal] = Counter()

    def add(self, signed: SignedAnnouncement, roster: Roster, now: float) -> bool:
        """Take an announcement if it verifies, is current and comes from a member
        with a search role; False (counted by reason) if refused or already held."""
        try:
            announcement = open_announcement(signed)
        except HearthError as exc:
            log.warning("ignored an onion-key announcement: %s", exc.message)
            return self._refuse(Refusal.INVALID)
        if announcement.expires <= now:
            return self._refuse(Refusal.EXPIRED)
        if announcement.expires > now + EPOCH_S + GRACE_S + CLOCK_SKEW_S:
            return self._refuse(Refusal.EXPIRES_TOO_LATE)
        if not roster.roles_of(announcement.peer_id, now) & SEARCH_ROLES:
            log.info("ignored an onion key from %s: no search role", announcement.peer_id)
            return self._refuse(Refusal.NO_SEARCH_ROLE)
        epochs = self.known.setdefault(announcement.peer_id, {})
        for epoch in [e for e, (_, a) in epochs.items() if a.expires <= now]:
            del epochs[epoch]
        held = epochs.get(announcement.epoch)
        if held is not None and held[1].key != announcement.key:
            if announcement.peer_id not in self.equivocating:
                log.error(
                    "%s announced two onion keys for epoch %d: dropped from search paths",
                    announcement.peer_id,
                    announcement.epoch,
                )
            self.equivocating.add(announcement.peer_id)
            return self._refuse(Refusal.EQUIVOCATION)
        if held is not None:
            return False
        if len(epochs) >= EPOCHS_KEPT:
            oldest = min(epochs)
            if announcement.epoch < oldest:
                return self._refuse(Refusal.STALE_EPOCH)
            del epochs[oldest]
        epochs[announcement.epoch] = (signed, announcement)
        return True

    def _refuse(self, reason: Refusal) -> bool:
        self.refused[reason] += 1
        return False

    def all(self, now: float) -> list[SignedAnnouncement]:
        """What this member holds (for a pull), at most `MAX_ANNOUNCEMENTS`: every
        node's newest epoch first, then the older ones."""
        ranked = [
            (rank, signed)
            for epochs in self.known.values()
            for rank, (signed, _) in enumerate(
                sorted(
                    (held for held in epochs.values() if held[1].expires > now),
                    key=lambda held: -held[1].epoch,
                )
            )
        ]
        ranked.sort(key=lambda pair: pair[0])
        return [signed for _, signed in ranked[:MAX_ANNOUNCEMENTS]]

    def usable(self, roster: Roster, now: float) -> dict[str, OnionAnnouncement]:
        """The newest current announcement of each member that may be on a path."""
        out: dict[str, OnionAnnouncement] = {}
        for peer, epochs in self.known.items():
            if peer in self.equivocating or not roster.roles_of(peer, now) & SEARCH_ROLES:
                continue
            live = [a for _, a in epochs.values() if a.expires > now]
            if live:
                out[peer] = max(live, key=lambda a: a.epoch)
        return out
