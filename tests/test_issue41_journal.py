"""Nothing leaves the journal open (issue 41): a value nested past what a decoder or a
serialiser takes, or any other failure while a plan runs, ends its step with a typed
outcome and closes the plan; the phone bounds a plan's lifetime whatever expiry the
planner set; a deep argument or result never hides what was done from `--json`. On the
phone's real executor, journal (SQLite) and files."""

from __future__ import annotations

import time
from typing import Any

import pytest
import trio

from hearth.companion.executor import SessionState
from hearth.companion.results import AskResult
from hearth.companion.tools.registry import Tier
from hearth.companion.turn import plan_view
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Limits

from .phone_kit import declared, make_executor, make_plan
from .test_labels import sent

DEEP = "[" * 1200  # an imported contact's name, a note, a clipboard: anyone's text


def _run(executor, plan, state=None):  # type: ignore[no-untyped-def]
    return trio.run(lambda: executor.execute(plan, state or SessionState(), home=False))


def _reply(plan, observations) -> str:  # type: ignore[no-untyped-def]
    """`hearth ask --json` of one plan: what the CLI writes."""
    view = plan_view(plan, observations)
    return AskResult(request_id="r", plans=[view], plan=view).model_dump_json()


def test_a_ref_into_deeply_nested_text_is_refused_and_closes_the_plan(tmp_path) -> None:
    """A `$ref` path into a result holding 1,200 nested `[`: `json.loads` raised
    RecursionError, the plan stayed open, and every later ask failed `internal`."""
    executor, _, data = make_executor(tmp_path)
    data.root.mkdir(parents=True, exist_ok=True)
    (data.root / "clipboard.txt").write_text(DEEP)
    plan = make_plan(
        ("s1", "clipboard_get", {}, []),
        ("s2", "notes_create", {"text": {"$ref": "s1.result.0"}}, ["s1"]),
    )
    obs = _run(executor, plan)
    assert [o.status for o in obs] == ["ok", "refused"]
    assert "nested deeper than" in (obs[1].error or "")
    assert executor.journal.unfinished() == []
    # the next ask (a fresh process: it resumes first) works
    later, _, _ = make_executor(tmp_path)
    assert trio.run(later.resume) == []
    assert [o.status for o in _run(later, make_plan(("s1", "notes_search", {}, [])))] == ["ok"]


def test_any_failure_while_a_plan_runs_ends_its_step_and_closes_the_plan(tmp_path) -> None:
    """The clipboard holds bytes that are no UTF-8 (written by another app): asking
    whether `clipboard_set` overwrites it raises UnicodeDecodeError, no HearthError. The
    step ends `error` with a reason, the plan goes on and is closed, and nothing is left
    to resume."""
    executor, _, data = make_executor(tmp_path)
    data.root.mkdir(parents=True, exist_ok=True)
    (data.root / "clipboard.txt").write_bytes(b"\xff\xfe\xfa not text")
    plan = make_plan(
        ("s1", "clipboard_set", {"text": "hello"}, []),
        ("s2", "notes_create", {"text": "after"}, []),
    )
    obs = _run(executor, plan)
    assert [o.status for o in obs] == ["error", "ok"]
    assert "UnicodeDecodeError" in (obs[0].error or "")
    assert executor.journal.unfinished() == []
    assert executor.journal.states(plan.plan_id) == {"s1": "error", "s2": "ok"}
    later, _, _ = make_executor(tmp_path)
    assert trio.run(later.resume) == []
    _reply(plan, obs)


class TimingOut:
    """Approves a plan's writes; a step's confirmation times out (a typed answer)."""

    async def confirm(self, request: Any) -> bool:
        if request.kind == "plan":
            return True
        raise HearthError(ErrorCode.TIMED_OUT, "the page closed")


