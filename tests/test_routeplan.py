"""The route plan: every attempt of a request, in order, from one pure function."""

from __future__ import annotations

import dataclasses

import pytest

from hearth.companion.friends import FriendPlanner
from hearth.companion.policy import OwnerPolicy
from hearth.companion.routeplan import WHY, Attempt, RouteInput, route_plan
from hearth.protocol.wire.errors import ErrorCode, HearthError

SIMPLE = RouteInput(text="what time is it", candidate_tools=0, node_reachable=True)
WORK = dataclasses.replace(SIMPLE, text="compare the weather and then summarize it")
AWAY = dataclasses.replace(WORK, node_reachable=False, node_reason="connection refused")
ANN = FriendPlanner(peer_id="ann", name="Ann")
CY = FriendPlanner(peer_id="cy", name="Cy")


def kinds(attempts: list[Attempt]) -> list[tuple[str, str]]:
    return [(a.kind, a.after) for a in attempts]


def test_a_local_route_and_an_unpaired_phone_need_nothing_of_the_link() -> None:
    policy = OwnerPolicy()
    [local] = route_plan("local", policy, None)
    assert (local.kind, local.reason, local.may_escalate) == (
        "local",
        "local route requested",
        False,
    )
    [local] = route_plan("auto", policy, None)
    assert local.reason == "not paired with a home node"
    with pytest.raises(HearthError) as info:
        route_plan("remote", policy, None)
    assert info.value.code is ErrorCode.INVALID_INPUT


def test_a_simple_request_may_escalate_and_the_home_may_be_lost_on_the_way() -> None:
    attempts = route_plan("auto", OwnerPolicy(), SIMPLE)
    assert kinds(attempts) == [("local", "start"), ("home", "escalated"), ("local", "lost")]
    assert attempts[0].may_escalate and attempts[1].fallback
    assert attempts[1].reason_after("low confidence", []) == "escalated: low confidence"
    assert WHY not in attempts[2].reason_after("timed out", [])


def test_work_for_the_home_falls_back_only_when_auto() -> None:
    assert kinds(route_plan("auto", OwnerPolicy(), WORK)) == [("home", "start"), ("local", "lost")]
    [home] = route_plan("remote", OwnerPolicy(), WORK)
    assert home.reason == "remote route requested" and not home.fallback


def test_while_the_home_is_away_friends_come_in_order_then_the_inbox_then_the_phone() -> None:
    policy = OwnerPolicy(friend_planners="ask")
    attempts = route_plan("auto", policy, AWAY, [CY, ANN])
    assert kinds(attempts) == [
        ("friend", "start"),
        ("friend", "declined"),
        ("keep", "declined"),
        ("local", "declined"),
    ]
    assert attempts[0].ask_first and not attempts[1].ask_first
    assert attempts[0].friend == CY and "planned by friend Cy (cy)" in attempts[0].reason
    kept = attempts[2].reason_after("", ["friend Cy (cy): busy"])
    assert kept.startswith("home node unreachable (connection refused)")
    assert kept.endswith("; friend Cy (cy): busy; kept for the home node, sent when it is back")
    remote = route_plan("remote", policy, AWAY, [CY])
    assert kinds(remote) == [("friend", "start"), ("unreachable", "declined")]


def test_without_friends_the_reason_says_why_none_planned() -> None:
    never = route_plan("auto", OwnerPolicy(wait_for_home=False), AWAY, [CY])
    assert kinds(never) == [("local", "start")]  # the policy's `never`: no friend is tried
    assert "policy friend_planners = never" in never[0].reason
    alone = route_plan("auto", OwnerPolicy(friend_planners="when-home-unreachable"), AWAY, [])
    assert kinds(alone) == [("keep", "start"), ("local", "declined")]
    assert "no friend's node holds the planner role" in alone[0].reason
    simple_away = dataclasses.replace(SIMPLE, node_reachable=False)
    [local] = route_plan("auto", OwnerPolicy(friend_planners="ask"), simple_away, [CY])
    assert not local.may_escalate  # the phone's own work: no friend, no inbox


def test_many_candidate_tools_are_a_reason_a_person_can_read() -> None:
    many = dataclasses.replace(SIMPLE, candidate_tools=9)
    [home, _] = route_plan("auto", OwnerPolicy(), many)
    assert home.kind == "home"
    assert home.reason == (
        "the request may need any of 9 tools, more than the phone's model chooses among well (8)"
    )
