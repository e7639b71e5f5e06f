"""A friend's planner with history (issue 30), on real processes: with
`private_to_home = true` and `friend_planners = "when-home-unreachable"`, turn 1 at
home reads a private note and an attached document and quotes both; the home is
killed; turn 2 (`--continue`) is planned by the friend's real `hearth-node`; turn 3 by
the friend's node again, now the hostile-node harness on the friend's identity and home,
which logs every frame it receives: the request holds redaction markers, never the
note or the document (nor their quotes in turn 1's answer)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from hearth.companion.events import AskRequest
from hearth.protocol.transport.addressbook import AddressBook

from .friend_kit import home_with_friend
from .hostile.harness import start_hostile
from .hostile.script import Round, Script
from .hostile.suites import PHONE_NOTES, SECRET, step
from .nodes import start_node, wait_until
from .phone_kit import Recorded, ask

BUDGET = "The budget is 4711."


@pytest.mark.timeout(600)
def test_a_friend_planning_after_the_home_died_gets_redactions_not_private_turns(
    processes, tmp_path: Path, tiny_models, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, phone, friend_id = home_with_friend(processes, tmp_path, monkeypatch)
    model = str(tiny_models[0])
    real_friend = start_node(
        processes, tmp_path / "friend", "--model", model, config="plan_for_friends = true\n"
    )
    wait_until(lambda: "planner" in real_friend.status()["roles"], "the friend's planner role", 90)
    home.proc.terminate()
    home.proc.wait(timeout=30)
    (phone / "policy.toml").write_text(
        'private_to_home = true\ndocuments_to_home = "always"\n'
        'friend_planners = "when-home-unreachable"\n'
    )
    (data := phone / "data").mkdir(exist_ok=True)
    (data / "notes.json").write_text(json.dumps(PHONE_NOTES))
    minutes = tmp_path / "minutes.txt"
    minutes.write_text(BUDGET)

    note = PHONE_NOTES[0]["text"]
    home_script = tmp_path / "home-script.json"
    home_script.write_text(
        Script(
            rounds=[Round(steps=[step("s1", "notes_search", query="Bank")])],
            answer=f"Your note says {note}; the minutes say: {BUDGET}",
        ).model_dump_json()
    )
    friend_script = tmp_path / "friend-script.json"
    friend_script.write_text(Script(rounds=[], answer="I cannot see that.").model_dump_json())
    at_home = start_hostile(processes, home.home, home_script, tmp_path / "home-heard.jsonl")
    book = AddressBook(phone)
    book.remember(home.peer_id, at_home.addrs)
    book.remember(friend_id, real_friend.addrs)

    first = ask(
        phone,
        AskRequest(
            text="what's my PIN and the budget?", route="remote", attachments=[str(minutes)]
        ),
        Recorded(),
    )
    assert first.planner == home.peer_id and SECRET in first.answer and "4711" in first.answer
    os.kill(at_home.proc.pid, signal.SIGKILL)  # the home goes away
    at_home.proc.wait(timeout=30)

    second = ask(
        phone,
        AskRequest(text="and the rest?", route="remote", continue_last=True, tool_choice="none"),
        Recorded(),
    )
    assert second.conversation_id == first.conversation_id
    assert second.planner == friend_id and "friend" in second.reason, second
    assert real_friend.status()["served_for_others"] == 1

    real_friend.proc.terminate()  # the friend's node, now logging what it receives
    real_friend.proc.wait(timeout=30)
    friend_heard = tmp_path / "friend-heard.jsonl"
    friend = start_hostile(processes, tmp_path / "friend", friend_script, friend_heard)
    AddressBook(phone).remember(friend_id, friend.addrs)
    third = ask(phone, AskRequest(text="go on", route="remote", continue_last=True), Recorded())
    assert third.conversation_id == first.conversation_id and third.planner == friend_id
    heard = [json.loads(line) for line in friend_heard.read_text().splitlines()]
    [request] = [h for h in heard if h["frame"] == "plan_request"]
    said = json.dumps(request)
    assert "what's my PIN and the budget?" in said  # the owner's own words of turn 1
    assert "redacted" in said
    for private in (SECRET, "4921", "4711", "budget is", note):
        assert private not in said, private
    assert request["documents"] == []