def test_a_confirmation_answered_by_a_typed_error_leaves_no_plan_open(tmp_path) -> None:
    """A step refused by its confirmer's typed error (a timeout) is a refusal, not an
    unanswered confirmation: a failure in a later step still ends that step and closes
    the plan (once the refusal made later failures escape, and the plan stayed open)."""
    executor, _, data = make_executor(tmp_path)
    executor.confirmer = TimingOut()
    data.root.mkdir(parents=True, exist_ok=True)
    (data.root / "clipboard.txt").write_bytes(b"\xff\xfe\xfa not text")
    plan = make_plan(
        ("s1", "message_send", {"to": "+15550100", "body": "hi"}, []),
        ("s2", "clipboard_set", {"text": "hello"}, []),
    )
    obs = _run(executor, plan)
    assert [o.status for o in obs] == ["refused", "error"]
    assert executor.journal.unfinished() == []
    assert sent(data) == []


@pytest.mark.parametrize("limits", [Limits(deadline_s=120), None])
def test_the_phone_bounds_a_plans_lifetime_whatever_expiry_it_was_given(tmp_path, limits) -> None:
    """A plan that says it expires in a year, interrupted mid-step (the process stopped
    there: a crash), does not run when a later process resumes it past its request's
    deadline and a grace."""
    executor, _, data = make_executor(tmp_path)

    async def wait() -> dict[str, Any]:
        """Wait (the process is stopped while it does)."""
        await trio.sleep_forever()
        return {}

    executor.registry.add(declared(wait, Tier.READ_ONLY))
    plan = make_plan(
        ("s1", "wait", {}, []), ("s2", "message_send", {"to": "+15550100", "body": "hi"}, [])
    )
    plan = plan.model_copy(update={"expires_at": time.time() + 365 * 86400})

    async def stopped_mid_step() -> None:
        with trio.move_on_after(1):
            await executor.execute(plan, SessionState(limits=limits), home=False)

    trio.run(stopped_mid_step)
    assert [p for p, *_ in executor.journal.unfinished()] == [plan.plan_id]
    executor.journal.db.execute("UPDATE plans SET accepted_at=accepted_at-4000")
    later, asked, _ = make_executor(tmp_path, answer=True)  # an unrelated `hearth ask --yes`
    later.registry.add(declared(wait, Tier.READ_ONLY))
    assert trio.run(later.resume) == [plan.plan_id]
    assert sent(data) == [] and asked.asked == []
    assert later.journal.states(plan.plan_id) == {"s1": "skipped", "s2": "skipped"}
    assert later.journal.unfinished() == []


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [250, 254, 255])  # 255: the deepest a plan validates
def test_a_deep_argument_is_reported_and_the_reply_can_be_written(tmp_path, depth) -> None:
    """An argument 250 deep (within the wire's limit) went through, and the reply
    exceeded the serialiser's depth: `--json` exited `internal` after the step ran.
    The step is refused (nothing ran) and the reply says so, showing the argument as
    deep as a reply can be written."""
    executor, _, _ = make_executor(tmp_path)
    posted: list[Any] = []

    async def post(payload: list[Any]) -> dict[str, Any]:
        """Post something."""
        posted.append(payload)
        return {"posted": payload}

    executor.registry.add(declared(post, Tier.IRREVERSIBLE))
    plan = make_plan(("s1", "post", {"payload": _nested(depth)}, []))
    obs = _run(executor, plan)
    assert [o.status for o in obs] == ["refused"] and posted == []
    assert "nested deeper than" in (obs[0].error or "")
    assert '"status":"refused"' in _reply(plan, obs)
    assert executor.journal.unfinished() == []


def test_a_deep_result_is_reported_as_what_was_done(tmp_path) -> None:
    """A tool that ran and answers with a result nested deeper than the phone keeps:
    the step says it ran (`error`, with why), the plan is closed, the reply is written."""
    executor, _, _ = make_executor(tmp_path)
    posted: list[Any] = []

    async def post(payload: str) -> Any:
        """Post something."""
        posted.append(payload)
        return _nested(250)

    executor.registry.add(declared(post, Tier.IRREVERSIBLE))
    plan = make_plan(("s1", "post", {"payload": "hi"}, []))
    obs = _run(executor, plan)
    assert posted == ["hi"] and [o.status for o in obs] == ["error"]
    assert "it ran" in (obs[0].error or "")
    assert '"status":"error"' in _reply(plan, obs)
    assert executor.journal.unfinished() == []
