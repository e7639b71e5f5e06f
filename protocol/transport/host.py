"""The one libp2p host factory every Hearth process uses.

TCP + Noise + Yamux, the spec pnet protector keyed from a key store, the roster
gate, no happy-eyeballs delay, no dial retries or peer blocking (Hearth decides
when to retry), and dial failures classified into the codes of the error table.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, cast

import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat
from libp2p import new_host
from libp2p.abc import IHost, INetConn, INetStream, INetwork, INotifee
from libp2p.crypto.ed25519 import create_new_key_pair
from libp2p.crypto.keys import KeyPair
from libp2p.crypto.x25519 import create_new_key_pair as create_x25519_key_pair
from libp2p.custom_types import TProtocol
from libp2p.host.basic_host import BasicHost
from libp2p.network.config import ConnectionConfig, RetryConfig
from libp2p.network.exceptions import SwarmDialAllFailedError
from libp2p.network.swarm import Swarm
from libp2p.peer.id import ID
from libp2p.peer.peerinfo import PeerInfo
from libp2p.security.noise.transport import PROTOCOL_ID as NOISE_PROTOCOL_ID
from libp2p.stream_muxer.yamux.yamux import PROTOCOL_ID as YAMUX
from libp2p.stream_muxer.yamux.yamux import Yamux
from libp2p.transport.exceptions import OpenConnectionError
from multiaddr import Multiaddr

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.frames import DEFAULT_MAX_FRAME
from hearth.protocol.wire.messages import error_frame

from .circuits import is_circuit, open_circuit, relay_of
from .coalesce import send_held
from .gate import Admit, GatedNoise, Liveness, NotAdmitted, gate_refusal
from .keys import SwarmKeys, load_identity
from .membership import RosterHolder
from .multiselect import pipeline_selection, unanswered
from .pnet import KeyMismatch, KeyRing, install_protector
from .streams import FrameStream, credit_streams
from .taskgroups import leaves, single_error

log = logging.getLogger("hearth.transport")
StreamHandler = Callable[[FrameStream], Awaitable[None]]
DEFAULT_CONNECT_TIMEOUT = 5.0
PER_ADDRESS_S = 1.5  # a dial to one of several addresses gets at most this long
RELAY_HEAD_START_S = 0.3  # how long a direct dial runs alone before circuits are tried too
SEND_HELD_S = 1.0  # the most a stopping host waits to send what its connections hold


def quiet_libp2p() -> None:
    """py-libp2p logs refused handshakes as errors; Hearth reports them itself."""
    if not os.environ.get("HEARTH_DEBUG_LIBP2P"):
        logging.getLogger("libp2p").setLevel(logging.CRITICAL)


class HomeHost(NamedTuple):
    """A host for one home directory, with the roster and swarm keys it is gated by
    (both updated in place by roster sync and key rotation)."""

    host: HearthHost
    roster: RosterHolder
    keys: SwarmKeys
    identity: Ed25519PrivateKey


def host_for_home(home: Path, **options: Any) -> HomeHost:
    """The host of `home`: its identity, its swarm keys, its roster gate."""
    roster = RosterHolder(home)
    keys = SwarmKeys.load(home)
    identity = load_identity(home)
    host = HearthHost(identity, lambda: keys.accepted(time.time()), roster.admits, **options)
    return HomeHost(host, roster, keys, identity)


def _libp2p_keypair(identity: Ed25519PrivateKey) -> KeyPair:
    seed = identity.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    return create_new_key_pair(seed)


class HearthHost:
    """A libp2p host admitted to one private network (current key set) and gated by
    `admit` on the authenticated peer id."""

    def __init__(
        self,
        identity: Ed25519PrivateKey,
        keys: Callable[[], list[bytes]],
        admit: Admit,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        upgrade_timeout: float = 5.0,
        max_handshake_failures: int = 0,
    ) -> None:
        install_protector()
        keypair = _libp2p_keypair(identity)
        self.liveness = Liveness()
        noise = GatedNoise(
            keypair,
            noise_privkey=create_x25519_key_pair().private_key,
            admit=admit,
            liveness=self.liveness,
        )
        config = ConnectionConfig(
            max_connections_per_peer=1,  # no happy-eyeballs wait (~250 ms per dial)
            inbound_upgrade_timeout=upgrade_timeout,
            outbound_upgrade_timeout=upgrade_timeout,
            dial_timeout=upgrade_timeout,
        )
        self.host: IHost = new_host(
            key_pair=keypair,
            sec_opt={NOISE_PROTOCOL_ID: noise},
            muxer_opt={TProtocol(YAMUX): Yamux},  # one muxer to propose: proposed optimistically
            connection_config=config,
            enable_mDNS=False,
        )
        # new_host builds a Swarm: psk, retry_config, auto_connector are on it, not on INetwork
        self._swarm = network = cast(Swarm, self.host.get_network())
        self.keyring = KeyRing(keys, max_failures=max_handshake_failures)
        # libp2p types psk as the key's hex str: its pnet hook, patched in pnet.py, takes a KeyRing
        network.psk = self.keyring  # type: ignore[assignment]
        network.retry_config = RetryConfig(max_retries=0)
        self.admit = admit
        self.max_frame = max_frame
        self.peer_id = str(self.host.get_id())
        self.worked: dict[str, str] = {}  # peer id → the address the last dial reached
        network.register_notifee(NewestConnectionWins())
        # py-libp2p runs Identify both ways on every new connection (a stream each, through
        # the relay too: ~40% of a relayed connect's CPU); Hearth dials by address and
        # reads nothing it learns. Identify requests from others are still answered.
        cast(BasicHost, self.host)._schedule_identify = _no_identify  # type: ignore[method-assign]
        pipeline_selection(cast(BasicHost, self.host), network)
        credit_streams(network)

    @contextlib.asynccontextmanager
    async def run(self, listen: list[str]) -> AsyncIterator[HearthHost]:
        """Listen on `listen` (multiaddrs) while the context is open."""
        with single_error():  # the host's nursery wraps what the body raises
            async with self.host.run(listen_addrs=[Multiaddr(a) for a in listen]):
                # py-libp2p's auto-connector redials every peer in the peerstore (revoked
                # ones and wrong-key ones included); Hearth dials only whom it means to.
                await self._swarm.auto_connector.stop()
                try:
                    yield self
                finally:  # what a stream wrote last (its close) still leaves
                    with trio.CancelScope(shield=True), trio.move_on_after(SEND_HELD_S):
                        await send_held()

    def addrs(self) -> list[str]:
        """Full multiaddrs of the listeners, ending in `/p2p/<peer id>`; a wildcard
        listener (0.0.0.0) is given as this machine's own addresses."""
        out: list[str] = []
        for addr in map(str, self.host.get_addrs()):
            if addr.startswith("/ip4/0.0.0.0/"):
                out += [addr.replace("/ip4/0.0.0.0/", f"/ip4/{ip}/", 1) for ip in local_ipv4()]
            else:
                out.append(addr)
        return out

    def handle(self, protocol: str, handler: StreamHandler, allow: Admit | None = None) -> None:
        """Serve `protocol`; a peer refused by `allow` (default: the gate) gets a reset."""
        check = allow or self.admit

        async def on_stream(stream: INetStream) -> None:
            frames = FrameStream(stream, self.max_frame)
            if not check(frames.peer_id):
                await frames.reset()
                return
            try:
                await handler(frames)
            except HearthError as exc:
                # the peer broke the protocol or went away: tell it if it is still there
                # (a peer that hung up, as every health probe does, is no news)
                level = logging.DEBUG if exc.code is ErrorCode.UNREACHABLE else logging.INFO
                log.log(level, "%s stream from %s ended: %s", protocol, frames.peer_id, exc.code)
                with contextlib.suppress(HearthError):
                    await frames.send(error_frame(exc))
            except Exception:
                trace = secrets.token_hex(4)
                log.exception("%s handler failed (trace %s)", protocol, trace)
                internal = HearthError(ErrorCode.INTERNAL, f"internal error (trace {trace})")
                with contextlib.suppress(HearthError):
                    await frames.send(error_frame(internal))
            finally:
                await frames.close()

        self.host.set_stream_handler(TProtocol(protocol), on_stream)

    def serve_only(self, protocols: set[str]) -> None:
        """Drop every stream handler but `protocols` (identify, ping and the rest)."""
        for protocol in list(self.host.get_mux().handlers):
            if protocol is not None and protocol not in protocols:
                self.host.remove_stream_handler(protocol)

    async def connect(
        self, peer_id: str, addrs: list[str], timeout: float = DEFAULT_CONNECT_TIMEOUT
    ) -> None:
        """Connect to `peer_id` at any of `addrs`; errors carry Hearth codes.

        Direct addresses get a head start; circuit addresses (through a relay) are
        tried once the direct dial has failed or `RELAY_HEAD_START_S` has passed, and
        the first path that works wins (the other attempt is cancelled). When `addrs`
        starts with a circuit (last-known-good first: a phone away from home), both go
        at once. A peer that refuses us directly is not asked again through a relay."""
        relayed = [a for a in addrs if is_circuit(a)]
        direct = [a for a in addrs if not is_circuit(a)]
        if not relayed:
            return await self._connect_direct(peer_id, direct, timeout)
        errors: list[HearthError] = []
        direct_over = trio.Event()
        won = False

        async def go_direct(scope: trio.CancelScope) -> None:
            nonlocal won
            try:
                await self._connect_direct(peer_id, direct, timeout)
                won = True
                scope.cancel()
            except HearthError as exc:
                errors.append(exc)
                if exc.code is ErrorCode.REFUSED:  # the peer itself said no: so would a relay
                    scope.cancel()
            finally:
                direct_over.set()

        async def go_relayed(scope: trio.CancelScope) -> None:
            nonlocal won
            if direct and not is_circuit(addrs[0]):
                with trio.move_on_after(RELAY_HEAD_START_S):
                    await direct_over.wait()
            for circuit in relayed:
                try:
                    await self._connect_relayed(peer_id, circuit, timeout)
                    won = True
                    scope.cancel()
                    return
                except HearthError as exc:
                    errors.append(exc)

        async with trio.open_nursery() as nursery:
            if direct:
                nursery.start_soon(go_direct, nursery.cancel_scope)
            nursery.start_soon(go_relayed, nursery.cancel_scope)
        if won:
            return
        refused = [e for e in errors if e.code is ErrorCode.REFUSED]
        first = refused[0] if refused else errors[0]
        raise HearthError(first.code, "; ".join(dict.fromkeys(e.message for e in errors)))

    async def _connect_direct(self, peer_id: str, addrs: list[str], timeout: float) -> None:
        """Dial the addresses one after another, in the given (last-known-good first)
        order: py-libp2p itself dials only one address per transport. Each but the
        last gets at most `PER_ADDRESS_S`, so a stale address that drops packets does
        not use up the whole timeout."""
        pid = ID.from_base58(peer_id)
        if not addrs:
            if self.host.get_network().get_connections(pid):
                return
            raise HearthError(ErrorCode.UNREACHABLE, f"no known address for {peer_id}")
        maddrs = list(dict.fromkeys(Multiaddr(a.split("/p2p/")[0]) for a in addrs))
        deadline = time.monotonic() + timeout
        errors: list[HearthError] = []
        other_swarm: list[Multiaddr] = []  # addresses where a node of another swarm key answered
        for i, maddr in enumerate(maddrs):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            started = time.monotonic()
            try:
                share = left if i == len(maddrs) - 1 else min(left, PER_ADDRESS_S)
                return await self._dial_one(peer_id, pid, maddr, share)
            except HearthError as exc:
                errors.append(exc)
                if self._key_mismatch(maddr, started):
                    other_swarm.append(maddr)
        if not errors:
            raise HearthError(
                ErrorCode.TIMED_OUT, f"connecting to {peer_id} took over {timeout:g} s"
            )
        if (stale := self._stale(peer_id, maddrs, errors, other_swarm)) is not None:
            raise stale
        for code in (ErrorCode.REFUSED, ErrorCode.TIMED_OUT):  # the most telling first
            if telling := [e for e in errors if e.code is code]:
                raise telling[0]
        if len(errors) > 1:
            raise HearthError(
                ErrorCode.UNREACHABLE,
                f"{peer_id}: connection refused at every known address (is it running?)",
            )
        raise errors[0]

    def _stale(
        self,
        peer_id: str,
        maddrs: list[Multiaddr],
        errors: list[HearthError],
        other_swarm: list[Multiaddr],
    ) -> HearthError | None:
        """When another swarm's node answered at some addresses but not at the one where
        the peer was last reached (the one it last worked at, else the first: the address
        book's last-known-good), that address's error: the peer is unreachable there, and
        the others are stale (a stopped home's port another swarm's node took), which
        pairing again would not mend."""
        worked = self.worked.get(peer_id, "").split("/p2p/")[0]
        good = next((m for m in maddrs if str(m) == worked), maddrs[0])
        if not other_swarm or good in other_swarm or good not in maddrs[: len(errors)]:
            return None
        error = errors[maddrs.index(good)]
        stale = ", ".join(str(m) for m in other_swarm)
        return HearthError(
            error.code,
            f"{error.message} (at {good}, where it was last reached); {stale} now answers "
            "as another swarm's node: a stale address",
        )

    async def _dial_one(self, peer_id: str, pid: ID, maddr: Multiaddr, timeout: float) -> None:
        with contextlib.suppress(Exception):
            self._swarm.unblock_peer(pid)
        self.host.get_peerstore().clear_addrs(pid)  # dial exactly this address
        started = time.monotonic()
        try:
            with trio.fail_after(timeout):
                await self.host.connect(PeerInfo(pid, [maddr]))
            self.worked[peer_id] = f"{maddr}/p2p/{peer_id}"
        except trio.TooSlowError as exc:
            raise HearthError(
                ErrorCode.TIMED_OUT, f"connecting to {peer_id} took over {timeout:g} s"
            ) from exc
        except Exception as exc:
            if self._key_mismatch(maddr, started):
                raise HearthError(
                    ErrorCode.REFUSED,
                    f"{peer_id}: swarm key mismatch suspected at {maddr}: another swarm's node "
                    "may hold this address now (the home moved or stopped), or this device "
                    "missed a key rotation after a revocation (then pair it again)",
                ) from exc
            raise classify_dial_error(peer_id, exc) from exc

    async def _connect_relayed(self, peer_id: str, circuit: str, timeout: float) -> None:
        """Through the relay of `circuit`, over the kept connection to it if there is one
        (a resident phone keeps it across home links). A kept connection can be dead
        without TCP knowing (the relay went silent): when the relay said nothing during a
        failed dial over it, it is closed, so the next dial opens a fresh one."""
        relay, relay_addr = relay_of(circuit)
        kept = self.connected(relay)
        if not kept:
            await self._connect_direct(relay, [relay_addr], timeout)
        started = time.monotonic()
        try:
            await self._through_relay(peer_id, circuit, relay, timeout)
        except HearthError:
            quiet = self.quiet_for(relay)
            if kept and (quiet is None or quiet >= time.monotonic() - started):
                await self.disconnect(relay)
            raise

    async def _through_relay(self, peer_id: str, circuit: str, relay: str, timeout: float) -> None:
        to_relay = self.host.get_network().get_connections(ID.from_base58(relay))
        try:
            with trio.fail_after(timeout):
                # a StampedConn, for keepalive (py-libp2p gives an outbound circuit no pnet hook)
                conn = await open_circuit(self.host, ID.from_base58(relay), ID.from_base58(peer_id))
                await self.host.upgrade_outbound_connection(conn, ID.from_base58(peer_id))
            self.worked[peer_id] = circuit
        except trio.TooSlowError as exc:
            raise HearthError(
                ErrorCode.TIMED_OUT, f"connecting to {peer_id} through relay {relay} timed out"
            ) from exc
        except Exception as exc:
            if _gate_closed(to_relay):
                raise gate_refusal(relay) from exc
            text = " | ".join(str(e) for e in _chain(exc))
            if "NO_RESERVATION" in text or "status code" in text:
                raise HearthError(
                    ErrorCode.UNREACHABLE,
                    f"relay {relay} holds no reservation for {peer_id} (is it running?)",
                ) from exc
            raise classify_dial_error(peer_id, exc) from exc

    def _key_mismatch(self, addr: Multiaddr, since: float) -> bool:
        try:
            host, port = addr.value_for_protocol("ip4"), int(addr.value_for_protocol("tcp"))
        except Exception:  # not an ip4/tcp address
            return False
        return self.keyring.mismatch_since(str(host), port, since)

    async def open(
        self, peer_id: str, protocol: str, addrs: list[str] | None = None
    ) -> FrameStream:
        """A new stream for `protocol` to `peer_id`, connecting first if needed. The
        protocol is proposed with the first message: a peer that does not serve it
        makes the first `receive` raise `protocol_error`."""
        pid = ID.from_base58(peer_id)
        if not self.host.get_network().get_connections(pid):
            await self.connect(peer_id, addrs or [])
        conns = self.host.get_network().get_connections(pid)
        try:  # proposed with the first message: a refusal comes with the first read
            stream = await self.host.new_stream(pid, [TProtocol(protocol)])
        except Exception as exc:
            if _gate_closed(conns):
                raise gate_refusal(peer_id) from exc
            raise classify_dial_error(peer_id, exc) from exc
        return FrameStream(stream, self.max_frame)

    async def disconnect(self, peer_id: str) -> None:
        """Close every connection to `peer_id`."""
        with contextlib.suppress(Exception):
            await self.host.disconnect(ID.from_base58(peer_id))

    def connected(self, peer_id: str) -> bool:
        return bool(self.host.get_network().get_connections(ID.from_base58(peer_id)))

    def quiet_for(self, peer_id: str) -> float | None:
        """Seconds since bytes last arrived from `peer_id` (None if never connected)."""
        last = self.liveness.last_rx(peer_id)
        return None if last is None else time.monotonic() - last


