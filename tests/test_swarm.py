"""Membership across real processes: revocation with key rotation, roster sync, friends."""

from __future__ import annotations

import json
import time

import pytest
import trio

from hearth.protocol.transport.keys import SwarmKeys
from hearth.protocol.transport.rostersync import ROSTER_PROTOCOL
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import RosterUpdate

from .nodes import BIN, cli, pair_phone, start_node, wait_until
from .test_companion import hearth


def node_json(*args: str) -> dict:
    return json.loads(cli("hearth-node", *args, "--json").stdout)


def test_revocation_cuts_the_device_off_and_members_keep_working(
    processes, tmp_path, tiny_models
) -> None:
    node = start_node(  # a grace window that a loaded machine's CLI start-ups fit in
        processes, tmp_path / "node", "--model", str(tiny_models[0]), config="key_grace_s = 20\n"
    )
    homes = {}
    for name in ("a", "b", "c"):
        homes[name] = tmp_path / name
        hearth("init", "--json", "--home", str(homes[name]))
        code, out = hearth(
            "pair", "-", "--json", "--home", str(homes[name]), stdin=node.invite() + "\n"
        )
        assert code == 0
    from hearth.protocol.transport.keys import load_identity
    from hearth.protocol.wire.identity import peer_id_of

    from .nodes import Phone

    b_id = peer_id_of(load_identity(homes["b"]))
    old_key = SwarmKeys.load(homes["a"]).current
    phone_b = Phone(homes["b"])  # the phone to revoke, connected at the time

    async def revoke_while_connected() -> tuple[dict, bool]:
        host = phone_b.host()
        async with host.run([]):
            await host.connect(node.peer_id, node.addrs)
            assert host.connected(node.peer_id)
            reply = await trio.to_thread.run_sync(
                lambda: node_json("revoke", b_id, "--home", str(node.home))
            )
            for _ in range(100):  # its open connection is closed (bounded wait)
                if not host.connected(node.peer_id):
                    break
                await trio.sleep(0.02)
            return reply, host.connected(node.peer_id)

    reply, still_connected = trio.run(revoke_while_connected)
    assert not still_connected and reply["key_id"] == 2
    code, out = hearth(  # first, while the grace window is surely open
        "ask", "note milk", "--route", "remote", "--no", "--json", "--home", str(homes["a"])
    )
    assert code == 0, out
    assert SwarmKeys.load(homes["a"]).current != old_key  # caught up during the grace window
    roster = node_json("roster", "--home", str(node.home))
    assert b_id not in {m["peer_id"] for m in roster["members"]}

    code, out = hearth("ask", "note milk", "--route", "remote", "--json", "--home", str(homes["b"]))
    assert code == 4 and out["error"]["code"] == "refused"

    # the grace window passes (however long the steps above took); c was offline all along
    time.sleep(max(0.0, reply["previous_key_valid_until"] - time.time()) + 0.5)
    code, out = hearth("ask", "note milk", "--route", "remote", "--json", "--home", str(homes["c"]))
    assert code == 4 and "pair it again" in out["error"]["message"]
    code, out = hearth(
        "ask", "note milk", "--route", "remote", "--no", "--json", "--home", str(homes["a"])
    )
    assert code == 0, out


def test_a_friend_joins_and_every_roster_change_reaches_it(processes, tmp_path) -> None:
    founder = start_node(processes, tmp_path / "home")
    uri = founder.invite("--role", "friend", "--grant", "relay,search-exit")
    joined = json.loads(subprocess_join(tmp_path / "friend", uri))
    assert joined["roles"] == ["relay", "search-exit"]
    friend = start_node(processes, tmp_path / "friend")
    for _ in range(100):  # the friend's daemon connects (pull on start)
        if any(p["reachable"] for p in founder.status()["peers"]):
            break
        time.sleep(0.05)
    reply = node_json("roster", "grant", joined["peer_id"], "planner", "--home", str(founder.home))
    assert joined["peer_id"] in reply["pushed_to"]
    theirs = node_json("roster", "--home", str(friend.home))
    ours = node_json("roster", "--home", str(founder.home))
    assert theirs["version"] == ours["version"] == reply["version"]
    member = next(m for m in theirs["members"] if m["peer_id"] == joined["peer_id"])
    assert member["roles"] == ["planner", "relay", "search-exit"]


