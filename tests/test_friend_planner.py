"""A friend's node planning for the owner's phone: only when its config and roles say so,
never before its own phones, and counted in `hearth-node status`."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
import trio
from pydantic import ValidationError

from hearth.companion.audit import AuditLog
from hearth.companion.friends import FriendPlanner, friend_planners, may_plan, named
from hearth.companion.link import NodeLink, learn_members
from hearth.companion.policy import OwnerPolicy
from hearth.companion.swarmkit import init_phone, last_json, pair
from hearth.node.admission import Admission
from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.transport.host import host_for_home
from hearth.protocol.transport.plans import PLAN_PROTOCOL, run_plan_session
from hearth.protocol.transport.rostersync import ROSTER_PROTOCOL, pull
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import DocumentPart, Health, MemberAddrs
from hearth.protocol.wire.roster import Member, Role, Roster

from .nodes import Phone, cli, pair_phone, start_node, wait_until
from .test_node import ok_observations, request
from .test_swarm import subprocess_join
from .upstream_servers import free_port


def test_a_friends_session_never_takes_a_slot_the_own_phones_need() -> None:
    async def go() -> None:
        admission = Admission(max_active=1, max_queue=4, per_peer=2, friend_sessions=1)
        async with admission.slot("own-1"):  # the own phone holds the only slot
            with pytest.raises(HearthError) as info:
                async with admission.friend_slot("friend-1"):
                    pass
            assert info.value.code is ErrorCode.BUSY and "own phones come first" in (
                info.value.message
            )
        async with admission.friend_slot("friend-1"):  # free now: the friend may plan
            with pytest.raises(HearthError, match="at most 1 friends"):
                async with admission.friend_slot("friend-1"):
                    pass
            with anyio.fail_after(5):  # an own phone is admitted at once, not queued
                async with admission.slot("own-1"):
                    assert admission.stats.queued == 0
        # an own phone waiting in the queue: no friend goes before it
        async with anyio.create_task_group() as tg, admission.slot("own-1"):
            tg.start_soon(_enter, admission, "own-2")
            await wait_for(lambda: admission.stats.queued == 1)
            with pytest.raises(HearthError, match="own phones come first"):
                async with admission.friend_slot("friend-1"):
                    pass
        assert admission.served_for_others == 1 and admission.friends_active == 0

    trio.run(go)


async def _enter(admission: Admission, peer: str) -> None:
    async with admission.slot(peer):
        pass


async def wait_for(predicate) -> None:  # type: ignore[no-untyped-def]
    with anyio.fail_after(5):
        while not predicate():
            await anyio.sleep(0.01)


def sync_roster(phone, home) -> None:  # type: ignore[no-untyped-def]
    """What the companion does on connecting: the newest roster from its home (so the
    phone's own gate lets the friend's node in)."""

    async def go() -> None:
        host, roster, keys, _ = host_for_home(phone.home)
        async with host.run([]):
            with anyio.fail_after(60):
                stream = await host.open(home.peer_id, ROSTER_PROTOCOL, home.addrs)
                await pull(stream, phone.home, roster, keys)

    trio.run(go)


def plan_with(phone, node, rid: str, documents=()):  # type: ignore[no-untyped-def]
    planned = request(rid).model_copy(update={"documents": list(documents)})

    async def go():
        host = phone.host()
        async with host.run([]):
            stream = await host.open(node.peer_id, PLAN_PROTOCOL, node.addrs)
            with anyio.fail_after(120):
                return await run_plan_session(
                    stream, planned, phone_id=host.peer_id, execute=ok_observations
                )

    return trio.run(go)


@pytest.mark.timeout(300)
def test_a_friend_node_plans_only_when_it_accepts_and_holds_the_role(
    processes, tmp_path, tiny_models
) -> None:
    model = str(tiny_models[0])
    home = start_node(processes, tmp_path / "home", "--model", model)
    phone = pair_phone(tmp_path / "phone", home.invite())  # on the roster before the friend
    friend_id = json.loads(
        subprocess_join(tmp_path / "friend", home.invite("--role", "friend", "--grant", "relay"))
    )["peer_id"]
    friend = start_node(
        processes, tmp_path / "friend", "--model", model, config="plan_for_friends = true\n"
    )
    sync_roster(phone, home)
    with pytest.raises(HearthError) as info:
        plan_with(phone, friend, "no-role")
    assert info.value.code is ErrorCode.REFUSED and "no planner role" in info.value.message

    cli("hearth-node", "roster", "grant", friend_id, "planner", "--json", "--home", str(home.home))
    wait_until(lambda: "planner" in friend.status()["roles"], "the friend's planner role")
    outcome = plan_with(phone, friend, "granted")
    assert outcome.plans and all(p.signer == friend_id for p in outcome.plans)
    assert friend.status()["served_for_others"] == 1
    assert home.status()["served_for_others"] == 0
    # the owner's documents never go to a friend: a phone that sends one anyway is refused
    with pytest.raises(HearthError) as info:
        plan_with(phone, friend, "document", [DocumentPart(name="a.txt", text="x " * 50_000)])
    assert info.value.code is ErrorCode.REFUSED and "no documents" in info.value.message

    friend.proc.terminate()
    friend.proc.wait(timeout=30)
    friend = start_node(
        processes, tmp_path / "friend", "--model", model, config="plan_for_friends = false\n"
    )
    with pytest.raises(HearthError) as info:
        plan_with(phone, friend, "declined")
    assert info.value.code is ErrorCode.REFUSED and "plan_for_friends = false" in (
        info.value.message
    )
    # the founder's roster cannot overrule the friend's own config: granted `home`, the
    # friend's node is still nobody's home and still declines
    cli("hearth-node", "roster", "grant", friend_id, "home", "--json", "--home", str(home.home))
    wait_until(lambda: "home" in friend.status()["roles"], "the friend's home role")
    with pytest.raises(HearthError) as info:
        plan_with(phone, friend, "made-home")
    assert info.value.code is ErrorCode.REFUSED and "plan_for_friends" in info.value.message
    assert friend.status()["served_for_others"] == 0


def test_the_phone_tries_friends_with_the_planner_role_as_its_policy_says() -> None:
    members = (
        Member(peer_id="home", roles=frozenset({Role.HOME, Role.PLANNER})),
        Member(peer_id="phone", roles=frozenset({Role.PHONE})),
        Member(peer_id="relay-only", roles=frozenset({Role.RELAY})),
        Member(peer_id="ann", name="Ann", roles=frozenset({Role.PLANNER, Role.RELAY})),
        Member(peer_id="bob", name="Bob", roles=frozenset({Role.PLANNER}), expires=1.0),
        Member(peer_id="cy", name="Cy", roles=frozenset({Role.PLANNER})),
    )
    roster = Roster(version=2, founder="home", issued_at=0, not_after=4e9, members=members)
    book = {"cy": ["/ip4/10.0.0.3/tcp/4001"], "ann": []}.get
    now = 100.0

    def chosen(policy: str, home_reachable: bool) -> list[str]:
        return [
            f.peer_id
            for f in friend_planners(
                roster,
                lambda peer: book(peer, []),
                OwnerPolicy(friend_planners=policy),
                home_reachable,
                now=now,
            )
        ]

    assert chosen("never", False) == []
    assert chosen("when-home-unreachable", True) == []
    assert chosen("when-home-unreachable", False) == ["cy", "ann"]  # known addresses first
    assert chosen("ask", True) == ["cy", "ann"]


def ask_json(phone: Path, text: str, *extra: str) -> dict:  # type: ignore[type-arg]
    """`hearth ask --json` (exit 8, a refused step, is an answer too)."""
    asked = cli("hearth", "ask", text, "--json", *extra, "--home", str(phone), check=False)
    assert asked.returncode in (0, 8), asked.stderr
    return last_json(asked)


@pytest.mark.timeout(600)
def test_the_phone_asks_a_friends_node_when_its_home_is_down(
    processes, tmp_path, tiny_models
) -> None:
    """End to end through `hearth ask`: a friend with `planner` plans while the home is
    stopped; otherwise (no role on the phone's roster or on the friend's, policy never,
    the user says no, the friend's node declines) the phone answers locally and says why."""
    model = str(tiny_models[0])
    at = [f"/ip4/127.0.0.1/tcp/{free_port()}"]  # the home comes back where it was
    home = start_node(processes, tmp_path / "home", "--model", model, listen=at)
    phone = tmp_path / "phone"
    init_phone(phone, tiny_models[1], noise=True)
    pair(phone, home.invite())
    friend_id = json.loads(
        subprocess_join(tmp_path / "friend", home.invite("--role", "friend", "--grant", "relay"))
    )["peer_id"]
    (phone / "policy.toml").write_text('friend_planners = "when-home-unreachable"\n')
    work = "compare the weather and then summarize it"  # multi-step: the home's work

    # the home unreachable (a dead address), no friend holding the planner role
    sync_roster(Phone(phone), home)
    book = AddressBook(phone)
    book.entries[home.peer_id] = []  # forget where the home was
    book.remember(home.peer_id, [f"/ip4/127.0.0.1/tcp/9/p2p/{home.peer_id}"])
    out = ask_json(phone, work)
    assert out["route"] == "local" and "holds the planner role" in out["reason"], out

    # granted, the friend's node up: nobody gives the phone its addresses; the phone
    # learns them from its home's health answer while the home is up
    cli("hearth-node", "roster", "grant", friend_id, "planner", "--json", "--home", str(home.home))
    friend_at = [f"/ip4/127.0.0.1/tcp/{free_port()}"]  # it comes back where it was
    friend_config = "plan_for_friends = true\n"
    friend = start_node(
        processes, tmp_path / "friend", "--model", model, config=friend_config, listen=friend_at
    )
    wait_until(lambda: "planner" in friend.status()["roles"], "the friend's planner role", 90)
    AddressBook(phone).remember(home.peer_id, home.addrs)
    learned = wait_until(lambda: link_sync(phone, friend_id), "the friend's addresses", 90)
    assert set(friend.addrs) <= set(learned)

    # denied while the phone is away: its roster says planner, the friend's node does not
    cli("hearth-node", "roster", "deny", friend_id, "planner", "--json", "--home", str(home.home))
    wait_until(lambda: "planner" not in friend.status()["roles"], "the friend's denial", 90)
    home.proc.terminate()
    home.proc.wait(timeout=30)
    out = ask_json(phone, work)
    assert out["route"] == "local" and "no planner role" in out["reason"], out

    home = start_node(processes, tmp_path / "home", "--model", model, listen=at)
    cli("hearth-node", "roster", "grant", friend_id, "planner", "--json", "--home", str(home.home))
    wait_until(lambda: "planner" in friend.status()["roles"], "the friend's planner role", 90)
    home.proc.terminate()
    home.proc.wait(timeout=30)
    out = ask_json(phone, work, "--tool-choice", "required", "--yes")
    assert out["route"] == "remote" and out["planner"] == friend_id, out
    assert "planned by friend" in out["reason"] and friend_id in out["reason"]
    assert out["plans"] and all(p["signer"] == friend_id for p in out["plans"])
    assert friend.status()["served_for_others"] == 1

    (phone / "policy.toml").write_text('friend_planners = "never"\n')
    out = ask_json(phone, work)
    assert out["route"] == "local" and "friend_planners = never" in out["reason"]
    (phone / "policy.toml").write_text('friend_planners = "ask"\n')  # the user says no
    out = ask_json(phone, work, "--no")
    assert out["route"] == "local" and "did not let a friend" in out["reason"]
    assert friend.status()["served_for_others"] == 1

    friend.proc.terminate()
    friend.proc.wait(timeout=30)
    friend = start_node(
        processes,
        tmp_path / "friend",
        "--model",
        model,
        config="plan_for_friends = false\n",
        listen=friend_at,
    )
    (phone / "policy.toml").write_text('friend_planners = "when-home-unreachable"\n')
    out = ask_json(phone, work)
    assert out["route"] == "local" and "plan_for_friends = false" in out["reason"], out
    assert out["planner"] != friend_id


def link_sync(phone: Path, member: str) -> list[str]:
    """What the companion does on connecting to its home (roster, key, addresses);
    then where the phone's address book says `member` is."""

    async def go() -> None:
        async with NodeLink.running(phone, AuditLog(phone)) as link:
            with anyio.fail_after(60):
                assert await link.ensure(), link.reason

    trio.run(go)
    return AddressBook(phone).get(member)


def test_the_phone_keeps_only_its_planners_addresses_from_its_home(tmp_path) -> None:
    members = (
        Member(peer_id="home", roles=frozenset({Role.HOME, Role.PLANNER})),
        Member(peer_id="relay-only", roles=frozenset({Role.RELAY})),
        Member(peer_id="bob", roles=frozenset({Role.PLANNER}), expires=1.0),
        Member(peer_id="ann", roles=frozenset({Role.PLANNER})),
    )
    roster = Roster(version=2, founder="home", issued_at=0, not_after=4e9, members=members)
    home_addr, ann = "/ip4/10.0.0.1/tcp/4001/p2p/home", "/ip4/10.0.0.2/tcp/4001/p2p/ann"
    AddressBook(tmp_path).remember("home", [home_addr])
    elsewhere = "/ip4/6.6.6.6/tcp/1/p2p/{}"
    listed = [
        MemberAddrs(peer_id="home", addrs=[elsewhere.format("home")]),  # the home's own entry
        MemberAddrs(peer_id="mallory", addrs=[elsewhere.format("mallory")]),  # not on the roster
        MemberAddrs(peer_id="relay-only", addrs=[elsewhere.format("relay-only")]),  # no planner
        MemberAddrs(peer_id="bob", addrs=[elsewhere.format("bob")]),  # membership expired
        MemberAddrs(peer_id="ann", addrs=[ann, elsewhere.format("home"), "/dns4/x/tcp/1"]),
    ]
    learn_members(AddressBook(tmp_path), roster, listed, now=100.0)
    assert AddressBook(tmp_path).entries == {"home": [home_addr], "ann": [ann]}

    many = [f"/ip4/10.0.{i // 256}.{i % 256}/tcp/1/p2p/ann" for i in range(1000)]
    learn_members(  # past the wire's bounds (built without them): still 16 kept
        AddressBook(tmp_path),
        roster,
        [MemberAddrs.model_construct(peer_id="ann", addrs=many)],
        now=100.0,
    )
    assert len(AddressBook(tmp_path).get("ann")) == 16
    with pytest.raises(ValidationError):  # what a hostile home sends is refused on the wire
        Health.model_validate({"peer_id": "home", "members": [{"peer_id": "ann", "addrs": many}]})
    with pytest.raises(ValidationError):
        Health.model_validate(
            {"peer_id": "home", "members": [{"peer_id": "ann", "addrs": [ann]}] * 1000}
        )
    with pytest.raises(ValidationError):
        Health.model_validate(
            {"peer_id": "home", "members": [{"peer_id": "ann", "addrs": [ann + "/" * 2000]}]}
        )
    assert Health(peer_id="home").members == []  # an old node's answer


def test_a_friends_chosen_name_cannot_forge_lines_or_terminal_codes() -> None:
    friend = FriendPlanner(peer_id="12D3Koo", name="Ann\n\x1b[2Jhome node OK\u202e")
    shown = named(friend)
    assert "\n" not in shown and "\x1b" not in shown and "\u202e" not in shown
    assert shown.startswith("Ann ") and shown.endswith("(12D3Koo)")
    assert named(FriendPlanner(peer_id="12D3Koo")) == "12D3Koo"


def test_the_question_of_policy_ask_names_each_friend_plainly() -> None:
    friends = [FriendPlanner(peer_id="12D3Ann", name="Ann"), FriendPlanner(peer_id="12D3Cy")]
    text = may_plan(friends, "r1").text()
    assert "friend's node plan this request" in text and "never your documents" in text
    assert "Ann (12D3Ann)" in text and "12D3Cy" in text
