"""The node survives whatever a local client or a peer sends: the control socket, the
pairing listener, onion-key announcements, handshake-failure memory. After each
hostile input a well-behaved phone is still served by the same daemon."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import time

import pytest
import trio

from hearth.node.control import CONTROL_SOCKET, MAX_CLIENTS, MAX_LINE
from hearth.protocol.transport.pnet import FAILURE_WINDOW_S, MAX_REMEMBERED, KeyRing
from hearth.protocol.wire.invite import parse_invite

from .nodes import RunningNode, cli, pair_phone, start_node, wait_until
from .test_node import plan, request
from .test_swarm import node_json, subprocess_join


@pytest.fixture
def node(processes, tmp_path, tiny_models) -> RunningNode:
    return start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))


def served(node: RunningNode, phone) -> None:  # type: ignore[no-untyped-def]
    """The daemon is up, answers `status`, and plans for a well-behaved phone."""
    assert node.proc.poll() is None
    assert node.status()["running"] is True
    answer = request(f"ok-{time.monotonic_ns()}").model_copy(update={"tool_choice": "none"})
    outcome = plan(phone, node, answer)
    assert outcome.final is not None


def control(node: RunningNode, line: bytes) -> dict:
    """Send `line` on the control socket as a local client would; the reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(node.home / CONTROL_SOCKET))
        sock.sendall(line)
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    return json.loads(data)


MALFORMED = [
    b"[]\n",
    b"garbage\n",
    b"null\n",
    b"\xff\xfe\x00\n",
    b'{"op": 5}\n',
    b"{}\n",
    b'{"op": "invite", "ttl": "soon"}\n',
    b'{"op": "invite", "ttl": 1e300}\n',  # past 7 days
    b'{"op": "grant", "peer": ["x"], "role": "relay"}\n',
    b'{"op": "revoke"}\n',
    b'{"op": "status", "extra": 1}\n',
    b'{"op": "status"',  # no newline, then the client stops writing
]


def test_malformed_control_requests_get_typed_errors_and_the_daemon_keeps_serving(
    node, tmp_path
) -> None:
    phone = pair_phone(tmp_path / "phone", node.invite())
    for line in MALFORMED:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(node.home / CONTROL_SOCKET))
            sock.sendall(line)
            sock.shutdown(socket.SHUT_WR)
            reply = json.loads(sock.makefile("rb").readline())
        assert reply["error"]["code"] == "invalid_input", (line, reply)
        assert node.proc.poll() is None, line
    oversize = control(node, b'{"op": "status", "pad": "' + b"x" * (MAX_LINE + 10))
    assert oversize["error"]["code"] == "invalid_input"
    assert "control request over" in oversize["error"]["message"]
    served(node, phone)


def test_control_clients_that_hang_up_or_stall_cost_nothing(node, tmp_path) -> None:
    phone = pair_phone(tmp_path / "phone", node.invite())
    for reset in (False, True) * 10:  # gone before the reply: a close, or a reset
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(node.home / CONTROL_SOCKET))
        sock.sendall(b'{"op": "status"}\n')
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    assert node.proc.poll() is None
    stalled = []
    try:  # clients that connect and say nothing: the rest are told `busy`, then served
        for _ in range(MAX_CLIENTS):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(node.home / CONTROL_SOCKET))
            stalled.append(sock)
        busy = wait_until(
            lambda: (r := control(node, b'{"op": "status"}\n')).get("error") and r,
            "a busy answer while every slot is held",
        )
        assert busy["error"]["code"] == "busy"
    finally:
        for sock in stalled:
            sock.close()
    assert wait_until(lambda: "peer_id" in control(node, b'{"op": "status"}\n'), "served again")
    served(node, phone)


def test_five_garbage_handshakes_from_the_owners_address_do_not_spoil_a_live_invite(
    node, tmp_path
) -> None:
    uri = node.invite()
    addr = next(a for a in parse_invite(uri).addrs if a.startswith("/ip4/127.0.0.1/"))
    port = int(addr.split("/tcp/")[1].split("/")[0])
    for _ in range(6):  # one more than the failures allowed per minute from 127.0.0.1
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(os.urandom(24 + 20))  # a nonce and a header under no live key
            with contextlib.suppress(ConnectionResetError):
                while sock.recv(4096):  # until the listener closes on us
                    pass
    phone = pair_phone(tmp_path / "phone", uri)  # the correct token still gets in
    pairing = node.status()["handshakes"]["pairing"]
    assert pairing["failed"] >= 6 and pairing["throttled"] >= 1
    served(node, phone)


