"""The swarm's commands as a new user meets them: a friend who ran `hearth-node init`
first can still join, the invite names the right command, a health probe is no news in
the node's log, and reasons name the cause without internals or the peer id twice."""

from __future__ import annotations

import json

from hearth.protocol.transport.host import classify_dial_error

from .nodes import cli, start_node


def test_friend_after_init_joins_and_probes_stay_out_of_the_log(tmp_path, processes) -> None:
    home, friend, phone = tmp_path / "home", tmp_path / "friend", tmp_path / "phone"
    assert cli("hearth-node", "init", "--name", "home", "--home", str(home)).returncode == 0
    log = tmp_path / "home.log"
    with log.open("w") as err:
        node = start_node(processes, home, stderr=err)
    peer_id = node.peer_id

    shown = cli("hearth-node", "invite", "--role", "friend", "--home", str(home))
    assert "hearth-node join -" in shown.stdout and "hearth pair" not in shown.stdout
    uri = json.loads(
        cli("hearth-node", "invite", "--role", "friend", "--json", "--home", str(home)).stdout
    )["uri"]
    assert cli("hearth-node", "init", "--name", "friend", "--home", str(friend)).returncode == 0
    joined = cli("hearth-node", "join", "-", "--json", "--home", str(friend), stdin=uri + "\n")
    assert joined.returncode == 0, joined.stdout + joined.stderr
    assert json.loads(joined.stdout)["founder"] == peer_id
    roster = json.loads(cli("hearth-node", "roster", "--json", "--home", str(home)).stdout)
    assert json.loads(joined.stdout)["peer_id"] in {m["peer_id"] for m in roster["members"]}

    cli("hearth", "init", "--home", str(phone))
    phone_uri = json.loads(cli("hearth-node", "invite", "--json", "--home", str(home)).stdout)
    assert cli("hearth", "pair", "-", "--home", str(phone), stdin=phone_uri["uri"]).returncode == 0
    for _ in range(2):
        status = json.loads(cli("hearth", "status", "--json", "--home", str(phone)).stdout)
        assert status["nodes"][0]["reachable"] is True
    assert "ended: unreachable" not in log.read_text()

    node.proc.terminate()
    node.proc.wait(timeout=30)
    down = json.loads(cli("hearth", "status", "--json", "--home", str(phone), check=False).stdout)
    reason = down["nodes"][0]["reason"]
    assert reason.startswith("unreachable") and peer_id not in reason


def test_a_dial_failure_names_the_cause_not_an_exception_class() -> None:
    error = classify_dial_error("12D3KooWpeer", ConnectionResetError(104, "Connection reset"))
    assert "ConnectionResetError" not in error.message and "Connection reset" in error.message
    bare = classify_dial_error("12D3KooWpeer", ConnectionError())
    assert "ConnectionError" not in bare.message and "connection failed" in bare.message
