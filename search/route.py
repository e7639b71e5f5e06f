"""Sending a peer-routed search: pick a path, build the packet, send, open the reply.

2 hops by default (a search relay, then a search exit), 3 on request when enough
members hold the roles. The exit is never the sender nor the sender's own node
(for a phone, its home, which knows who asks); relays are never the sender, and
all hops differ. Too few members for the hops asked is an error, never a shorter
path. A hop that is down (or refuses) gives `unreachable`, `timed_out` or
`refused`; the sender then builds a fresh packet (new per-hop keys) to the same
exit through another relay.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import anyio
from libp2p.peer.id import ID

from hearth.protocol.transport.host import HearthHost
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import OnionKeys, OnionKeysRequest, SearchPacket, SearchReply
from hearth.protocol.wire.roster import Role, Roster

from .hopstreams import HopStreams
from .onion import Directory, OnionAnnouncement
from .packets import Dropped, Hop, Result, build, open_reply

SEARCH_PROTOCOL = "/hearth/search/1"
PACKET_TTL_S = 60
HOP_TIMEOUT_S = 10.0
RETRIES = 2


@dataclass
class Outcome:
    query: str
    hops: int
    results: list[Result]
    truncated: bool
    exit: str
    attempts: int


def hop_of(announcement: OnionAnnouncement) -> Hop:
    return Hop(ID.from_base58(announcement.peer_id).to_bytes(), announcement.key)


def choose_path(
    nodes: dict[str, OnionAnnouncement],
    roster: Roster,
    sender: str,
    own_node: str,
    hops: int,
    now: float,
    exit_peer: str | None = None,
    avoid: frozenset[str] = frozenset(),
) -> list[OnionAnnouncement]:
    """Relays first, exit last. Raises `unreachable` when the swarm has too few."""
    if hops not in (2, 3):
        raise HearthError(ErrorCode.INVALID_INPUT, "a search takes 2 or 3 hops")

    def holders(role: Role) -> list[str]:
        return [p for p in nodes if role in roster.roles_of(p, now) and p != sender]

    exits = [p for p in holders(Role.SEARCH_EXIT) if p != own_node]
    if exit_peer is not None:
        exits = [p for p in exits if p == exit_peer]
    if not exits:
        raise HearthError(
            ErrorCode.UNREACHABLE, "no search exit in the swarm (besides this device's own node)"
        )
    chosen_exit = random.choice(exits)
    relays = [p for p in holders(Role.SEARCH_RELAY) if p != chosen_exit and p not in avoid]
    if len(relays) < hops - 1:
        raise HearthError(
            ErrorCode.UNREACHABLE,
            f"{hops} hops need {hops - 1} search relay(s) besides the exit; "
            f"{len(relays)} available",
        )
    path = [*random.sample(relays, hops - 1), chosen_exit]
    return [nodes[p] for p in path]


def one_shot(host: HearthHost) -> HopStreams:
    """Streams to search hops that are closed after one reply (nothing kept)."""
    return HopStreams(host, SEARCH_PROTOCOL, per_peer=0)


async def send(
    host: HearthHost,
    path: list[OnionAnnouncement],
    query: str,
    limit: int,
    streams: HopStreams | None = None,
) -> tuple[list[Result], bool]:
    """One attempt along `path` (a fresh packet), on a stream of `streams` if given."""
    packet, reply_keys = build(
        query, [hop_of(a) for a in path], int(time.time()) + PACKET_TTL_S, limit
    )
    first = path[0]
    try:
        with anyio.fail_after(HOP_TIMEOUT_S * len(path)):
            reply = await (streams or one_shot(host)).exchange(
                first.peer_id, first.addrs, SearchPacket(data=packet)
            )
    except TimeoutError as exc:
        raise HearthError(ErrorCode.TIMED_OUT, f"search through {first.peer_id} timed out") from exc
    if not isinstance(reply, SearchReply):
        raise HearthError(ErrorCode.PROTOCOL_ERROR, f"expected a search reply, got {reply}")
    try:
        return open_reply(reply_keys, reply.data)
    except Dropped as exc:
        raise HearthError(ErrorCode.PROTOCOL_ERROR, f"search reply {exc.reason.value}") from exc


async def search(
    host: HearthHost,
    nodes: dict[str, OnionAnnouncement],
    roster: Roster,
    *,
    own_node: str,
    query: str,
    hops: int = 2,
    limit: int = 10,
    streams: HopStreams | None = None,
) -> Outcome:
    """Run a search; on a hop that is down, retry with another first relay, same exit.
    The first hop is reached on a stream of `streams` when given (kept by its owner)."""
    now = time.time()
    path = choose_path(nodes, roster, host.peer_id, own_node, hops, now)
    exit_peer = path[-1].peer_id
    avoid: set[str] = set()
    attempt = 0
    while True:
        attempt += 1
        try:
            results, truncated = await send(host, path, query, limit, streams)
            return Outcome(query, hops, results, truncated, exit_peer, attempt)
        except HearthError as exc:
            retryable = (ErrorCode.UNREACHABLE, ErrorCode.TIMED_OUT, ErrorCode.REFUSED)
            if exc.code not in retryable or attempt > RETRIES:
                raise
            avoid.add(path[0].peer_id)
            try:
                path = choose_path(
                    nodes, roster, host.peer_id, own_node, hops, now, exit_peer, frozenset(avoid)
                )
            except HearthError:
                raise exc from None


async def pull_directory(
    host: HearthHost,
    peer: str,
    directory: Directory,
    roster: Roster,
    addrs: list[str] | None = None,
) -> int:
    """Fetch `peer`'s announcements into `directory`; returns how many were new."""
    with anyio.fail_after(5):
        stream = await host.open(peer, SEARCH_PROTOCOL, addrs)
        await stream.send(OnionKeysRequest())
        answer = await stream.receive()
        await stream.close()
    if not isinstance(answer, OnionKeys):
        raise HearthError(ErrorCode.PROTOCOL_ERROR, "expected onion keys")
    now = time.time()
    return sum(directory.add(signed, roster, now) for signed in answer.announcements)