def test_failed_handshake_memory_is_bounded_and_expires() -> None:
    now = [1000.0]
    ring = KeyRing(lambda: [bytes(32)], max_failures=5, clock=lambda: now[0])
    for i in range(MAX_REMEMBERED * 3):  # many addresses, many ports
        ring.record_mismatch((f"10.{i // 65536}.{i // 256 % 256}.{i % 256}", 40000 + i))
        now[0] += 0.001
    assert len(ring.mismatches) <= MAX_REMEMBERED and ring.remembered() <= 2 * MAX_REMEMBERED
    assert ring.failed == MAX_REMEMBERED * 3  # each one counted
    assert ring.throttled(("10.0.11.255", 1)) is False  # one failure is not throttled
    for _ in range(5):
        ring.record_mismatch(("192.0.2.1", 1))
    assert ring.throttled(("192.0.2.1", 2))
    now[0] += FAILURE_WINDOW_S + 1
    assert ring.remembered() == 0 and not ring.throttled(("192.0.2.1", 2))


def test_failed_handshakes_on_the_main_listener_are_counted(node, tmp_path) -> None:
    phone = pair_phone(tmp_path / "phone", node.invite())
    addr = next(a for a in node.addrs if a.startswith("/ip4/127.0.0.1/"))
    port = int(addr.split("/tcp/")[1].split("/")[0])
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(os.urandom(44))
            while sock.recv(4096):
                pass
    main = node.status()["handshakes"]["main"]
    assert main["failed"] >= 20 and 1 <= main["remembered"] <= MAX_REMEMBERED
    served(node, phone)


def test_a_friend_flooding_its_own_onion_keys_is_bounded_and_search_keeps_working(
    processes, tmp_path, tiny_models
) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from libp2p.peer.id import ID

    from hearth.protocol.transport.host import host_for_home
    from hearth.protocol.wire.errors import ErrorCode, HearthError
    from hearth.protocol.wire.identity import peer_id_of
    from hearth.protocol.wire.messages import OnionKeys, SearchPacket
    from hearth.search.onion import Directory, OnionAnnouncement, announce
    from hearth.search.packets import Hop, build
    from hearth.search.route import SEARCH_PROTOCOL, hop_of, pull_directory

    home = start_node(processes, tmp_path / "home", "--model", str(tiny_models[0]))
    node_json("roster", "grant", home.peer_id, "search-relay", "--home", str(home.home))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bread.md").write_text("# Sourdough\nBake bread with a starter.")
    subprocess_join(tmp_path / "exit", home.invite("--role", "friend", "--grant", "search-exit"))
    node_json("index", "add", str(docs), "--home", str(tmp_path / "exit"))
    start_node(processes, tmp_path / "exit")
    flooder = tmp_path / "flooder"  # a friend with a search role, and no daemon
    subprocess_join(flooder, home.invite("--role", "friend", "--grant", "search-relay"))
    phone = tmp_path / "phone"
    cli("hearth", "init", "--home", str(phone))
    code = cli("hearth", "pair", str(home.invite()), "--home", str(phone)).returncode
    assert code == 0
    wait_until(lambda: len(home.status()["search"]["known_nodes"]) == 2, "home's and exit's keys")

    async def flood() -> None:
        host, roster, _, identity = host_for_home(flooder)
        now = time.time()
        signed = [
            announce(
                identity,
                OnionAnnouncement(
                    peer_id=host.peer_id, key=os.urandom(32), epoch=epoch, expires=now + 600
                ),
            )
            for epoch in [*range(1, 258), 1]  # 257 epochs, then the first one again
        ]
        async with host.run([]):
            for batch in (signed[:200], signed[200:]):
                stream = await host.open(home.peer_id, SEARCH_PROTOCOL, home.addrs)
                await stream.send(OnionKeys(announcements=batch))
                await stream.close()
            directory = Directory()  # and a packet for the home to relay to a stranger
            await pull_directory(host, home.peer_id, directory, roster.roster)
            stranger = ID.from_base58(peer_id_of(Ed25519PrivateKey.generate())).to_bytes()
            path = [hop_of(directory.usable(roster.roster, now)[home.peer_id])]
            packet, _ = build("q", [*path, Hop(stranger, os.urandom(32))], int(now) + 60)
            stream = await host.open(home.peer_id, SEARCH_PROTOCOL, home.addrs)
            await stream.send(SearchPacket(data=packet))
            with pytest.raises(HearthError) as dropped:
                await stream.receive()
            assert dropped.value.code is ErrorCode.PROTOCOL_ERROR

    trio.run(flood)
    assert home.status()["search"]["dropped"] == {"next_hop_not_a_search_member": 1}
    search = wait_until(
        lambda: (s := home.status()["search"])["refused_announcements"] and s,
        "the stale announcement refused",
    )
    assert search["refused_announcements"].get("stale_epoch") == 1
    assert len(search["known_nodes"]) == 3  # the flooder is known, once
    result = cli("hearth", "search", "sourdough", "--json", "--home", str(phone), check=False)
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert result.returncode == 0, out  # every search failed `internal` before
    assert out["results"][0]["title"] == "Sourdough"


