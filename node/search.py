"""The node's side of peer-routed search on `/hearth/search/1`.

Every node answers onion-key requests with the announcements it holds, and the
founder takes members' announcements (the hub members gossip through; each member
compares what it pulls with what it held). With the `search-relay` role a node
peels request packets and forwards them; with `search-exit` it runs the query on
its backend and seals the reply. Dropped packets are counted by reason; the exit
rate-limits per previous hop and never logs a query with a peer id. A stream
carries packets one after another (each reply before the next packet), so a
previous hop keeps it open between searches; streams are bounded per peer and in
total, and one idle for `SERVE_IDLE_S` is closed. Streams to next hops are kept
the same way (`HopStreams`). The node also sends searches itself, for the
planner's `web_search` tool.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from libp2p.peer.id import ID

from hearth.protocol.transport.host import HearthHost
from hearth.protocol.transport.membership import RosterHolder
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import (
    FunctionSpec,
    Message,
    OnionKeys,
    OnionKeysRequest,
    SearchPacket,
    SearchReply,
    ToolSpec,
    UntrustedInput,
)
from hearth.protocol.wire.roster import Role
from hearth.search.backends import Backend
from hearth.search.hopstreams import HopStreams
from hearth.search.index import INDEX_FILE, FtsIndex
from hearth.search.onion import SEARCH_ROLES, Directory, EpochKeys, announce
from hearth.search.packets import Dropped, Peeled, seal_reply, wrap_reply
from hearth.search.route import HOP_TIMEOUT_S, SEARCH_PROTOCOL, pull_directory, search
from hearth.search.searxng import SearxngBackend

from .status import NextHopStreams, SearchStatus

log = logging.getLogger("hearth.search")
GOSSIP_S = 60.0
SERVE_PER_PEER = 16  # open search streams from one peer (a previous hop keeps up to 4)
SERVE_TOTAL = 128
SERVE_IDLE_S = 60.0  # a stream with no packet for this long is closed


class SearchService:
    """Onion keys, the announcement directory, the relay and exit services."""

    def __init__(
        self,
        identity: Ed25519PrivateKey,
        host: HearthHost,
        roster: RosterHolder,
        addrs: Any,
        backend: Backend | None,
        view_log: Path | None = None,
        exit_per_minute: int = 30,
    ) -> None:
        self.identity = identity
        self.host = host
        self.roster = roster
        self.addrs = addrs
        self.backend = backend
        self.view_log = view_log
        self.exit_per_minute = exit_per_minute
        self.keys = EpochKeys(time.time())
        self.directory = Directory()
        self.drops: Counter[str] = Counter()
        self.served: Counter[str] = Counter()
        self._recent: dict[str, deque[float]] = {}
        self._streams: Counter[str] = Counter()  # open search streams per peer
        self.hops = HopStreams(host, SEARCH_PROTOCOL)
        host.handle(SEARCH_PROTOCOL, self.serve)

    def roles(self) -> frozenset[Role]:
        return self.roster.roles_of(self.host.peer_id)

    def _refresh_own(self) -> None:
        """Rotate the epoch when due; keep this node's own announcement in the directory."""
        now = time.time()
        self.keys.rotate_if_due(now)
        if self.roles() & SEARCH_ROLES:
            own = self.keys.announcement(self.host.peer_id, self.addrs())
            self.directory.add(announce(self.identity, own), self.roster.roster, now)

    def status(self) -> SearchStatus:
        return SearchStatus(
            epoch=self.keys.current.number,
            known_nodes=sorted(self.directory.usable(self.roster.roster, time.time())),
            equivocating=sorted(self.directory.equivocating),
            dropped=dict(self.drops),
            served=dict(self.served),
            refused_announcements={r.value: n for r, n in self.directory.refused.items()},
            next_hop_streams=NextHopStreams(opened=self.hops.opened, kept=self.hops.kept()),
        )

    async def serve(self, stream: FrameStream) -> None:
        peer = stream.peer_id
        if self._streams[peer] >= SERVE_PER_PEER or self._streams.total() >= SERVE_TOTAL:
            self.drops["too_many_streams"] += 1
            raise HearthError(ErrorCode.BUSY, "too many open search streams", retry_after=1.0)
        self._streams[peer] += 1
        try:
            await self._serve(stream)
        finally:
            self._streams[peer] -= 1
            if not self._streams[peer]:
                del self._streams[peer]

    async def _serve(self, stream: FrameStream) -> None:
        first = await _next_frame(stream)
        if first is None:
            return
        if isinstance(first, OnionKeysRequest):
            self._refresh_own()
            await stream.send(OnionKeys(announcements=self.directory.all(time.time())))
        elif isinstance(first, OnionKeys):
            for signed in first.announcements:
                self.directory.add(signed, self.roster.roster, time.time())
        elif isinstance(first, SearchPacket):
            packet: Message | None = first
            while isinstance(packet, SearchPacket):  # until the peer closes or goes idle
                await self._hop(stream, packet)
                packet = await _next_frame(stream)
                # the gate again, per packet: the peer may have been revoked since it opened
                if packet is not None and not self.host.admit(stream.peer_id):
                    raise HearthError(ErrorCode.REFUSED, "not a member of this swarm")
            if packet is not None:
                raise HearthError(ErrorCode.PROTOCOL_ERROR, "expected a search packet")
        else:
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "expected onion keys or a search packet")

    async def _hop(self, stream: FrameStream, frame: SearchPacket) -> None:
        try:
            peeled = self.keys.peel(frame.data, time.time())
        except Dropped as exc:
            self.drops[exc.reason.value] += 1
            raise HearthError(
                ErrorCode.PROTOCOL_ERROR, f"search packet dropped: {exc.reason.value}"
            ) from None
        if peeled.next_hop is None:
            reply = await self._exit(stream.peer_id, peeled)
        else:
            reply = await self._relay(peeled)
        await stream.send(SearchReply(data=reply))

    async def _relay(self, peeled: Peeled) -> bytes:
        if Role.SEARCH_RELAY not in self.roles():
            self.drops["no_role"] += 1
            raise HearthError(ErrorCode.REFUSED, "this node does not relay searches")
        assert peeled.next_hop is not None
        next_peer = ID(peeled.next_hop).to_base58()
        if not self.roster.roles_of(next_peer) & SEARCH_ROLES:  # no dial, no pull for it
            self.drops["next_hop_not_a_search_member"] += 1
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "search packet dropped: unknown next hop")
        known = self.directory.usable(self.roster.roster, time.time()).get(next_peer)
        founder = self.roster.roster.founder
        if known is None and founder != self.host.peer_id:  # announced since the last gossip?
            with contextlib.suppress(HearthError, TimeoutError):
                await pull_directory(self.host, founder, self.directory, self.roster.roster)
            known = self.directory.usable(self.roster.roster, time.time()).get(next_peer)
        try:
            with anyio.fail_after(HOP_TIMEOUT_S):
                reply = await self.hops.exchange(
                    next_peer, known.addrs if known else [], SearchPacket(data=peeled.packet)
                )
        except TimeoutError as exc:
            raise HearthError(ErrorCode.TIMED_OUT, "the next search hop timed out") from exc
        except HearthError as exc:
            if exc.code in (ErrorCode.UNREACHABLE, ErrorCode.REFUSED, ErrorCode.TIMED_OUT):
                raise HearthError(ErrorCode.UNREACHABLE, "the next search hop is down") from exc
            raise
        if not isinstance(reply, SearchReply):
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "the next hop sent no search reply")
        try:
            wrapped = wrap_reply(peeled.reply_key, reply.data)
        except Dropped as exc:
            self.drops["reply_" + exc.reason.value] += 1
            raise HearthError(ErrorCode.PROTOCOL_ERROR, "the next hop sent a bad reply") from None
        self.served["relayed"] += 1
        return wrapped

    async def _exit(self, previous_hop: str, peeled: Peeled) -> bytes:
        if Role.SEARCH_EXIT not in self.roles() or self.backend is None:
            self.drops["no_role"] += 1
            raise HearthError(ErrorCode.REFUSED, "this node is not a search exit")
        self._rate_limit(previous_hop)
        query, limit = peeled.query()
        if self.view_log is not None:  # everything this exit decrypted, for auditing
            with self.view_log.open("a") as f:
                f.write(json.dumps({"query": query, "limit": limit, "next_hop": None}) + "\n")
        results = await self.backend.search(query, limit)
        reply, _ = seal_reply(peeled.reply_key, results)
        self.served["exited"] += 1
        return reply

    def _rate_limit(self, peer: str) -> None:
        now = time.monotonic()
        for gone in [p for p, t in self._recent.items() if not t or now - t[-1] > 60]:
            del self._recent[gone]  # one entry per member that searched in the last minute
        recent = self._recent.setdefault(peer, deque())
        while recent and now - recent[0] > 60:
            recent.popleft()
        if len(recent) >= self.exit_per_minute:
            self.drops["rate_limited"] += 1
            raise HearthError(
                ErrorCode.BUSY, "too many searches", retry_after=60 - (now - recent[0])
            )
        recent.append(now)

    async def gossip(self) -> None:
        """Push this node's announcement to the founder and pull the founder's
        directory, then every other connected search member's: every 2 s until the
        founder has answered once, then every minute. Each pull is compared with what
        this node holds, so a node that shows two keys for one epoch to different
        members is caught by whoever sees both."""
        settled = False
        while True:
            self._refresh_own()
            founder = self.roster.roster.founder
            if founder != self.host.peer_id and self.host.connected(founder):
                try:
                    await pull_directory(self.host, founder, self.directory, self.roster.roster)
                    own = self.directory.known.get(self.host.peer_id, {})
                    with anyio.fail_after(5):
                        stream = await self.host.open(founder, SEARCH_PROTOCOL)
                        await stream.send(OnionKeys(announcements=[s for s, _ in own.values()]))
                        await stream.close()
                    settled = True
                except (HearthError, TimeoutError) as exc:
                    log.info("onion-key gossip with the founder failed: %s", exc)
            for member in self.roster.roster.members:
                peer = member.peer_id
                if peer in (founder, self.host.peer_id) or not self.host.connected(peer):
                    continue
                if self.roster.roles_of(peer) & SEARCH_ROLES:
                    with contextlib.suppress(HearthError, TimeoutError):
                        await pull_directory(self.host, peer, self.directory, self.roster.roster)
            founding = founder == self.host.peer_id
            await anyio.sleep(GOSSIP_S if founding or settled else 2.0)

    async def web_search(self, query: str, hops: int = 2) -> tuple[dict[str, Any], UntrustedInput]:
        """The planner's `web_search` tool: a peer-routed search sent by this node.
        The result is labelled untrusted, with its source."""
        self._refresh_own()
        outcome = await search(
            self.host,
            self.directory.usable(self.roster.roster, time.time()),
            self.roster.roster,
            own_node=self.host.peer_id,
            query=query,
            hops=hops,
            streams=self.hops,
        )
        content = {
            "untrusted": True,
            "source": f"peer-routed web search, exit {outcome.exit}",
            "results": [r.__dict__ for r in outcome.results],
            "truncated": outcome.truncated,
        }
        digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).digest()
        return content, UntrustedInput(tool="web_search", source=content["source"], digest=digest)


