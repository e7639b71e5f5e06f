"""Interop with js-libp2p's private network (`@libp2p/pnet`): the spec's XSalsa20 pnet.

The js peer runs under node with the packages of `tests/js/package.json`, which
`deploy/bootstrap.sh test` installs; without node or those packages the test skips.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import trio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hearth.protocol.transport.host import HearthHost
from hearth.protocol.transport.keys import SwarmKeys
from hearth.protocol.wire.frames import decode, encode
from hearth.protocol.wire.messages import Health, HealthRequest, Progress

from .installed import missing

JS = Path(__file__).parent / "js"
pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (JS / "node_modules" / "libp2p").is_dir(),
    reason=missing("node or the js-libp2p packages (run: cd tests/js && npm install)"),
)


def js_peer(processes, *args: str):
    return processes.spawn("node", "--import", "./polyfill.mjs", "peer.mjs", *args, cwd=JS)


@pytest.fixture
def swarm_key(tmp_path) -> tuple[Path, bytes]:
    keys = SwarmKeys.new()
    keys.save(tmp_path)
    return tmp_path / "swarm.key", keys.current


def test_hearth_dials_a_js_libp2p_peer_in_the_same_private_network(processes, swarm_key) -> None:
    key_file, key = swarm_key
    listener = js_peer(processes, "listen", str(key_file))
    info = json.loads(listener.stdout.readline())
    host = HearthHost(Ed25519PrivateKey.generate(), lambda: [key], {info["peer_id"]}.__contains__)
    frame = Progress(request_id="interop", stage="pnet+noise+yamux")

    async def exchange() -> object:
        async with host.run(["/ip4/127.0.0.1/tcp/0"]):
            stream = await host.open(info["peer_id"], "/hearth/echo/1", info["addrs"])
            await stream.send(frame)
            return await stream.receive()

    assert trio.run(exchange) == frame


def _serve_health_to_js(processes, key: bytes, key_file: Path) -> dict:
    """A Hearth host serving /hearth/health/1; a js peer dials it with `key_file`."""
    identity = Ed25519PrivateKey.generate()
    admitted: set[str] = set()
    host = HearthHost(identity, lambda: [key], lambda peer: True)

    async def health(stream) -> None:
        admitted.add(stream.peer_id)
        await stream.receive()
        await stream.send(Health(peer_id=host.peer_id, name="hearth"))

    host.handle("/hearth/health/1", health)

    async def scenario() -> dict:
        async with host.run(["/ip4/127.0.0.1/tcp/0"]):
            dialer = js_peer(
                processes,
                "dial",
                str(key_file),
                host.addrs()[0],
                "/hearth/health/1",
                encode(HealthRequest()).hex(),
            )
            with trio.fail_after(30):
                while dialer.poll() is None:
                    await trio.sleep(0.05)
            return json.loads(dialer.stdout.read().splitlines()[-1])

    return trio.run(scenario)


def test_a_js_libp2p_peer_dials_hearth_and_negotiates_a_protocol(processes, swarm_key) -> None:
    key_file, key = swarm_key
    result = _serve_health_to_js(processes, key, key_file)
    assert "response" in result, result
    reply = decode(bytes.fromhex(result["response"]))
    assert isinstance(reply, Health) and reply.name == "hearth"


def test_a_js_libp2p_peer_with_another_key_is_refused(processes, swarm_key, tmp_path) -> None:
    _, key = swarm_key
    other = tmp_path / "other"
    SwarmKeys.new().save(other)
    result = _serve_health_to_js(processes, key, other / "swarm.key")
    assert "error" in result and "response" not in result
