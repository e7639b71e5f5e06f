"""Two or more real processes on loopback, one private swarm (pnet + Noise + Yamux + gate)."""

from __future__ import annotations

import json
import os
import secrets
import signal

import pytest
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hearth.protocol.transport.host import HearthHost
from hearth.protocol.transport.probe import HEALTH_PROTOCOL, lay_out_homes
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.frames import PREFIX
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import Health, HealthRequest

from .conftest import last_json
from .nodes import wait_ready


@pytest.fixture
def swarm(tmp_path, processes):
    """A serving node process and the homes of the phone, a stranger and an outsider."""
    homes = lay_out_homes(tmp_path)
    server = processes.probe(
        "serve", str(homes["node"]), "--ready-file", str(tmp_path / "ready.json")
    )
    ready = wait_ready(server, tmp_path / "ready.json", 30)
    return homes, server, ready["peer_id"], ready["addrs"][0]


def ping(processes, home, peer_id, addr, *extra):
    out, _ = processes.probe("ping", str(home), peer_id, addr, *extra).communicate(timeout=60)
    return last_json(out)


def test_member_exchanges_typed_frames_with_the_node(swarm, processes) -> None:
    homes, _, peer_id, addr = swarm
    event = ping(processes, homes["phone"], peer_id, addr, "--count", "5")
    assert event["event"] == "pong" and event["count"] == 5


def test_wrong_swarm_key_is_refused_before_the_connect_deadline(swarm, processes) -> None:
    homes, _, peer_id, addr = swarm
    # with a 2 s deadline, a slow failure would be timed_out, not refused
    event = ping(processes, homes["stranger"], peer_id, addr, "--timeout", "2")
    assert event["code"] == ErrorCode.REFUSED
    assert "key mismatch" in event["message"]


def test_peer_with_the_key_but_off_the_roster_gets_no_stream(swarm, processes) -> None:
    homes, _, peer_id, addr = swarm
    event = ping(processes, homes["outsider"], peer_id, addr, "--timeout", "2")
    assert event["code"] == ErrorCode.REFUSED
    # and the node still serves its member afterwards
    assert ping(processes, homes["phone"], peer_id, addr)["event"] == "pong"


@pytest.mark.timing
def test_kill_9_of_the_node_is_noticed_within_the_keepalive_bound(swarm, processes) -> None:
    homes, server, peer_id, addr = swarm
    watcher = processes.probe("watch", str(homes["phone"]), peer_id, addr, "--bound", "3")
    assert json.loads(watcher.stdout.readline())["event"] == "watching"
    os.kill(server.pid, signal.SIGKILL)
    dead = json.loads(watcher.stdout.readline())
    assert dead["event"] == "dead" and dead["quiet_s"] <= 3.0


def test_malformed_frames_get_an_error_frame_and_the_node_keeps_serving(swarm, processes) -> None:
    homes, _, peer_id, addr = swarm
    from hearth.protocol.transport.host import host_for_home

    async def misbehave() -> list:
        host = host_for_home(homes["phone"]).host
        async with host.run(["/ip4/127.0.0.1/tcp/0"]):
            seen = []
            for garbage in (PREFIX.pack(5) + b"\xc1\xc1\xc1\xc1\xc1", PREFIX.pack(1 << 30)):
                stream = await host.open(peer_id, HEALTH_PROTOCOL, [addr])
                await stream.write(garbage)
                with pytest.raises(HearthError) as info:
                    await stream.receive()
                seen.append(info.value.code)
            return seen

    assert trio.run(misbehave) == [ErrorCode.PROTOCOL_ERROR, ErrorCode.PROTOCOL_ERROR]
    assert ping(processes, homes["phone"], peer_id, addr)["event"] == "pong"


def test_listener_accepts_the_previous_key_only_during_the_grace_window() -> None:
    old, new = secrets.token_bytes(32), secrets.token_bytes(32)
    keys = [Ed25519PrivateKey.generate() for _ in range(3)]
    ids = {peer_id_of(k) for k in keys}
    accepted = [new, old]
    node = HearthHost(keys[0], lambda: list(accepted), ids.__contains__)

    async def health(stream) -> None:
        await stream.receive()
        await stream.send(Health(peer_id=node.peer_id))

    node.handle(HEALTH_PROTOCOL, health)

    async def scenario() -> list[str]:
        outcomes = []
        async with node.run(["/ip4/127.0.0.1/tcp/0"]):
            for phase in ("grace", "after"):
                if phase == "after":
                    accepted.remove(old)
                for key, swarm_key in ((keys[1], old), (keys[2], new)):
                    dialer = HearthHost(key, lambda k=swarm_key: [k], ids.__contains__)
                    async with dialer.run(["/ip4/127.0.0.1/tcp/0"]):
                        try:
                            stream = await dialer.open(node.peer_id, HEALTH_PROTOCOL, node.addrs())
                            await stream.send(HealthRequest())
                            await stream.receive()
                            outcomes.append("ok")
                        except HearthError as exc:
                            outcomes.append(exc.code.value)
        return outcomes

    assert trio.run(scenario) == ["ok", "ok", "refused", "ok"]


def test_a_stale_address_another_swarm_took_does_not_ask_to_pair_again(swarm) -> None:
    """The phone reached its home, which then stopped (killed); the address book also
    holds an older address of the home, which another swarm's node now listens on (listed
    first). Dialing both, the phone says the home is unreachable where it was last
    reached and that the other address answers as another swarm's node, not "swarm key
    mismatch: pair it again" (a refusal, which also stops the fallback to mDNS)."""
    from hearth.protocol.transport.host import host_for_home

    homes, server, peer_id, addr = swarm
    phone = host_for_home(homes["phone"]).host
    theirs = secrets.token_bytes(32)
    other = HearthHost(Ed25519PrivateKey.generate(), lambda: [theirs], lambda _: True)

    async def scenario() -> HearthError:
        async with phone.run(["/ip4/127.0.0.1/tcp/0"]):
            await phone.connect(peer_id, [addr])
            os.kill(server.pid, signal.SIGKILL)
            await trio.to_thread.run_sync(server.wait)
            await phone.disconnect(peer_id)
            async with other.run(["/ip4/127.0.0.1/tcp/0"]):
                with pytest.raises(HearthError) as info:
                    await phone.connect(peer_id, [*other.addrs(), addr], timeout=10)
        return info.value

    error = trio.run(scenario)
    assert error.code is ErrorCode.UNREACHABLE, error.message
    assert "pair" not in error.message and "last reached" in error.message
    assert "another swarm's node: a stale address" in error.message