def subprocess_join(home, uri: str) -> str:
    import subprocess

    return subprocess.run(
        [str(BIN / "hearth-node"), "join", "-", "--json", "--home", str(home)],
        input=uri + "\n",
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def test_only_the_founder_may_push_a_roster(processes, tmp_path) -> None:
    node = start_node(processes, tmp_path / "node")
    phone = pair_phone(tmp_path / "phone", node.invite())
    from hearth.protocol.transport.membership import RosterHolder

    signed = RosterHolder(phone.home).signed

    async def push() -> HearthError:
        host = phone.host()
        async with host.run([]):
            stream = await host.open(node.peer_id, ROSTER_PROTOCOL, node.addrs)
            await stream.send(RosterUpdate(roster=signed))
            with pytest.raises(HearthError) as info:
                await stream.receive()
            return info.value

    assert trio.run(push).code is ErrorCode.REFUSED


def test_three_nodes_converge_after_concurrent_changes(processes, tmp_path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    founder = start_node(processes, tmp_path / "home")
    friends = []
    for name in ("a", "b"):
        uri = founder.invite("--role", "friend", "--grant", "relay")
        joined = json.loads(subprocess_join(tmp_path / name, uri))
        friends.append((joined["peer_id"], start_node(processes, tmp_path / name)))
    (a, node_a), (b, node_b) = friends
    wait_until(lambda: all(p["reachable"] for p in founder.status()["peers"]), "friends connect")
    home = str(founder.home)
    changes = [
        ("roster", "grant", a, "planner", "--home", home),
        ("roster", "grant", b, "search-exit", "--home", home),
        ("roster", "deny", a, "relay", "--home", home),
        ("roster", "grant", b, "search-relay", "--home", home),
    ]
    with ThreadPoolExecutor(len(changes) + 1) as pool:
        done = list(pool.map(lambda args: node_json(*args), changes))
        phone = pool.submit(pair_phone, tmp_path / "phone", founder.invite()).result()
    assert len({d["version"] for d in done}) == len(done)  # each change its own version

    def rosters() -> list[dict]:
        return [node_json("roster", "--home", str(n.home)) for n in (founder, node_a, node_b)]

    converged = wait_until(
        lambda: (r := rosters())[0]["version"] == r[1]["version"] == r[2]["version"] and r,
        "every member to hold the newest roster",
    )
    roles = {m["peer_id"]: m["roles"] for m in converged[0]["members"]}
    assert roles[a] == ["planner"]
    assert roles[b] == ["relay", "search-exit", "search-relay"]
    assert phone.key is not None and len(roles) == 4
    assert converged[0] == converged[1] == converged[2]


def test_an_open_session_survives_a_revocation_and_key_rotation(
    processes, tmp_path, tiny_models
) -> None:
    from .test_node import ok_observations, plan, request

    node = start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))
    member = pair_phone(tmp_path / "a", node.invite())
    revoked = pair_phone(tmp_path / "b", node.invite())
    replies = []

    async def execute(p):  # type: ignore[no-untyped-def]
        # the key rotates while this session waits for its observations
        replies.append(
            await trio.to_thread.run_sync(
                lambda: node_json("revoke", revoked.peer_id, "--home", str(node.home))
            )
        )
        return await ok_observations(p)

    outcome = plan(member, node, request(), execute=execute)
    assert replies and replies[0]["key_id"] == 2 and replies[0]["revoked"] == revoked.peer_id
    assert outcome.final is not None  # the entitled member's session ran to its end


def test_node_status_explains_each_unreachable_peer(processes, tmp_path) -> None:
    founder = start_node(processes, tmp_path / "home")
    joined = json.loads(subprocess_join(tmp_path / "friend", founder.invite("--role", "friend")))
    never = json.loads(subprocess_join(tmp_path / "never", founder.invite("--role", "friend")))
    phone = pair_phone(tmp_path / "phone", founder.invite())
    friend = start_node(processes, tmp_path / "friend")
    wait_until(
        lambda: next(p for p in founder.status()["peers"] if p["peer_id"] == joined["peer_id"])[
            "reachable"
        ],
        "the friend to dial in",
    )
    friend.proc.kill()
    friend.proc.wait(timeout=30)

    def reasons() -> dict[str, str]:
        return {p["peer_id"]: p["reason"] for p in founder.status()["peers"]}

    why = wait_until(
        lambda: (r := reasons())[joined["peer_id"]].startswith("unreachable") and r,
        "the friend to be reported down",
    )
    assert "connection refused" in why[joined["peer_id"]]
    assert "no known address" in why[never["peer_id"]]  # never served, never dialled in
    assert "phones dial in" in why[phone.peer_id]
