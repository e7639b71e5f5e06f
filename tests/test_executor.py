"""The phone's executor: manifest, $ref, tiers, taint, privacy, journal, audit."""

from __future__ import annotations

import json
import sqlite3

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from hearth.companion.audit import AuditLog
from hearth.companion.executor import Policy, SessionState, check_structure
from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.messages import UntrustedInput

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
