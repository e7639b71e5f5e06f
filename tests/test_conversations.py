"""Conversations: kept in SQLite under the home, continued across restarts, earlier turns
sent to the model that answers, private results redacted on their way out."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path

import pytest

from hearth.companion.conversations import REDACTED_TEXT, Conversations, TurnLabels, history
from hearth.companion.egress import REDACTED, Destination, Egress, Policy
from hearth.companion.events import AskRequest
from hearth.companion.labels import CLEAN, PRIVATE
from hearth.companion.results import AskResult, PlanView, StepView
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .hostile.harness import Bench
from .hostile.script import Round, Script
from .phone_kit import Recorded, ask

READ = {"id": "s1", "tool": "device_status", "arguments": {}}


def a_turn(request_id: str, result: object) -> AskResult:
    step = StepView(id="s1", round=1, tool="contacts_search", arguments={"query": "Al"},
                    status="ok", result=result)  # fmt: skip
    plan = PlanView(plan_id="p1", signer="phone", round=1, steps=[step])
    return AskResult(request_id=request_id, plans=[plan], plan=plan, answer="Found Alice.")


def test_an_apps_requests_are_kept_apart_and_an_older_database_gains_the_source(
    tmp_path: Path,
) -> None:
    path = tmp_path / "conversations.db"
    older = sqlite3.connect(path)  # as a companion made it before conversations had a source
    older.executescript(
        "CREATE TABLE conversations (id TEXT PRIMARY KEY, title TEXT NOT NULL,"
        " created REAL NOT NULL, updated REAL NOT NULL);"
        "INSERT INTO conversations VALUES ('old', 'an old one', 1.0, 1.0);"
    )
    older.commit()
    older.close()
    store = Conversations(path)
    app = store.for_request(None, False)
    store.append(app, "generate a title", a_turn("r1", {}), set(), source="api")
    assert [(c.id, c.source) for c in store.summaries().conversations] == [("old", "user")]
    everyone = store.summaries(everyone=True).conversations
    assert [(c.id, c.source) for c in everyone] == [(app, "api"), ("old", "user")]
    assert store.for_request(None, True) == "old"  # --continue: the user's, not the app's
    assert Conversations(path).summaries(everyone=True).conversations == everyone  # reopened


def test_turns_are_kept_titled_and_listed(tmp_path: Path) -> None:
    store = Conversations(tmp_path / "conversations.db")
    assert store.for_request(None, True) != store.for_request(None, True)  # none yet: new
    first = store.for_request(None, False)
    store.append(first, "  plan   a trip " + "x" * 100, a_turn("r1", {"n": 1}), set())
    second = store.for_request(None, False)
    assert [c.id for c in store.summaries().conversations] == [first]  # kept with a turn
    store.append(second, "another thing", a_turn("r2", {"n": 2}), set())
    assert store.for_request(None, True) == second  # --continue: the latest
    assert store.for_request(first, False) == first
    with pytest.raises(HearthError) as info:
        store.for_request("no-such-id", False)
    assert info.value.code is ErrorCode.INVALID_INPUT
    listed = store.summaries().conversations
    assert [c.id for c in listed] == [second, first]
    assert listed[1].title == "plan a trip " + "x" * 48 and listed[1].turns == 1
    detail = store.detail(first).model_dump(mode="json")
    assert detail["turns"][0]["text"].startswith("  plan   a trip")
    assert detail["turns"][0]["plans"][0]["steps"][0]["result"] == {"n": 1}
    assert stat.S_IMODE((tmp_path / "conversations.db").stat().st_mode) == 0o600


def test_private_results_of_earlier_turns_leave_only_as_the_policy_allows(tmp_path) -> None:
    store = Conversations(tmp_path / "conversations.db")
    cid = store.for_request(None, False)
    secret = {"name": "Alice Quartermain", "tel": "+49170555123"}
    labels = TurnLabels(input=CLEAN, answer=PRIVATE, steps={"p1/s1": PRIVATE}, planned_at="phone")
    store.append(cid, "who is Al?", a_turn("r1", secret), {"p1/s1"}, labels)
    turns = store.turns(cid)
    egress = Egress(Policy())
    bound = {"max_turns": 8, "max_chars": 10_000}
    home = history(turns, egress, Destination.HOME, **bound)
    assert [m.role for m in home] == ["user", "assistant", "tool", "assistant"]
    assert "<tool_call>" in home[1].content and "contacts_search" in home[1].content
    assert json.loads(home[2].content) == REDACTED and "Quartermain" not in str(home)
    assert home[3].content == REDACTED_TEXT  # the answer the phone wrote from it, too
    phone = history(turns, egress, Destination.PHONE, **bound)
    assert json.loads(phone[2].content) == secret  # the phone's own model sees it whole
    trusting = history(turns, Egress(Policy(private_to_home=True)), Destination.HOME, **bound)
    assert json.loads(trusting[2].content) == secret
    assert history(turns, egress, Destination.HOME, max_turns=0, max_chars=10_000) == []
    assert history(turns, egress, Destination.HOME, max_turns=8, max_chars=10) == []


@pytest.mark.timeout(240)
def test_a_conversation_continues_after_a_restart_and_reaches_the_node(
    bench: Bench,
) -> None:
    script = Script(rounds=[Round.model_validate({"steps": [READ]})], answer="Battery ok.")
    bench.script.write_text(script.model_dump_json())

    # a new Service (as a new process would open) for each ask
    first = ask(bench.phone, AskRequest(text="How is my battery?", route="remote"), Recorded())
    follow_up = AskRequest(text="And now?", route="remote", continue_last=True)
    again = ask(bench.phone, follow_up, Recorded())
    assert again.conversation_id == first.conversation_id
    requests = bench.plan_requests()
    conversation = requests[-1]["conversation"]
    roles = [m["role"] for m in conversation]
    assert roles == ["user", "assistant", "tool", "assistant", "user"]
    assert conversation[0]["content"] == "How is my battery?"
    assert "device_status" in conversation[1]["content"]
    assert conversation[3]["content"] == "Battery ok."
    assert conversation[4]["content"] == "And now?"
    assert len(requests[0]["conversation"]) == 1  # a new conversation sends no history