def _gate_closed(conns: Iterable[INetConn]) -> bool:
    """Whether one of `conns` never answered its muxer proposal: the peer's gate
    closed it right after Noise."""
    return any(unanswered(getattr(c.muxed_conn, "secured_conn", None)) for c in conns)


def _no_identify(peer_id: ID, *, reason: str) -> None:
    """Stands in for py-libp2p's automatic outbound Identify: see `HearthHost`."""


class NewestConnectionWins(INotifee):
    """A new connection from a peer closes its older ones that carry no stream. py-libp2p
    notices a connection the other side has dropped (a closed process, a circuit the
    relay let go of) only late, and until then it shadows the peer's new connection
    (new streams fail); an older connection with open streams (another session of
    the same device) is left alone."""

    async def connected(self, network: INetwork, conn: INetConn) -> None:
        peer = conn.muxed_conn.peer_id
        for old in list(network.get_connections(peer)):
            if old is not conn and not _busy(old):
                with contextlib.suppress(Exception):
                    await old.close()

    async def opened_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def closed_stream(self, network: INetwork, stream: INetStream) -> None:
        pass

    async def disconnected(self, network: INetwork, conn: INetConn) -> None:
        pass

    async def listen(self, network: INetwork, multiaddr: Multiaddr) -> None:
        pass

    async def listen_close(self, network: INetwork, multiaddr: Multiaddr) -> None:
        pass


