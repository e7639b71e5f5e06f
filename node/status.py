"""What `hearth-node status` shows, as one typed value: the daemon builds it, the
control socket and the dashboard send it, the CLI renders it (also when no daemon
runs: `NodeStatus.stopped`).

Its JSON is a contract (DESIGN, "JSON shapes"): fields may be added, never removed
or renamed. A stopped node's status carries every field, the running node's parts
(`admission`, `search`, `handshakes`) as null.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from hearth.protocol.wire.messages import ModelInfo


class Part(BaseModel):
    """Base of the status's parts: immutable; fields a newer daemon adds are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class AdmissionSummary(Part):
    """Sessions admitted and refused busy since start, and the p99 wait in the queue
    (last 1000 admissions)."""

    admitted: int
    busy: int
    queue_wait_p99_ms: float


class NextHopStreams(Part):
    """Streams to next hops opened since start, and those kept open for reuse now."""

    opened: int
    kept: int


class SearchStatus(Part):
    """The node's part in peer-routed search."""

    epoch: int
    known_nodes: list[str]  # search members whose onion keys this node holds
    equivocating: list[str]
    dropped: dict[str, int]  # packets dropped, by reason
    served: dict[str, int]  # requests served, by role
    refused_announcements: dict[str, int]  # by reason
    next_hop_streams: NextHopStreams


class MainHandshakes(Part):
    """Private-network handshakes that failed on the key on the main listener."""

    failed: int
    remembered: int  # addresses whose failures are remembered now


class HandshakeStats(Part):
    """Handshakes that failed on the key (wrong or no token), those from throttled
    addresses, and how many addresses' failures are remembered now."""

    failed: int = 0
    throttled: int = 0
    remembered: int = 0


class Handshakes(Part):
    """Failed handshakes on the main listener and the pairing listener."""

    main: MainHandshakes
    pairing: HandshakeStats


class RelayStatus(Part):
    """A relay this node holds a reservation on: its circuit addresses, or why none."""

    circuits: list[str] = Field(default_factory=list)
    problem: str | None = None


class PeerStatus(Part):
    """Another member, and whether this node reaches it now (why not, if it does not)."""

    peer_id: str
    name: str
    roles: list[str]
    reachable: bool
    reason: str
    last_seen_s: float | None = None  # since bytes last came from it (None: not since start)


class NodeStatus(Part):
    """The node's identity, model, load, search, relays and peers."""

    peer_id: str
    addrs: list[str] = Field(default_factory=list)
    running: bool
    model: ModelInfo | None = None
    sessions: int = 0
    served_for_others: int = 0  # friends' sessions
    queue: int = 0
    admission: AdmissionSummary | None = None
    search: SearchStatus | None = None
    handshakes: Handshakes | None = None
    roles: list[str] = Field(default_factory=list)
    relays: dict[str, RelayStatus] = Field(default_factory=dict)
    peers: list[PeerStatus] = Field(default_factory=list)

    @classmethod
    def stopped(cls, peer_id: str) -> NodeStatus:
        """The status of a node whose daemon does not run."""
        return cls(peer_id=peer_id, running=False)