async def _next_frame(stream: FrameStream) -> Message | None:
    """The peer's next frame; None once it has closed the stream or sent nothing for
    `SERVE_IDLE_S`."""
    with anyio.move_on_after(SERVE_IDLE_S):
        try:
            return await stream.receive()
        except HearthError as exc:
            if exc.code is not ErrorCode.UNREACHABLE:
                raise
    return None


def search_backend(home: Path, config: Any) -> Backend:
    """The exit backend the node's config names."""
    if config.search_backend == "searxng":
        if not config.searxng_url:
            raise HearthError(ErrorCode.INVALID_INPUT, "search_backend = searxng needs searxng_url")
        return SearxngBackend(config.searxng_url)
    return FtsIndex(home / INDEX_FILE)


class WebSearchTool:
    """`web_search` as a node-side tool: the planner may call it while planning; the
    result is untrusted, and every plan after it says so."""

    spec = ToolSpec(
        function=FunctionSpec(
            name="web_search",
            description="Search the web privately through the owner's friends' nodes.",
            parameters={
                "type": "object",
                "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 200}},
                "required": ["query"],
                "additionalProperties": False,
            },
        )
    )

    def __init__(self, service: SearchService) -> None:
        self.service = service

    def available(self) -> bool:
        """Offered to the model only when some exit other than this node is known."""
        nodes = self.service.directory.usable(self.service.roster.roster, time.time())
        roster = self.service.roster
        return any(
            Role.SEARCH_EXIT in roster.roles_of(p) and p != self.service.host.peer_id for p in nodes
        )

    async def run(self, arguments: dict[str, Any]) -> tuple[Any, UntrustedInput | None]:
        try:
            return await self.service.web_search(str(arguments["query"]))
        except HearthError as exc:
            return {"error": exc.code.value, "message": exc.message}, None
