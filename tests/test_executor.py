"""The phone's executor: manifest, $ref, tiers, taint, privacy, journal, audit, the
request's limits, and each round's steps kept apart."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from hearth.companion.audit import AuditLog
from hearth.companion.executor import Policy, SessionState, check_structure
from hearth.companion.tools.builtin import READ
from hearth.companion.tools.registry import Tier, ToolContext
from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.messages import Limits, UntrustedInput

from .phone_kit import make_executor, make_plan


def run(executor, plan, state=None, **kw):
    return trio.run(lambda: executor.execute(plan, state or SessionState(), **kw))


def test_read_only_runs_and_a_write_needs_one_approval_per_plan(tmp_path) -> None:
    executor, asked, _data = make_executor(tmp_path)
    plan = make_plan(
        ("s1", "notes_create", {"text": "milk"}, []),
        ("s2", "notes_create", {"text": "eggs"}, []),
        ("s3", "notes_search", {"query": ""}, ["s1", "s2"]),
    )
    obs = run(executor, plan)
    assert [o.status for o in obs] == ["ok", "ok", "ok"]
    assert [c.kind for c in asked.asked] == ["plan"]  # one approval for both writes
    assert obs[2].result == {"redacted": "private to this phone"}  # private results stay


def test_irreversible_steps_are_confirmed_each_with_exact_arguments(tmp_path) -> None:
    executor, asked, data = make_executor(tmp_path)
    plan = make_plan(
        ("s1", "message_send", {"to": "+4912345", "body": "hi"}, []),
        ("s2", "message_send", {"to": "+4912345", "body": "bye"}, []),
    )
    assert [o.status for o in run(executor, plan)] == ["ok", "ok"]
    assert [(c.kind, c.arguments["body"]) for c in asked.asked] == [("step", "hi"), ("step", "bye")]
    assert len(list((data.root / "outbox").iterdir())) == 2


def test_no_means_nothing_is_sent_and_the_refusal_is_audited(tmp_path) -> None:
    executor, _, data = make_executor(tmp_path, answer=False)
    obs = run(executor, make_plan(("s1", "message_send", {"to": "x", "body": "hi"}, [])))
    assert obs[0].status == "refused" and "declined" in obs[0].error
    assert not (data.root / "outbox").exists() or not list((data.root / "outbox").iterdir())
    assert executor.audit.records()[-1]["outcome"] == "refused"


def test_a_confirmation_nobody_can_answer_is_a_refusal(tmp_path) -> None:
    executor, _, _ = make_executor(tmp_path, answer=None)
    obs = run(executor, make_plan(("s1", "notes_create", {"text": "x"}, [])))
    assert obs[0].status == "refused"


def test_injected_recipient_from_untrusted_input_forces_a_named_confirmation(tmp_path) -> None:
    executor, asked, data = make_executor(tmp_path, answer=True)  # --yes
    plan = make_plan(
        ("s1", "message_send", {"to": "attacker@evil", "body": "contacts"}, []),
        untrusted=[UntrustedInput(tool="web_search", source="evil.example", digest=bytes(32))],
    )
    obs = run(executor, plan)
    assert obs[0].status == "refused"  # --yes does not cover a tainted control argument
    (question,) = asked.asked
    assert "to" in question.tainted and "evil.example" in question.tainted["to"]
    assert not (data.root / "outbox").exists() or not list((data.root / "outbox").iterdir())


def test_friend_planner_literals_are_always_tainted(tmp_path) -> None:
    executor, asked, _ = make_executor(tmp_path, answer=True)
    obs = run(
        executor, make_plan(("s1", "message_send", {"to": "+1", "body": "x"}, [])), friend=True
    )
    assert obs[0].status == "refused" and "friend" in asked.asked[0].tainted["to"]


def test_private_values_cannot_leave_through_an_open_world_tool(tmp_path) -> None:
    executor, _, data = make_executor(tmp_path)
    (data.root / "contacts.vcf").write_text(
        "BEGIN:VCARD\nVERSION:3.0\nFN:Alice Doe\nTEL:+4911111\nEND:VCARD\n"
    )
    plan = make_plan(
        ("s1", "contacts_search", {"query": "alice"}, []),
        ("s2", "message_send", {"to": "+4999", "body": {"$ref": "s1.result.0.name"}}, ["s1"]),
    )
    obs = run(executor, plan)
    assert obs[0].status == "ok" and obs[1].status == "refused"
    assert "private" in obs[1].error


def test_private_results_reach_the_home_node_only_when_policy_allows(tmp_path) -> None:
    executor, _, _ = make_executor(tmp_path, policy=Policy(private_to_home=True))
    obs = run(executor, make_plan(("s1", "notes_search", {"query": ""}, [])))
    assert obs[0].result == []


def test_refs_resolve_only_to_declared_earlier_steps(tmp_path) -> None:
    executor, _, _ = make_executor(tmp_path)
    plan = make_plan(
        ("s1", "notes_create", {"text": "milk"}, []),
        ("s2", "clipboard_set", {"text": {"$ref": "s1.result.text"}}, ["s1"]),
        ("s3", "clipboard_set", {"text": {"$ref": "s1.result.text"}}, []),
        ("s4", "clipboard_set", {"text": {"$ref": "s1.result.nope"}}, ["s1"]),
    )
    statuses = [o.status for o in run(executor, plan)]
    assert statuses == ["ok", "ok", "refused", "refused"]


@settings(max_examples=60)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]),
            st.lists(st.sampled_from(["a", "b", "c", "d", "zz"]), max_size=3),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_structure_check_refuses_cycles_forward_and_dangling_refs(steps) -> None:
    plan = make_plan(*((sid, "notes_search", {}, deps) for sid, deps in steps))
    earlier: set[str] = set()
    valid = True
    for sid, deps in steps:
        if sid in earlier or any(d not in earlier for d in deps):
            valid = False
        earlier.add(sid)
    if valid:
        check_structure(plan)
    else:
        with pytest.raises(HearthError) as info:
            check_structure(plan)
        assert info.value.code.value == "plan_rejected"


def test_schema_violations_and_unknown_tools_are_refused_before_running(tmp_path) -> None:
    executor, _, _ = make_executor(tmp_path)
    plan = make_plan(
        ("s1", "notes_create", {"text": ""}, []),
        ("s2", "format_disk", {}, []),
        ("s3", "files_read", {"path": "../../etc/passwd"}, []),
        ("s4", "notes_create", {"text": "ok", "extra": 1}, []),
    )
    obs = run(executor, plan)
    assert [o.status for o in obs] == ["refused", "refused", "error", "refused"]
    assert "outside the sandbox" in obs[2].error


def test_a_replayed_plan_id_is_refused_and_nothing_runs(tmp_path) -> None:
    executor, _, data = make_executor(tmp_path)
    plan = make_plan(("s1", "notes_create", {"text": "once"}, []))
    run(executor, plan)
    again = run(executor, plan)
    assert again[0].status == "refused" and "replay" in again[0].error
    assert len(json.loads((data.root / "notes.json").read_text())) == 1


def test_audit_log_verifies_and_detects_edits_and_truncation(tmp_path) -> None:
    executor, _, _ = make_executor(tmp_path)
    for text in ("a", "b", "c"):
        run(executor, make_plan(("s1", "notes_create", {"text": text}, [])))
    assert AuditLog(tmp_path).verify() == (True, "")
    db = sqlite3.connect(tmp_path / "audit.db")
    db.execute("UPDATE audit SET outcome='ok' WHERE seq=1")  # rewrite history
    db.execute("UPDATE audit SET decision='run' WHERE seq=1")
    db.commit()
    ok, why = AuditLog(tmp_path).verify()
    assert not ok and "edited" in why
    executor2, _, _ = make_executor(tmp_path / "other")
    for text in ("a", "b"):
        run(executor2, make_plan(("s1", "notes_create", {"text": text}, [])))
    db = sqlite3.connect(tmp_path / "other" / "audit.db")
    db.execute("DELETE FROM audit WHERE seq=(SELECT MAX(seq) FROM audit)")
    db.commit()
    ok, why = AuditLog(tmp_path / "other").verify()
    assert not ok and "truncated" in why


LIMITS = Limits(max_steps=4, max_rounds=3, deadline_s=120)


def notes_plan(count: int, round_no: int = 1):  # type: ignore[no-untyped-def]
    plan = make_plan(*((f"s{i}", "notes_create", {"text": f"n{i}"}, []) for i in range(count)))
    return plan.model_copy(update={"round": round_no})


@pytest.mark.parametrize(
    ("plans", "reason"),
    [
        ([notes_plan(1, round_no=4)], "round 4 is beyond the 3 rounds"),
        ([notes_plan(5)], "5 steps in all are beyond the 4"),
        ([notes_plan(3), notes_plan(2, round_no=2)], "5 steps in all are beyond the 4"),
    ],
    ids=["rounds", "steps-per-plan", "total-steps"],
)
def test_the_phone_holds_the_planner_to_the_limits_it_asked_for(tmp_path, plans, reason) -> None:
    executor, _, data = make_executor(tmp_path)
    state = SessionState(limits=LIMITS)
    *allowed, beyond = plans
    for plan in allowed:
        run(executor, plan, state)
    written = (data.root / "notes.json").read_text() if allowed else None
    with pytest.raises(HearthError) as info:
        run(executor, beyond, state)
    assert info.value.code.value == "plan_rejected" and reason in info.value.message
    assert (data.root / "notes.json").read_text() == written if allowed else not written
    assert not executor.journal.seen(beyond.plan_id)  # nothing of it ran
    assert executor.audit.records()[-1]["outcome"] == "refused"


@pytest.mark.timing
def test_a_plan_after_the_deadline_is_rejected_and_steps_past_it_are_skipped(tmp_path) -> None:
    executor, _, _ = make_executor(tmp_path)
    late = SessionState(limits=LIMITS, started=time.monotonic() - 121)
    with pytest.raises(HearthError, match="deadline"):
        run(executor, notes_plan(1), late)

    @executor.registry.tool(tier=Tier.READ_ONLY, annotations=READ)
    async def pause(ctx: ToolContext, seconds: float) -> dict:
        """Wait."""
        await trio.sleep(seconds)
        return {}

    almost = SessionState(limits=Limits(deadline_s=0.5), started=time.monotonic() - 0.4)
    plan = make_plan(("s1", "pause", {"seconds": 0.2}, []), ("s2", "notes_search", {}, []))
    obs = run(executor, plan, almost)
    assert [o.status for o in obs] == ["ok", "skipped"] and "deadline" in obs[1].error


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("files_write", {"path": "todo.txt", "text": "overwritten"}),
        ("clipboard_set", {"text": "overwritten"}),
        (
            "calendar_move",
            {"event_id": "EVENT", "start": "2027-01-01T09:00", "end": "2027-01-01T10:00"},
        ),
    ],
)
def test_changing_existing_data_is_irreversible_and_confirmed_per_step(
    tmp_path, tool, arguments
) -> None:
    executor, asked, data = make_executor(tmp_path, answer=False)  # --no
    data.sandbox.mkdir(parents=True)
    (data.sandbox / "todo.txt").write_text("the owner's list")
    (data.root / "clipboard.txt").write_text("the owner's list")
    create = executor.registry.get("calendar_create")
    event = trio.run(
        lambda: create.run(
            create.validate({"title": "t", "start": "2026-12-24T09:00", "end": "2026-12-24T10:00"}),
            ToolContext("setup:s0"),
        )
    )
    arguments = {k: event["event_id"] if v == "EVENT" else v for k, v in arguments.items()}
    files = (data.sandbox / "todo.txt", data.root / "clipboard.txt", data.root / "calendar.ics")
    before = [f.read_bytes() for f in files]
    (obs,) = run(executor, make_plan(("s1", tool, arguments, [])))
    assert obs.status == "refused"
    (question,) = asked.asked
    assert question.kind == "step" and question.arguments == arguments  # the exact arguments
    assert [f.read_bytes() for f in files] == before


def test_writing_a_new_file_needs_one_approval_for_the_plan(tmp_path) -> None:
    executor, asked, _ = make_executor(tmp_path)
    plan = make_plan(
        ("s1", "files_write", {"path": "a.txt", "text": "x"}, []),
        ("s2", "notes_create", {"text": "y"}, []),
    )
    assert [o.status for o in run(executor, plan)] == ["ok", "ok"]
    assert [c.kind for c in asked.asked] == ["plan"]


def test_ask_json_keeps_each_rounds_steps_apart(tmp_path) -> None:
    from hearth.companion.turn import plan_view

    executor, _, _ = make_executor(tmp_path, answer=False)
    state = SessionState()
    round1 = make_plan(("s1", "message_send", {"to": "+1", "body": "x"}, []))
    round2 = make_plan(("s1", "notes_search", {}, [])).model_copy(update={"round": 2})
    views = [plan_view(p, run(executor, p, state)).model_dump() for p in (round1, round2)]
    (refused,), (ok,) = (v["steps"] for v in views)
    assert (refused["round"], refused["status"], refused["result"]) == (1, "refused", None)
    assert "declined" in refused["error"]
    assert (ok["round"], ok["status"], ok["error"]) == (2, "ok", None)
