"""The companion's reports: each one job, each answered with its typed `--json` result.

`node_status` asks every paired node for its health, `tool_list` lists the mounted tools,
`audit_report` reads (and may verify) the audit log, `peer_search` runs a peer-routed
search. The commands' dispatcher (`commands.perform`) and the Python API call these; a
new report is one function here and its op in `commands.py`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .audit import AuditLog
from .results import (
    AuditRecordView,
    AuditResult,
    NodeStatus,
    SearchHit,
    SearchResult,
    StatusResult,
    ToolsResult,
)

if TYPE_CHECKING:  # libp2p loads only when the home node is needed
    from hearth.search.hopstreams import HopStreams

    from .link import NodeLink
    from .service import Service


async def node_status(service: Service) -> StatusResult:
    """`hearth status --json`: the paired nodes, reachable or not and why."""
    from hearth.protocol.wire.errors import reason_about

    out = StatusResult(peer_id=service.peer_id)
    if not service.paired:
        return out
    from hearth.protocol.transport.addressbook import AddressBook
    from hearth.protocol.transport.health import ask_health
    from hearth.protocol.wire.roster import Role

    async with service.link_to_home() as link:
        book = AddressBook(service.home)
        for member in link.roster.roster.members:
            if not ({Role.HOME, Role.PLANNER} & member.roles):
                continue
            roles = sorted(role.value for role in member.roles)
            entry = NodeStatus(peer_id=member.peer_id, name=member.name, roles=roles)
            try:
                t0 = time.monotonic()
                health = await ask_health(link.host, member.peer_id, book.get(member.peer_id))
                entry.latency_ms = round((time.monotonic() - t0) * 1000, 1)
                entry.reachable = True
                entry.relay = relay_name(link, link.host.worked.get(member.peer_id, ""))
                if health.model is not None:
                    entry.model = health.model.model_dump(mode="json")
            except HearthError as exc:
                entry.reason = reason_about(member.peer_id, exc)
            out.nodes.append(entry)
    return out


def relay_name(link: NodeLink, address: str) -> str | None:
    """The relay `address` goes through (its roster name, else its id), or None when it is
    a direct address."""
    from hearth.protocol.transport.circuits import is_circuit, relay_of

    if not is_circuit(address):
        return None
    relay = relay_of(address)[0]
    member = link.roster.roster.member(relay)
    return (member.name if member is not None else "") or relay


async def peer_search(service: Service, query: str, hops: int = 2, limit: int = 10) -> SearchResult:
    """`hearth search`: a peer-routed search; onion keys come from the home node. On the
    resident companion's kept link, the streams to first hops are kept between searches."""
    from hearth.protocol.transport.addressbook import AddressBook
    from hearth.search.onion import Directory
    from hearth.search.route import pull_directory, search

    async with service.link_to_home() as link:
        streams = service.search_streams.on(link) if link is service.link else None
        if not await link.ensure():
            raise link.error or HearthError(ErrorCode.UNREACHABLE, link.reason)
        directory = Directory()
        roster = link.roster.roster
        await pull_directory(
            link.host, link.node, directory, roster, AddressBook(service.home).get(link.node)
        )
        outcome = await search(
            link.host,
            directory.usable(roster, time.time()),
            roster,
            own_node=link.node,
            query=query,
            hops=hops,
            limit=limit,
            streams=streams,
        )
    return SearchResult(
        query=query,
        hops=outcome.hops,
        results=[SearchHit(**r.__dict__) for r in outcome.results],
        truncated=outcome.truncated,
        attempts=outcome.attempts,
    )


class KeptStreams:
    """The search streams to first hops the resident companion keeps, on its link's host
    (a new host starts afresh)."""

    def __init__(self) -> None:
        self._streams: HopStreams | None = None

    def on(self, link: NodeLink) -> HopStreams:
        from hearth.search.hopstreams import HopStreams
        from hearth.search.route import SEARCH_PROTOCOL

        if self._streams is None or self._streams.host is not link.host:
            self._streams = HopStreams(link.host, SEARCH_PROTOCOL)
        return self._streams


def tool_list(service: Service) -> ToolsResult:
    """`hearth tools --json`: the manifest (MCP servers' tools mounted) and warnings."""
    registry = service.registry
    manifest = registry.manifest()
    for entry in manifest:
        entry["description"] = registry.tools[entry["name"]].description
    return ToolsResult(tools=manifest, warnings=service.warnings)


def audit_report(home: Path, verify: bool) -> AuditResult:
    """`hearth audit --json` for `home`, readable without a `Service`: an audit database
    too damaged to open stops a Service, and `--verify` must still say it is unreadable."""
    try:
        with contextlib.closing(AuditLog(home)) as log:
            records = log.records()
            verified, problem = log.verify() if verify else (None, "")
    except sqlite3.DatabaseError as exc:
        if not verify or isinstance(exc, sqlite3.OperationalError):
            raise
        records, verified, problem = [], False, f"the audit database is unreadable ({exc})"
    return AuditResult(
        records=[AuditRecordView.model_validate(r) for r in records],
        verified=verified,
        problem=problem or None,
    )
