"""The swarm's commands as a new user meets them: a friend who ran `hearth-node init`
first can still join, the invite names the right command, a health probe is no news in
the node's log, and reasons name the cause without internals or the peer id twice."""

from __future__ import annotations

import json
import os
import subprocess

from hearth.protocol.transport.host import classify_dial_error

from .nodes import BIN, wait_ready


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HEARTH_NO_MDNS": "1"},
    )


def test_friend_after_init_joins_and_probes_stay_out_of_the_log(tmp_path, processes) -> None:
    home, friend, phone = tmp_path / "home", tmp_path / "friend", tmp_path / "phone"
    assert run("hearth-node", "init", "--name", "home", "--home", str(home)).returncode == 0
    log = tmp_path / "home.log"
    with log.open("w") as err:
        node = processes.spawn(
            str(BIN / "hearth-node"), "serve", "--home", str(home), "--no-mdns",
            "--listen", "/ip4/127.0.0.1/tcp/0", "--ready-file", str(tmp_path / "ready.json"),
            stderr=err,
        )  # fmt: skip
    peer_id = wait_ready(node, tmp_path / "ready.json")["peer_id"]

    shown = run("hearth-node", "invite", "--role", "friend", "--home", str(home))
    assert "hearth-node join -" in shown.stdout and "hearth pair" not in shown.stdout
    uri = json.loads(
        run("hearth-node", "invite", "--role", "friend", "--json", "--home", str(home)).stdout
    )["uri"]
    assert run("hearth-node", "init", "--name", "friend", "--home", str(friend)).returncode == 0
    joined = run("hearth-node", "join", "-", "--json", "--home", str(friend), stdin=uri + "\n")
    assert joined.returncode == 0, joined.stdout + joined.stderr
    assert json.loads(joined.stdout)["founder"] == peer_id
    roster = json.loads(run("hearth-node", "roster", "--json", "--home", str(home)).stdout)
    assert json.loads(joined.stdout)["peer_id"] in {m["peer_id"] for m in roster["members"]}

    run("hearth", "init", "--home", str(phone))
    phone_uri = json.loads(run("hearth-node", "invite", "--json", "--home", str(home)).stdout)
    assert run("hearth", "pair", "-", "--home", str(phone), stdin=phone_uri["uri"]).returncode == 0
    for _ in range(2):
        status = json.loads(run("hearth", "status", "--json", "--home", str(phone)).stdout)
        assert status["nodes"][0]["reachable"] is True
    assert "ended: unreachable" not in log.read_text()

    node.terminate()
    node.wait(timeout=30)
    down = json.loads(run("hearth", "status", "--json", "--home", str(phone)).stdout)
    reason = down["nodes"][0]["reason"]
    assert reason.startswith("unreachable") and peer_id not in reason


def test_a_dial_failure_names_the_cause_not_an_exception_class() -> None:
    error = classify_dial_error("12D3KooWpeer", ConnectionResetError(104, "Connection reset"))
    assert "ConnectionResetError" not in error.message and "Connection reset" in error.message
    bare = classify_dial_error("12D3KooWpeer", ConnectionError())
    assert "ConnectionError" not in bare.message and "connection failed" in bare.message
