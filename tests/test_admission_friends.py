"""A friend's phone asking this node for more than a favour: its limits are cut to the
node's `[friends]` caps (and it is told so), its deadline bounds how long it holds the
friends' slot, and one friend's phone holds no more than its share of that slot."""

from __future__ import annotations

import anyio
import pytest
import trio

from hearth.node.admission import Admission
from hearth.node.config import FriendCaps, NodeConfig
from hearth.protocol.transport.plans import PLAN_PROTOCOL, run_plan_session
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Limits, Progress

from .nodes import pair_phone, start_node, wait_until
from .test_friend_planner import sync_roster
from .test_node import ok_observations, request
from .test_swarm import subprocess_join

pytestmark = pytest.mark.hostile

GREEDY = Limits(
    deadline_s=3600,
    max_rounds=16,
    max_steps=64,
    max_tokens=8192,
    max_thinking_tokens=32768,
    max_value_chars=40,  # random weights never end a string on their own
)
CAPS = """plan_for_friends = true
[friends]
deadline_s = 5
max_tokens = 300
max_rounds = 2
max_steps = 1
"""


def test_one_friends_phone_holds_no_more_than_its_share_of_the_friends_slots() -> None:
    async def go() -> None:
        admission = Admission(max_active=4, max_queue=4, per_peer=2, friend_sessions=3)
        async with admission.friend_slot("friend-a"):
            with pytest.raises(HearthError) as info:
                async with admission.friend_slot("friend-a"):
                    pass
            assert info.value.code is ErrorCode.BUSY and "one friend's phone" in (
                info.value.message
            )
            async with admission.friend_slot("friend-b"):  # another friend's phone may
                assert admission.friends_active == 2
        async with admission.friend_slot("friend-a"):  # given back: a's turn again
            pass
        assert admission.friends_active == 0 and admission.served_for_others == 3

    trio.run(go)


def test_friends_caps_default_to_what_a_phone_asks_by_default() -> None:
    caps = NodeConfig().friends
    assert caps == FriendCaps() and caps.per_phone == 1
    asked = Limits(max_steps=4, max_rounds=3, max_tokens=768, deadline_s=120)  # a phone's own
    assert all(getattr(asked, k) <= v for k, v in caps.model_dump(exclude={"per_phone"}).items())


@pytest.mark.timeout(300)
def test_a_greedy_friends_request_is_planned_within_the_caps_and_lets_go_at_their_deadline(
    processes, tmp_path, tiny_models
) -> None:
    home = start_node(processes, tmp_path / "home")
    phone = pair_phone(tmp_path / "phone", home.invite())
    uri = home.invite("--role", "friend", "--grant", "relay,planner")
    subprocess_join(tmp_path / "friend", uri)
    friend = start_node(processes, tmp_path / "friend", "--model", str(tiny_models[0]), config=CAPS)
    wait_until(lambda: "planner" in friend.status()["roles"], "the friend's planner role")
    sync_roster(phone, home)
    progress: list[Progress] = []

    async def note(frame: Progress) -> None:
        progress.append(frame)

    async def never_done(plan) -> list:  # type: ignore[no-untyped-def]
        await anyio.sleep_forever()  # a phone that holds the session as long as it may
        return []

    def plan(rid: str, execute):  # type: ignore[no-untyped-def]
        greedy = request(rid).model_copy(update={"limits": GREEDY})

        async def go():  # type: ignore[no-untyped-def]
            host = phone.host()
            async with host.run([]):
                stream = await host.open(friend.peer_id, PLAN_PROTOCOL, friend.addrs)
                with anyio.fail_after(120):  # far below the 3600 s the phone asked for
                    return await run_plan_session(
                        stream, greedy, phone_id=host.peer_id, execute=execute, on_progress=note
                    )

        return trio.run(go)

    with pytest.raises(HearthError) as info:
        plan("greedy", never_done)
    assert info.value.code is ErrorCode.TIMED_OUT, info.value
    assert "plan deadline of 5 s passed" in info.value.message
    (said,) = [p for p in progress if p.stage == "limits"]
    assert said.detail == (
        "this node plans for friends within deadline_s 5, max_rounds 2, max_steps 1, "
        "max_tokens 300, max_thinking_tokens 1024"
    )
    assert friend.status()["served_for_others"] == 1
    # the slot was given back at the deadline: the next request is admitted, not `busy`
    try:
        plan("next", ok_observations)
    except HearthError as exc:
        assert exc.code is ErrorCode.TIMED_OUT, exc  # planning slowly on a loaded machine
    assert friend.status()["served_for_others"] == 2
