"""`hearth-node status --json` keeps its shape (DESIGN, "JSON shapes": fields may be
added, never removed or renamed), running and stopped: every key path the status had
before it became a typed value (`node/status.py`) is still there."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest

from .nodes import cli, last_json, pair_phone, start_node

pytestmark = pytest.mark.timeout(180)

# key paths of `hearth-node status --json` before the typed status (main at fd2a4b6);
# `[]` is each item of a list, `*` each value of a map keyed by data (relay, reason)
RUNNING_BEFORE = {
    "peer_id", "addrs", "running", "model", "model.name", "model.quant", "model.n_ctx",
    "model.backend", "sessions", "served_for_others", "queue", "admission",
    "admission.admitted", "admission.busy", "admission.queue_wait_p99_ms", "search",
    "search.epoch", "search.known_nodes", "search.equivocating", "search.dropped",
    "search.served", "search.refused_announcements", "search.next_hop_streams",
    "search.next_hop_streams.opened", "search.next_hop_streams.kept", "handshakes",
    "handshakes.main", "handshakes.main.failed", "handshakes.main.remembered",
    "handshakes.pairing", "handshakes.pairing.failed", "handshakes.pairing.throttled",
    "handshakes.pairing.remembered", "roles", "relays", "peers", "peers[].peer_id",
    "peers[].name", "peers[].roles", "peers[].reachable", "peers[].reason",
}  # fmt: skip
STOPPED_BEFORE = {
    "peer_id", "addrs", "running", "model", "sessions", "served_for_others", "queue",
    "roles", "peers",
}  # fmt: skip
MAPS = {"search.dropped", "search.served", "search.refused_announcements"}


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key path in a JSON value (a map keyed by data counts as one leaf)."""
    if isinstance(value, list):
        return {p for item in value for p in key_paths(item, f"{prefix}[]")}
    if not isinstance(value, dict) or prefix in MAPS:
        return set()
    if prefix == "relays":
        return {p for item in value.values() for p in key_paths(item, "relays.*")}
    paths = set()
    for key, item in value.items():
        path = f"{prefix}.{key}" if prefix else key
        paths |= {path} | key_paths(item, path)
    return paths


def test_status_json_keeps_every_key_running_and_stopped(processes, tmp_path, tiny_models):
    node = start_node(processes, tmp_path / "node", "--model", str(tiny_models[1]))
    pair_phone(tmp_path / "phone", node.invite())
    running = node.status()
    assert running["running"] is True and running["peers"]
    assert key_paths(running) >= RUNNING_BEFORE
    node.proc.terminate()
    node.proc.wait(timeout=30)
    stopped = last_json(cli("hearth-node", "status", "--json", "--home", str(node.home)))
    assert stopped["running"] is False and stopped["peer_id"] == running["peer_id"]
    assert key_paths(stopped) >= STOPPED_BEFORE
    assert stopped["model"] is None and stopped["peers"] == []


@pytest.mark.parametrize("reply", [b'{"peer_id": 5}\n', b"not json\n", b""])
def test_a_control_reply_that_is_no_status_is_a_protocol_error(tmp_path, reply: bytes) -> None:
    """Whatever answers on `control.sock` (before: any JSON object was printed as the
    node's status, and a reply that was no JSON crashed the command)."""
    home = tmp_path / "node"
    cli("hearth-node", "init", "--home", str(home))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(home / "control.sock"))
    listener.listen(1)

    def answer() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(reply)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        result = cli("hearth-node", "status", "--json", "--home", str(home), check=False)
    finally:
        thread.join(timeout=10)
        listener.close()
    assert result.returncode == 10, result.stdout + result.stderr
    assert last_json(result)["error"]["code"] == "protocol_error"