def test_onion_directory_keeps_two_epochs_per_node_and_answers_within_a_message() -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from hearth.protocol.wire.identity import peer_id_of
    from hearth.protocol.wire.messages import MAX_ANNOUNCEMENTS, OnionKeys
    from hearth.protocol.wire.roster import Member, Role, Roster
    from hearth.search.onion import Directory, OnionAnnouncement, Refusal, announce

    now = time.time()
    nodes = [Ed25519PrivateKey.generate() for _ in range(MAX_ANNOUNCEMENTS)]
    roster = Roster(
        version=1,
        founder=peer_id_of(nodes[0]),
        issued_at=now,
        not_after=now + 99,
        members=tuple(
            Member(peer_id=peer_id_of(n), roles=frozenset({Role.SEARCH_RELAY})) for n in nodes
        ),
    )
    directory = Directory()
    for node in nodes:
        for epoch in (1, 2, 3):
            announcement = OnionAnnouncement(
                peer_id=peer_id_of(node), key=os.urandom(32), epoch=epoch, expires=now + 60
            )
            assert directory.add(announce(node, announcement), roster, now)
    assert all(set(epochs) == {2, 3} for epochs in directory.known.values())
    late = OnionAnnouncement(
        peer_id=peer_id_of(nodes[1]), key=os.urandom(32), epoch=9, expires=now + 10**6
    )
    assert not directory.add(announce(nodes[1], late), roster, now)
    assert directory.refused == {Refusal.EXPIRES_TOO_LATE: 1}
    held = directory.all(now)
    OnionKeys(announcements=held)  # fits one message: every node's newest epoch
    assert len(held) == MAX_ANNOUNCEMENTS
    assert {a.peer_id for a in held} == {peer_id_of(n) for n in nodes}


def test_replay_tags_are_kept_only_until_their_packets_expire() -> None:
    from hearth.search.onion import MAX_PACKET_TTL_S, EpochKeys
    from hearth.search.packets import PEER_ID_BYTES, Drop, Dropped, Hop, build, raw_public

    now = time.time()
    keys = EpochKeys(now)
    path = [Hop(bytes(PEER_ID_BYTES), raw_public(keys.current.key))]
    with pytest.raises(Dropped) as far:
        keys.peel(build("q", path, int(now) + MAX_PACKET_TTL_S + 60)[0], now)
    assert far.value.reason is Drop.EXPIRES_TOO_LATE
    keys.peel(build("q", path, int(now) + 60)[0], now)
    assert list(keys.current.seen.values()) == [int(now) + 60]


def test_metrics_survive_a_client_that_hangs_up(processes, tmp_path, tiny_models) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    node = start_node(
        processes, tmp_path / "node", "--model", str(tiny_models[0]), "--metrics-port", str(port)
    )
    phone = pair_phone(tmp_path / "phone", node.invite())
    for _ in range(10):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # gone before the request, with a reset
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        body = b""
        while chunk := sock.recv(65536):
            body += chunk
    assert b"hearth_onion_announcements_refused_total 0" in body
    assert b"hearth_handshakes_failed_total" in body
    served(node, phone)