def _busy(conn: INetConn) -> bool:
    try:
        return bool(conn.get_streams())
    except Exception:
        return False


def local_ipv4() -> list[str]:
    """This machine's IPv4 addresses, from its interfaces, loopback last (the host
    name often resolves to 127.0.1.1 only, which no other machine can dial)."""
    import socket

    import psutil

    found = {"127.0.0.1"}
    for addrs in psutil.net_if_addrs().values():
        found |= {a.address for a in addrs if a.family == socket.AF_INET}
    return sorted(found, key=lambda ip: (ip.startswith("127."), ip))


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, its causes and contexts, and the members of exception groups."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        todo.extend(x for x in (e.__cause__, e.__context__) if x is not None)
        if isinstance(e, BaseExceptionGroup):
            todo.extend(leaves(e))


def classify_dial_error(peer_id: str, exc: BaseException) -> HearthError:
    """Map whatever py-libp2p raised while dialling to a Hearth error code."""
    chain = list(_chain(exc))
    text = " | ".join(str(e) for e in chain).lower()
    if any(isinstance(e, HearthError) for e in chain):
        return next(e for e in chain if isinstance(e, HearthError))
    if any(isinstance(e, KeyMismatch) for e in chain) or "key mismatch" in text:
        return HearthError(ErrorCode.REFUSED, f"{peer_id}: swarm key mismatch suspected")
    if any(isinstance(e, NotAdmitted) for e in chain) or "not on the roster" in text:
        return HearthError(ErrorCode.REFUSED, f"{peer_id} is not on our roster")
    if "upgrade mux" in text or "muxer" in text:
        return gate_refusal(peer_id)
    if any(isinstance(e, trio.TooSlowError) for e in chain) or "timeout" in text:
        return HearthError(ErrorCode.TIMED_OUT, f"connecting to {peer_id} timed out")
    refused = (ConnectionRefusedError, OpenConnectionError, SwarmDialAllFailedError)
    if any(isinstance(e, refused) for e in chain) or "refused" in text:
        return HearthError(
            ErrorCode.UNREACHABLE,
            f"{peer_id}: connection refused at every known address (is it running?)",
        )
    why = next((e.strerror for e in chain if isinstance(e, OSError) and e.strerror), None)
    return HearthError(
        ErrorCode.UNREACHABLE, f"cannot reach {peer_id}: {why or 'the connection failed'}"
    )
