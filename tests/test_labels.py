"""Labels on every value: through `$ref`, a write tool's echo, errors and the journal."""

from __future__ import annotations

import json
import sqlite3

import pytest
import trio

from hearth.companion.confirm import Confirmation
from hearth.companion.egress import REDACTED_ERROR
from hearth.companion.executor import Policy, SessionState
from hearth.companion.journal import Journal
from hearth.companion.tools.registry import Annotations, Tier, Tool
from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.messages import UntrustedInput

from .phone_kit import Recorder, make_executor, make_plan, stop_before

SECRET = "vault code 4711-SECRET"
WEB = UntrustedInput(tool="web_search", source="evil.example", digest=bytes(32))


def run(executor, plan, state=None, **kw):  # type: ignore[no-untyped-def]
    return trio.run(lambda: executor.execute(plan, state or SessionState(), **kw))


def sent(data) -> list[str]:  # type: ignore[no-untyped-def]
    outbox = data.root / "outbox"
    return [p.read_text() for p in outbox.iterdir()] if outbox.exists() else []


@pytest.mark.parametrize("private_to_home", [False, True])
def test_a_private_value_never_reaches_the_node_through_an_error(tmp_path, private_to_home) -> None:
    executor, _, data = make_executor(tmp_path, policy=Policy(private_to_home=private_to_home))
    data.sandbox.mkdir(parents=True)
    (data.sandbox / "secret.txt").write_text(SECRET)
    plan = make_plan(
        ("s1", "files_read", {"path": "secret.txt"}, []),
        ("s2", "calendar_list", {"start": {"$ref": "s1.result.text"}}, ["s1"]),
        ("s3", "notes_create", {"text": {"$ref": "s1.result.nothing.here"}}, ["s1"]),
    )
    obs = run(executor, plan)
    assert [o.status for o in obs] == ["ok", "error", "refused"]
    if private_to_home:  # the owner lets private values home: still no tool echoes one
        assert obs[1].error == "start: not an ISO 8601 date-time"
    else:  # "s2 failed: redacted", and a $ref probing the private result learns nothing
        assert obs[1].error == obs[2].error == REDACTED_ERROR
        assert SECRET not in json.dumps([o.model_dump() for o in obs])
    assert "4711" not in json.dumps([o.model_dump() for o in obs[1:]])


def test_a_schema_error_names_the_argument_never_its_value() -> None:
    async def handler(ctx, **_):  # type: ignore[no-untyped-def]
        return None

    tool = Tool(
        name="demo.count",
        description="",
        handler=handler,
        tier=Tier.READ_ONLY,
        annotations=Annotations(),
        control_args=frozenset(),
        private=False,
        schema={"type": "object", "properties": {"n": {"type": "integer"}}},
    )
    with pytest.raises(HearthError) as info:
        tool.validate({"n": SECRET})
    assert "n:" in info.value.message and "4711" not in info.value.message


@pytest.mark.parametrize("friend", [False, True], ids=["after-web-input", "friend-planner"])
def test_a_write_tools_echo_carries_the_taint_of_its_arguments(tmp_path, friend) -> None:
    executor, asked, data = make_executor(tmp_path, answer=True)  # --yes
    executor.confirmer = asked = ContentReviewer()  # the owner reads the note and says yes
    plan = make_plan(
        ("s1", "notes_create", {"text": "+1-555-0199"}, []),
        ("s2", "message_send", {"to": {"$ref": "s1.result.text"}, "body": "hi"}, ["s1"]),
        untrusted=[] if friend else [WEB],
    )
    obs = run(executor, plan, friend=friend)
    assert obs[0].status == "ok"
    assert obs[1].status == "refused"  # --yes never covers it, as for the literal
    (question,) = [q for q in asked.asked if q.tool == "message_send"]
    assert ("friend" if friend else "evil.example") in question.tainted["to"]
    assert sent(data) == []


class ContentReviewer(Recorder):
    """An owner who approves writes whose only taint is their content (having read it),
    and nothing that untrusted input may have steered."""

    def __init__(self) -> None:
        super().__init__(True)

    async def confirm(self, request: Confirmation) -> bool:
        self.asked.append(request)
        return all(reason.startswith("content ") for reason in request.tainted.values())


def test_a_resumed_plan_has_its_session_taint_back(tmp_path) -> None:
    executor, _, data = make_executor(tmp_path)
    session = SessionState()
    round1 = make_plan(("s1", "device_status", {}, []), untrusted=[WEB])
    run(executor, round1, session)
    round2 = make_plan(("s1", "message_send", {"to": "+15550001111", "body": "hi"}, []))
    stop_before(executor, round2, "s1", session)  # a crash there
    later, asked, _ = make_executor(tmp_path, answer=True)  # an unrelated `hearth ask --yes`
    assert trio.run(later.resume) == [round2.plan_id]
    (question,) = asked.asked
    assert "evil.example" in question.tainted["to"]
    assert sent(data) == []
    assert later.journal.steps(round2.plan_id)["s1"].state == "refused"


def test_a_resumed_plan_gets_its_results_labels_back(tmp_path) -> None:
    executor, _, data = make_executor(tmp_path)
    (data.root / "contacts.vcf").write_text(
        "BEGIN:VCARD\nVERSION:3.0\nFN:Alice Doe\nTEL:+4911111\nEND:VCARD\n"
    )
    plan = make_plan(
        ("s1", "contacts_search", {"query": "alice"}, []),
        ("s2", "notes_create", {"text": {"$ref": "s1.result.0.phone.0"}}, ["s1"]),
        ("s3", "calendar_delete", {"event_id": "dentist"}, []),
        ("s4", "message_send", {"to": "+4999", "body": {"$ref": "s2.result.text"}}, ["s2"]),
    )
    stop_before(executor, plan, "s3")  # a crash there
    assert executor.journal.steps(plan.plan_id)["s2"].labels.private  # the note echoes a contact
    later, _, _ = make_executor(tmp_path, answer=True)
    trio.run(later.resume)
    record = later.journal.steps(plan.plan_id)["s4"]
    assert record.state == "refused" and "private" in (record.error or "")
    assert sent(data) == []


def test_a_plan_journaled_before_labels_resumes_with_the_strictest_labels(tmp_path) -> None:
    plan = make_plan(("s1", "message_send", {"to": "+15550001111", "body": "hi"}, []))
    db = sqlite3.connect(tmp_path / "journal.db")
    db.executescript(  # the journal as it was before labels
        "CREATE TABLE plans (plan_id TEXT PRIMARY KEY, signer TEXT NOT NULL, request_id TEXT "
        "NOT NULL, accepted_at REAL NOT NULL, state TEXT NOT NULL, body TEXT NOT NULL);"
        "CREATE TABLE steps (plan_id TEXT NOT NULL, step_id TEXT NOT NULL, tool TEXT NOT NULL, "
        "args TEXT NOT NULL, state TEXT NOT NULL, result TEXT, error TEXT, started_at REAL, "
        "finished_at REAL, PRIMARY KEY (plan_id, step_id));"
    )
    db.execute(
        "INSERT INTO plans VALUES (?, 'n', 'r', 0, 'accepted', ?)",
        (plan.plan_id, plan.model_dump_json()),
    )
    db.commit()
    db.close()
    Journal(tmp_path / "journal.db")  # migrates
    executor, asked, data = make_executor(tmp_path, answer=True)
    trio.run(executor.resume)
    assert asked.asked[0].tainted and sent(data) == []
