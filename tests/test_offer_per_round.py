"""Tools offered per round (issue 30): the plan request offers the tools the request's
words point to; each round's observations offer the tools what the rounds so far showed
the planner points to (`Observations.tools`), so a tool a later step needs is offered
by the round that needs it, and the node plans with it from the next round on."""

from __future__ import annotations

import json

from hearth.companion.events import AskRequest
from hearth.node.backends.scripted import ScriptedBackend
from hearth.protocol.wire.messages import FunctionSpec, Observation, ToolSpec

from .hostile.harness import Bench
from .hostile.script import Round, Script
from .hostile.suites import step
from .phone_kit import Recorded, ask
from .test_planner import TOOLS, call, plan_request, session

DENTIST = {
    "id": "n9",
    "title": "Dentist",
    "text": "The dentist moved my appointment: move the event in my calendar to Friday 9:00.",
}
MOVE = ToolSpec(
    function=FunctionSpec(
        name="calendar_move",
        parameters={
            "type": "object",
            "properties": {"id": {"type": "string", "maxLength": 20}},
            "required": ["id"],
        },
    )
)


def test_the_phone_offers_the_tools_a_rounds_results_point_to(bench: Bench) -> None:
    """Asked about a note, the request offers the notes' tools; the note read in round 1
    speaks of moving a calendar event: round 1's observations offer the calendar's tools
    (once), and round 2's calendar step runs. A note the home may not read (redacted:
    `private_to_home = false`) points to nothing."""
    (data := bench.phone / "data").mkdir(exist_ok=True)
    (data / "notes.json").write_text(json.dumps([DENTIST]))
    script = Script(
        rounds=[
            Round(steps=[step("s1", "notes_search", query="dentist")]),
            Round(steps=[step("s1", "calendar_list")]),
        ],
        answer="Your dentist moved the appointment.",
    )
    bench.script.write_text(script.model_dump_json())

    def asked() -> list[dict]:  # type: ignore[type-arg]
        """The frames the home heard for one ask."""
        offset = bench.heard.stat().st_size if bench.heard.exists() else 0
        request = AskRequest(text="what do my notes say about the dentist?", route="remote")
        out = ask(bench.phone, request, Recorded())
        assert [s.status for p in out.plans for s in p.steps] == ["ok", "ok"]
        with bench.heard.open() as log:
            log.seek(offset)
            return [json.loads(line) for line in log.read().splitlines()]

    def names(tools: list[dict]) -> set[str]:  # type: ignore[type-arg]
        return {t["function"]["name"] for t in tools}

    redacted = asked()
    assert [names(h["tools"]) for h in redacted if h["frame"] == "observations"] == [set(), set()]

    (bench.phone / "policy.toml").write_text("private_to_home = true\n")
    heard = asked()
    [request] = [h for h in heard if h["frame"] == "plan_request"]
    first, second = [h for h in heard if h["frame"] == "observations"]
    at_first, offered = names(request["tools"]), names(first["tools"])
    assert "notes_search" in at_first and "calendar_move" not in at_first
    assert "calendar_move" in offered and not offered & at_first
    assert not names(second["tools"]) & (at_first | offered)


def test_the_request_offers_the_tools_its_earlier_turns_point_to(bench: Bench) -> None:
    """Turn 1 read the dentist note (the home may read it); turn 2 (`--continue`) asks
    about the notes again: its plan request offers the calendar's tools the note speaks
    of, from the start. Redacted, the same turn points to nothing."""
    (data := bench.phone / "data").mkdir(exist_ok=True)
    (data / "notes.json").write_text(json.dumps([DENTIST]))

    def second_request() -> set[str]:
        """The tools turn 2's plan request offered, after turn 1 read the note."""
        read = Script(rounds=[Round(steps=[step("s1", "notes_search", query="dentist")])])
        bench.script.write_text(read.model_dump_json())
        ask(bench.phone, AskRequest(text="check my notes", route="remote"), Recorded())
        bench.script.write_text(Script(rounds=[], answer="Nothing new.").model_dump_json())
        offset = bench.heard.stat().st_size
        again = AskRequest(text="search my notes again", route="remote", continue_last=True)
        ask(bench.phone, again, Recorded())
        with bench.heard.open() as log:
            log.seek(offset)
            [request] = [json.loads(line) for line in log.read().splitlines()]
        return {t["function"]["name"] for t in request["tools"]}

    assert "calendar_move" not in second_request()
    (bench.phone / "policy.toml").write_text("private_to_home = true\n")
    offered = second_request()
    assert {"notes_search", "calendar_move"} <= offered


def test_the_node_plans_with_the_tools_a_round_offers() -> None:
    """The request offers notes_create; round 1's observations offer calendar_move (and
    a notes_create of another schema): the node's round 2 may call calendar_move (its
    schemas hold it), and the tool offered under a taken name replaces nothing."""
    backend = ScriptedBackend(
        [call("notes_create", text="milk"), call("calendar_move", id="e1"), "Moved."]
    )
    other = ToolSpec(function=FunctionSpec(name="notes_create", parameters={"type": "object"}))
    offers = [[MOVE, other], []]

    def offer(_: list[Observation]) -> list[ToolSpec]:
        return offers.pop(0)

    outcome = session(backend, plan_request(max_rounds=3), offer=offer)
    assert [[s.tool for s in p.steps] for p in outcome.plans] == [
        ["notes_create"],
        ["calendar_move"],
    ]
    first, second, _ = backend.rounds
    assert [t.function.name for t in first.tools] == ["notes_create"]
    assert list(second.tools) == [*TOOLS, MOVE]
