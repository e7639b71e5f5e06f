"""One egress: what leaves the phone, for which destination."""

from __future__ import annotations

import pytest
import trio

from hearth.companion.egress import REDACTED, REDACTED_ERROR, Destination, Egress, StepOutcome
from hearth.companion.executor import Policy, SessionState
from hearth.companion.labels import Labels
from hearth.protocol.wire.messages import ChatMessage, FunctionSpec, PlanRequest, ToolSpec

from .phone_kit import make_executor, make_plan

PRIVATE_OK = StepOutcome("s1", "ok", Labels(private=True), result={"text": "secret"})
PRIVATE_ERROR = StepOutcome("s2", "error", Labels(private=True), error="secret failed")


@pytest.mark.parametrize(
    ("private_to_home", "destination", "shown"),
    [
        (False, Destination.HOME, False),
        (True, Destination.HOME, True),
        (True, Destination.FRIEND, False),  # "to home" is not "to a friend's node"
        (True, Destination.OPEN_WORLD, False),
        (False, Destination.PHONE, True),  # the owner sees their own data
    ],
)
def test_private_results_and_errors_leave_only_where_the_policy_allows(
    private_to_home, destination, shown
) -> None:
    egress = Egress(Policy(private_to_home=private_to_home))
    result = egress.observation(PRIVATE_OK, destination)
    error = egress.observation(PRIVATE_ERROR, destination)
    assert (result.result, error.error) == (
        ({"text": "secret"}, "secret failed") if shown else (REDACTED, REDACTED_ERROR)
    )


def test_a_friends_planner_never_gets_private_results_even_when_home_may(tmp_path) -> None:
    executor, _, _ = make_executor(tmp_path, policy=Policy(private_to_home=True))
    plan = make_plan(("s1", "notes_search", {"query": ""}, []))
    (obs,) = trio.run(lambda: executor.execute(plan, SessionState(), friend=True))
    assert obs.result == REDACTED


def test_every_step_that_is_not_ok_says_why() -> None:
    skipped = Egress(Policy()).observation(StepOutcome("s3", "skipped", Labels()), Destination.HOME)
    assert skipped.error


def test_a_plan_request_never_carries_the_schemas_the_policy_keeps_on_the_phone() -> None:
    def spec(name: str) -> ToolSpec:
        return ToolSpec(function=FunctionSpec(name=name))

    request = PlanRequest(
        request_id="r",
        conversation=[ChatMessage(role="user", content="who is alice?")],
        tools=[spec("contacts_search"), spec("notes_search")],
    )
    out = Egress(Policy(never_remote_tools=frozenset({"contacts_search"}))).request(request)
    assert [t.function.name for t in out.tools] == ["notes_search"]
