"""`Service` in-process: asks on the phone's model and on a real home node, with the
events they tell; a home that never ends its session is cut off at the deadline."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from hearth.companion import completion
from hearth.companion.config import init_phone
from hearth.companion.events import AskRequest, RouteEvent, StepEvent, TokenEvent
from hearth.companion.service import Service
from hearth.companion.settings import set_setting
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, ToolSpec

from .conftest import Processes
from .hostile.harness import Bench
from .hostile.script import Round, Script
from .nodes import RunningNode, pair_phone, start_node
from .phone_kit import Recorded, ask
from .test_node_script import MILK, MILK_ANSWER, MILK_PLAN, notes, start_scripted_node

ASK_KEYS = {
    "request_id", "route", "escalated", "reason", "node", "planner", "plans", "plan", "answer",
    "timings", "conversation_id", "deferred", "served_by", "documents", "warnings",
}  # fmt: skip
READ = {"id": "s1", "tool": "device_status", "arguments": {}}


def steps_told_in_order(events: Recorded, plans: list) -> None:
    """Each step of each plan: `running`, then the status the result shows."""
    told = [(e.plan_id, e.step_id, e.status) for e in events.of(StepEvent)]
    expected = []
    for plan in plans:
        for step in plan.steps:
            expected += [(plan.plan_id, step.id, "running"), (plan.plan_id, step.id, step.status)]
    assert told == expected


def test_a_local_ask_tells_its_route_and_steps(tmp_path: Path, tiny_models) -> None:
    home = tmp_path / "phone"
    init_phone(home, tiny_models[1])
    set_setting(home, "limits.max_value_chars", "40")  # random weights: bound text values
    events = Recorded()
    request = AskRequest(text="Note that we need milk", route="local", tool_choice="required")
    result = ask(home, request, events)
    out = result.model_dump(mode="json")
    assert set(out) >= ASK_KEYS and out["served_by"] == "process" and out["documents"] == []
    assert out["route"] == "local" and out["planner"] == out["plan"]["signer"]
    [route] = events.of(RouteEvent)
    assert (route.route, route.reason, route.escalated) == ("local", "local route requested", False)
    assert events.events[0] == route  # the route is told before any step runs
    assert result.plans and result.plans[0].steps  # `required`: the grammar forces a call
    steps_told_in_order(events, result.plans)
    steps = [step for plan in result.plans for step in plan.steps]
    # the request's candidates are the notes tools, which take any text: each step runs
    assert [(s.tool, s.status, s.error) for s in steps] == [(s.tool, "ok", None) for s in steps]
    written = [s.arguments["text"] for s in steps if s.tool == "notes_create"]
    assert [n["text"] for n in notes(home)] == written  # each note on the phone's disk
    assert result.answer.strip()  # and the person is told in words
    assert result.conversation_id is not None


@pytest.fixture
def paired(
    processes: Processes, tmp_path: Path, tiny_models, monkeypatch: pytest.MonkeyPatch
) -> tuple[RunningNode, Path]:
    """A real node serving the tiny model and a phone home paired with it in-process
    (text values capped: random weights)."""
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    node = start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))
    home = tmp_path / "phone"
    pair_phone(home, node.invite())
    set_setting(home, "limits.max_value_chars", "40")
    return node, home


@pytest.fixture
def scripted(
    processes: Processes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[RunningNode, Path]:
    """A real node playing the exact plan for `MILK` (the scripted backend: a tool call,
    then the answer in words) and a phone home paired with it in-process."""
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    node = start_scripted_node(processes, tmp_path, [MILK_PLAN])
    home = tmp_path / "phone"
    pair_phone(home, node.invite())
    return node, home


def test_a_remote_ask_streams_tokens_and_tells_the_node_as_planner(
    scripted: tuple[RunningNode, Path],
) -> None:
    node, home = scripted
    events = Recorded()
    request = AskRequest(text=MILK, route="remote", tool_choice="required")
    result = ask(home, request, events)
    assert result.route == "remote" and result.node == result.planner == node.peer_id
    [route] = events.of(RouteEvent)
    assert route.route == "remote" and route.planner == node.peer_id
    assert all(p.signer == node.peer_id for p in result.plans) and result.plans
    steps_told_in_order(events, result.plans)
    assert [s.status for p in result.plans for s in p.steps] == ["ok"]
    ran = max(i for i, e in enumerate(events.events) if isinstance(e, StepEvent))
    answer = [
        e.text for e in events.events[ran:] if isinstance(e, TokenEvent) and not e.thinking
    ]  # after the step ran, the node's answer, as it wrote it: a word at a time
    assert "".join(answer) == result.answer == MILK_ANSWER
    assert len(answer) == len(MILK_ANSWER.split()), answer
    assert "connect_ms" in result.timings and "total_ms" in result.timings


@pytest.mark.timeout(180)
def test_a_home_that_holds_back_final_is_cut_off_at_the_deadline(bench: Bench) -> None:
    """Issue 14: the hostile home answers keepalive pings but never ends the session."""
    set_setting(bench.phone, "limits.deadline_s", "3")
    script = Script(rounds=[Round.model_validate({"steps": [READ]})], hold_final=True)
    bench.script.write_text(script.model_dump_json())
    events = Recorded()
    started = time.monotonic()
    with pytest.raises(HearthError) as info:
        ask(bench.phone, AskRequest(text="battery?", route="remote"), events, bound_s=60)
    assert info.value.code is ErrorCode.TIMED_OUT, info.value
    assert "deadline of 3 s" in info.value.message
    assert time.monotonic() - started < 60  # not the test's own bound
    ended = [e.status for e in events.of(StepEvent) if e.status != "running"]
    assert ended == ["ok"]  # the plan ran; only the session's end never came


WEATHER = ToolSpec.model_validate(
    {
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 20}},
                "required": ["city"],
            },
        }
    }
)


def complete(home: Path, route: str, events: Recorded):
    async def go():
        async with Service.open(home) as service:
            with trio.fail_after(120):
                done = await completion.complete(
                    service,
                    [ChatMessage(role="user", content="Weather in Paris?")],
                    [WEATHER],
                    route,
                    events,
                    trio.Event(),
                    tool_choice="required",
                )
            return done, service.journal.db.execute("SELECT COUNT(*) FROM plans").fetchone()[0]

    return trio.run(go)


def test_an_apps_own_tools_come_back_as_calls_and_nothing_runs_on_the_phone(
    paired: tuple[RunningNode, Path], tiny_models
) -> None:
    _, home = paired
    set_setting(home, "model", str(tiny_models[1]))
    set_setting(home, "limits.max_value_chars", "20")
    for route in ("remote", "local"):
        events = Recorded()
        done, journaled = complete(home, route, events)
        assert done.route == route and done.calls, done
        assert {c.name for c in done.calls} == {"get_weather"}
        assert all(set(c.arguments) == {"city"} for c in done.calls)
        assert journaled == 0 and not events.of(StepEvent)  # the app runs them, not the phone


def test_a_plain_local_answer_streams_as_tokens(tmp_path: Path, tiny_models) -> None:
    home = tmp_path / "phone"
    init_phone(home, tiny_models[1])
    set_setting(home, "limits.max_tokens", "16")
    events = Recorded()
    result = ask(home, AskRequest(text="hello there", route="local", tool_choice="none"), events)
    streamed = [e for e in events.of(TokenEvent) if not e.thinking]
    assert result.plans == [] and result.usage.completion_tokens == 16
    assert 0 < len(streamed) <= 16  # piece by piece as generated
    # the answer is what streamed, with the whitespace at either end left out (random
    # weights may write nothing else)
    assert result.answer == "".join(e.text for e in streamed).strip()


@pytest.mark.timeout(240)
def test_an_attached_document_leaves_only_as_the_policy_says_and_never_from_the_home(
    bench: Bench, tmp_path: Path
) -> None:
    bench.script.write_text(Script(rounds=[], answer="Read it.").model_dump_json())
    doc = tmp_path / "minutes.md"
    doc.write_text("# Minutes\nThe budget is 4711.")
    request = AskRequest(text="summarise this", route="remote", attachments=[str(doc)])
    result = ask(bench.phone, request, Recorded())  # --yes answers "may it leave?"
    assert [d.model_dump() for d in result.documents] == [
        {"name": "minutes.md", "pages": 0, "chunks": 0, "sent": True}
    ]
    [sent] = bench.plan_requests()[-1]["documents"]
    assert sent["name"] == "minutes.md" and "4711" in sent["text"]

    (bench.phone / "policy.toml").write_text('documents_to_home = "never"\n')
    kept = ask(bench.phone, request, Recorded())
    assert [d.sent for d in kept.documents] == [False]
    assert bench.plan_requests()[-1]["documents"] == []

    key = AskRequest(text="x", route="remote", attachments=[str(bench.phone / "identity.key")])
    with pytest.raises(HearthError) as info:
        ask(bench.phone, key, Recorded())
    assert info.value.code is ErrorCode.INVALID_INPUT and "part of the home" in info.value.message
