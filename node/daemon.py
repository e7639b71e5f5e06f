"""`hearth-node serve`: the home node daemon.

It loads the identity, swarm keys and roster, starts the model backend, listens on
the private swarm (roster-gated), serves `/hearth/plan/1` to the owner's phones and
`/hearth/health/1` to every member, runs pairing while invites are live, answers the
local control socket, advertises on mDNS and (opt-in) serves metrics. SIGTERM or
SIGINT stop it cleanly: open sessions get a typed `cancelled` error.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import signal
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio

from hearth.protocol.console import reason_about
from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.transport.health import HEALTH_PROTOCOL, ask_health
from hearth.protocol.transport.host import host_for_home, quiet_libp2p
from hearth.protocol.transport.keys import write_secret
from hearth.protocol.transport.plans import PLAN_PROTOCOL
from hearth.protocol.transport.relay import Relaying
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Health, HealthRequest, MemberAddrs
from hearth.protocol.wire.roster import Role

from .admission import Admission
from .backends import Backend, load_backend
from .config import NodeConfig, pairing_listen
from .control import (
    ControlReply,
    ControlRequest,
    InviteReply,
    InviteRequest,
    RevokeRequest,
    RoleRequest,
    StatusRequest,
    serve_control,
)
from .metrics import serve_metrics
from .pairing import Pairing, invite_roles, parse_roles
from .planner import Planner, PlannerSettings
from .relays import Reservations
from .search import SearchService, WebSearchTool, search_backend
from .status import Handshakes, MainHandshakes, NodeStatus, PeerStatus, RelayStatus
from .swarm import Swarm

log = logging.getLogger("hearth.node")
SHUTDOWN_GRACE_S = 3.0
STATUS_DIAL_S = 2.0
MEMBER_REFRESH_S = 60.0  # a connected planner's own addresses, asked at most this often
MEMBER_HEALTH_S = 1.0  # the phone waits on this (its health answer), so kept short
FLUSH_S = 0.3


@functools.cache
def installed_version() -> str:
    """Hearth's version, read from its package metadata once (a lookup is ~0.5 ms of
    CPU; the running code does not change when the metadata does)."""
    return version("hearth")


class Node:
    """Everything `serve` runs, wired together."""

    def __init__(self, home: Path, config: NodeConfig, backend: Backend | None) -> None:
        self.home = home
        self.config = config
        self.backend = backend
        self.host, self.roster, self.swarm_keys, self.key = host_for_home(home)
        self.admission = Admission(
            config.max_sessions,
            config.max_queue,
            config.per_peer,
            config.friend_sessions,
            config.friends.per_phone,
        )
        self.planner = Planner(
            self.key,
            self.host.peer_id,
            backend,
            self.admission,
            PlannerSettings(
                config.plan_ttl_s,
                config.observation_timeout_s,
                config.request_timeout_s,
                plan_for_friends=config.plan_for_friends,
                friend_caps=config.friends,
            ),
            roster=lambda: self.roster.roster,
        )
        self.pairing = Pairing(
            self.key,
            self.roster,
            self.swarm_keys,
            self.addrs,
            pairing_listen(config),
            on_paired=lambda _: self.swarm.changed(),
        )
        self.started = time.time()
        self._refreshed: dict[str, float] = {}  # planner → when its addresses may be asked again
        self.host.handle(
            PLAN_PROTOCOL,
            self.planner.serve,
            allow=lambda peer: Role.PHONE in self.roster.roles_of(peer),
        )
        self.host.handle(HEALTH_PROTOCOL, self._health)
        self.swarm = Swarm(
            home, self.key, self.host, self.roster, self.swarm_keys, config.key_grace_s
        )
        self.search = SearchService(
            self.key,
            self.host,
            self.roster,
            self.addrs,
            search_backend(home, config),
            Path(config.search_view_log) if config.search_view_log else None,
            config.search_exit_per_minute,
        )
        self.planner.node_tools["web_search"] = WebSearchTool(self.search)
        self.relaying = Relaying(self.host, self._relays_for)
        self.reservations = Reservations(home, self.host, self.roster, self.relaying)

    def addrs(self) -> list[str]:
        """Where members reach this node: its listeners, then circuits through relays."""
        return self.host.addrs() + self.reservations.addrs()

    def _relays_for(self, peer: str) -> bool:
        """Circuit relay v2 hop: only with the `relay` role, only for members."""
        return Role.RELAY in self.roster.roles_of(self.host.peer_id) and self.roster.admits(peer)

    def health(self) -> Health:
        return Health(
            peer_id=self.host.peer_id,
            name=self.config.name,
            roles=sorted(self.roster.roles_of(self.host.peer_id)),
            model=self.backend.info if self.backend else None,
            sessions=self.admission.stats.active,
            queue=self.admission.stats.queued,
            capacity=self.config.max_sessions,
            version=installed_version(),
            addrs=self.addrs(),
        )

    async def _health(self, stream: FrameStream) -> None:
        phone = Role.PHONE in self.roster.roles_of(stream.peer_id)
        while True:
            request = await stream.receive()
            if not isinstance(request, HealthRequest):
                raise HearthError(ErrorCode.PROTOCOL_ERROR, "expected a health_request")
            health = self.health()
            if phone:  # a phone learns where to dial its friends' planners
                health = health.model_copy(update={"members": await self._planner_addrs()})
            await stream.send(health)

    async def _planner_addrs(self) -> list[MemberAddrs]:
        """Last-known addresses of the members with `planner`, refreshed from the health
        of those connected now (at most once per `MEMBER_REFRESH_S` each): their listeners,
        then their circuits through their relays. Friends' nodes hold no reservation on
        this node (only a `home` reserves, see relays.py), so none is added here."""
        planners = [
            m.peer_id
            for m in self.roster.roster.members
            if m.peer_id != self.host.peer_id and Role.PLANNER in self.roster.roles_of(m.peer_id)
        ][:64]

        async def refresh(peer: str) -> None:
            now = time.monotonic()
            if not self.host.connected(peer) or now < self._refreshed.get(peer, 0.0):
                return
            self._refreshed[peer] = now + MEMBER_REFRESH_S
            with contextlib.suppress(HearthError):
                health = await ask_health(self.host, peer, timeout=MEMBER_HEALTH_S)
                own = [a for a in health.addrs if a.endswith(f"/p2p/{peer}")]
                AddressBook(self.home).remember(peer, own)  # read after the wait: no lost write

        async with anyio.create_task_group() as tg:
            for peer in planners:
                tg.start_soon(refresh, peer)
        book = AddressBook(self.home)
        return [MemberAddrs(peer_id=p, addrs=book.get(p)) for p in planners if book.get(p)]

    async def status(self) -> NodeStatus:
        health = self.health()
        peers = [m for m in self.roster.roster.members if m.peer_id != self.host.peer_id]
        reasons: dict[str, str] = {}
        async with anyio.create_task_group() as tg:
            for member in peers:
                tg.start_soon(self._reason, member.peer_id, reasons)
        return NodeStatus(
            peer_id=self.host.peer_id,
            addrs=health.addrs,
            running=True,
            model=health.model,
            sessions=health.sessions,
            served_for_others=self.admission.served_for_others,
            queue=health.queue,
            admission=self.admission.summary(),
            search=self.search.status(),
            handshakes=self.handshakes(),
            roles=health.roles,
            relays={
                relay: RelayStatus(
                    circuits=self.reservations.circuits.get(relay, []),
                    problem=self.reservations.problems.get(relay),
                )
                for relay in self.reservations.relays()
            },
            peers=[
                PeerStatus(
                    peer_id=m.peer_id,
                    name=m.name,
                    roles=sorted(m.roles),
                    reachable=not reasons[m.peer_id],
                    reason=reasons[m.peer_id],
                    last_seen_s=self.host.quiet_for(m.peer_id),
                )
                for m in peers
            ],
        )

    async def _reason(self, peer: str, out: dict[str, str]) -> None:
        """Why `peer` is unreachable from here ("" when it is reachable)."""
        problem = self.reservations.problems.get(peer)
        if problem:
            out[peer] = problem
            return
        if self.host.connected(peer):
            out[peer] = ""
            return
        member = self.roster.roster.member(peer)
        if member is not None and Role.PHONE in member.roles:
            out[peer] = "not connected (phones dial in; nothing dials a phone)"
            return
        try:
            await self.host.connect(peer, AddressBook(self.home).get(peer), STATUS_DIAL_S)
            out[peer] = ""
        except HearthError as exc:
            out[peer] = reason_about(peer, exc)

    async def control(self, request: ControlRequest) -> ControlReply:
        match request:
            case StatusRequest():
                return await self.status()
            case RoleRequest():
                role = parse_roles(request.role)
                if len(role) != 1:
                    raise HearthError(ErrorCode.INVALID_INPUT, "name exactly one role")
                return await self.swarm.set_role(
                    request.peer, next(iter(role)), request.op == "grant"
                )
            case RevokeRequest():
                return await self.swarm.revoke(request.peer)
            case InviteRequest():
                if self.roster.roster.founder != self.host.peer_id:
                    raise HearthError(ErrorCode.INVALID_INPUT, "only the founder invites")
                grants = parse_roles(request.grant) if request.grant else None
                invite_roles(request.role, grants)  # check before creating
                invite = await self.pairing.create(request.role, grants, request.ttl)
                return InviteReply(uri=invite.uri(), expires=invite.expires, node=invite.node)

    def handshakes(self) -> Handshakes:
        """Private-network handshakes that failed on the key, on the main listener and
        the pairing listener, and how many addresses' failures are remembered now."""
        ring = self.host.keyring
        main = MainHandshakes(failed=ring.failed, remembered=ring.remembered())
        return Handshakes(main=main, pairing=self.pairing.handshakes())

    def metrics(self) -> dict[str, float]:
        stats = self.admission.stats
        handshakes = self.handshakes()
        search = self.search
        return {
            "hearth_sessions": stats.active,
            "hearth_queue": stats.queued,
            "hearth_busy_total": stats.busy,
            "hearth_admitted_total": stats.admitted,
            "hearth_members": len(self.roster.roster.members),
            "hearth_uptime_seconds": time.time() - self.started,
            "hearth_handshakes_failed_total": handshakes.main.failed,
            "hearth_pairing_handshakes_failed_total": handshakes.pairing.failed,
            "hearth_pairing_handshakes_throttled_total": handshakes.pairing.throttled,
            "hearth_search_dropped_total": sum(search.drops.values()),
            "hearth_onion_announcements_refused_total": sum(search.directory.refused.values()),
        }

    async def run(self, ready_file: Path | None) -> None:
        async with (
            anyio.create_task_group() as tg,
            self.host.run(self.config.listen),
            self.relaying.run(),
        ):
            await tg.start(serve_control, self.home, self.control)
            tg.start_soon(self.pairing.run)
            tg.start_soon(self.swarm.catch_up)
            tg.start_soon(self.swarm.renew)
            tg.start_soon(self.swarm.push_changes)
            tg.start_soon(self.reservations.run)
            tg.start_soon(self.search.gossip)
            if self.config.metrics_port:
                await tg.start(serve_metrics, self.config.metrics_port, self.metrics)
            if self.config.mdns:
                tg.start_soon(self._advertise)
            ready: dict[str, Any] = {"peer_id": self.host.peer_id, "addrs": self.host.addrs()}
            if self.config.dashboard_port:
                ready["dashboard"] = await self._dashboard(tg)
            if ready_file is not None:
                write_secret(ready_file, json.dumps(ready).encode())
            log.info("serving as %s on %s", self.host.peer_id, ", ".join(ready["addrs"]))
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for signum in signals:
                    log.info("%s: stopping", signal.Signals(signum).name)
                    break
            self.planner.shutdown.set()  # open sessions answer `cancelled`
            had_sessions = bool(self.planner.sessions)
            with anyio.move_on_after(SHUTDOWN_GRACE_S):
                while self.planner.sessions:
                    await anyio.sleep(0.05)
            if had_sessions:  # let those last frames reach the phones before the sockets close
                await anyio.sleep(FLUSH_S)
            tg.cancel_scope.cancel()
        if self.backend is not None:
            await self.backend.aclose()

    async def _dashboard(self, tg: anyio.abc.TaskGroup) -> str:
        """Start the dashboard in `tg`; its URL."""
        from .dashboard import DASHBOARD_TOKEN, serve_dashboard

        me = self.roster.roster.member(self.host.peer_id)
        name = self.config.name or (me.name if me else "")
        port = await tg.start(
            serve_dashboard, self.home, self.config.dashboard_port, self.control, name
        )
        url = f"http://127.0.0.1:{port}"
        log.info("dashboard on %s (token in %s)", url, self.home / DASHBOARD_TOKEN)
        return url

    async def _advertise(self) -> None:
        from .discovery import advertise

        try:
            addrs = [a for a in self.host.addrs() if a.startswith("/ip4/")]
            port = int(addrs[0].split("/tcp/")[1].split("/")[0])
            ips = sorted({a.split("/")[2] for a in addrs} - {"127.0.0.1"}) or ["127.0.0.1"]
            await advertise(self.swarm_keys.current, port, ips)
        except Exception as exc:  # mDNS is a hint: its failure never stops the node
            log.warning("mDNS advertisement off: %s", exc)


async def serve(home: Path, config: NodeConfig, ready_file: Path | None) -> None:
    quiet_libp2p()
    backend = await load_backend(config)
    await Node(home, config, backend).run(ready_file)
