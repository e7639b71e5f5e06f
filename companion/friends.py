"""Which friends' nodes may plan for this phone, in the order to try them.

A friend planner is a roster member holding the `planner` role now that is not a
home node. The owner's `friend_planners` policy says when they are used: `never`
(the default), `when-home-unreachable`, or `ask` (the caller asks the user before
dialling one). Members whose addresses the phone knows (its address book, fed by
the home's health answers) come first, so the first dial is the likeliest to work.
A friend's plan is held to every friend-plan rule by the executor (each literal
untrusted), and documents never go to a friend (`documents.release`).
"""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from hearth.protocol.kit.console import plain
from hearth.protocol.wire.roster import Role, Roster

from .confirm import Confirmation
from .policy import OwnerPolicy


class FriendPlanner(BaseModel):
    """A friend's node to dial, and where it was last seen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    peer_id: str
    name: str = ""
    addrs: list[str] = []


def friend_planners(
    roster: Roster,
    addresses: Callable[[str], list[str]],
    policy: OwnerPolicy,
    home_reachable: bool,
    *,
    now: float,
) -> list[FriendPlanner]:
    """The friends to try for a request that would go to the home node, in order
    (empty when the policy does not allow one now)."""
    if policy.friend_planners == "never":
        return []
    if policy.friend_planners == "when-home-unreachable" and home_reachable:
        return []
    friends = [
        FriendPlanner(peer_id=m.peer_id, name=m.name, addrs=addresses(m.peer_id))
        for m in roster.members
        if Role.PLANNER in (roles := roster.roles_of(m.peer_id, now))
        and Role.HOME not in roles
        and m.peer_id != roster.founder
    ]
    return sorted(friends, key=lambda f: not f.addrs)  # stable: roster order otherwise


def named(friend: FriendPlanner) -> str:
    """The friend as the user knows it: the roster's name (the friend chose it: on one
    line, control characters shown as escapes) and the peer id."""
    name = plain(" ".join(friend.name.split()))
    return f"{name} ({friend.peer_id})" if name else friend.peer_id


def may_plan(friends: list[FriendPlanner], request_id: str) -> Confirmation:
    """The question of policy `ask`, once per request: may these friends' nodes plan it
    (named, in the order they would be tried)?"""
    return Confirmation(
        kind="friend",
        plan_id=request_id,
        summary="The home node is unreachable: may a friend's node plan this request? "
        "It gets the request, never your documents.",
        arguments={"friends": [named(f) for f in friends]},
    )
