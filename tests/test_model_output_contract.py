"""A fresh-eyes attack on the model layer's contract (DESIGN "Model output"): schemas
that pass `check_schemas` end in a typed outcome, validation stays bounded, and what
is parsed is exactly what the grammar checked."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
import time
from typing import Any

import pytest
import trio

from hearth.companion.confirm import Confirmation
from hearth.companion.executor import SessionState
from hearth.companion.journal import SessionRecord
from hearth.companion.tools.registry import Annotations, Tier, Tool
from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.runtime import LlamaRuntime
from hearth.protocol.model.sampling import first_rejected
from hearth.protocol.model.toolcalls import ModelOutputError, ToolCall, parse, render_calls
from hearth.protocol.model.validate import check_schemas, validate_call
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .nodes import BIN
from .phone_kit import make_executor, make_plan, stop_before

pytestmark = [pytest.mark.review, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[1], n_ctx=512)


def _round_trips(runtime: LlamaRuntime, schemas: dict, calls: list[ToolCall]) -> list[ToolCall]:
    """The calls rendered, checked token by token against the grammar, parsed back."""
    rendered = render_calls(calls, schemas)
    grammar = tool_grammar(schemas, "required", 4)
    assert grammar is not None
    assert first_rejected(runtime._lib, runtime.llm, grammar, runtime.tokenize(rendered)) is None
    return parse(rendered, schemas).calls


@pytest.mark.parametrize("ref", ["#/nope", "https://example.com/schema.json"])
def test_an_unresolvable_ref_ends_in_a_typed_outcome(ref: str) -> None:
    schemas = {"t": {"type": "object", "properties": {"a": {"$ref": ref}}}}
    try:
        check_schemas(schemas)
    except HearthError as exc:
        assert exc.code is ErrorCode.INVALID_INPUT
        return
    with pytest.raises(ModelOutputError):  # was jsonschema's _WrappedReferencingError
        validate_call(ToolCall("t", {"a": 1}), schemas)


@pytest.mark.parametrize("name", [" a", "a ", "a\t"])
def test_a_parameter_name_with_outer_whitespace_parses_back_as_written(
    runtime: LlamaRuntime, name: str
) -> None:
    schemas = {
        "t": {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}
    }
    check_schemas(schemas)
    calls = [ToolCall("t", {name: "x"})]
    assert _round_trips(runtime, schemas, calls) == calls


def test_a_union_text_value_parses_back_as_the_string_the_grammar_accepted(
    runtime: LlamaRuntime,
) -> None:
    schemas = {
        "t": {
            "type": "object",
            "properties": {"v": {"type": ["string", "integer"], "maximum": 3}},
            "required": ["v"],
        }
    }
    check_schemas(schemas)
    calls = [ToolCall("t", {"v": "99"})]
    validate_call(calls[0], schemas)
    assert _round_trips(runtime, schemas, calls) == calls  # was {"v": 99}, then refused
    numbers = [ToolCall("t", {"v": 2})]  # a JSON reading the schema accepts stays JSON
    assert _round_trips(runtime, schemas, numbers) == numbers


# each step of the $ref chain doubles the work: 2^40 steps for one value
_FAN_OUT = """
defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(40)}
defs["d40"] = {"type": "integer"}
schemas = {"t": {"type": "object", "$defs": defs, "properties": {"a": {"$ref": "#/$defs/d0"}}}}
value = 1
"""
# recursion that fans out: each level of the value doubles the work (2^40 steps)
_RECURSIVE = """
defs = {"n": {"type": "object",
              "properties": {"a": {"allOf": [{"$ref": "#/$defs/n"}, {"$ref": "#/$defs/n"}]}}}}
schemas = {"t": {"type": "object", "$defs": defs, "properties": {"a": {"$ref": "#/$defs/n"}}}}
value = 1
for _ in range(40):
    value = {"a": value}
"""
_BURN = """
import json, sys, time
import trio
from hearth.protocol.model.limits import ModelLimits, ValidationLimits
from hearth.protocol.model.toolcalls import ToolCall
from hearth.protocol.model.validate import check_schemas, validate_calls
from hearth.protocol.wire.errors import HearthError

limits = ModelLimits(validation=ValidationLimits(deadline_s=0.5))

async def main():
    try:
        check_schemas(schemas)
        await validate_calls([ToolCall("t", {"a": value})], schemas, limits)
        outcome = "valid"
    except HearthError as exc:
        outcome = exc.code.value
    await trio.sleep(0.5)
    cpu = time.process_time()
    await trio.sleep(1.0)
    print(json.dumps({"outcome": outcome, "cpu_s": time.process_time() - cpu}))

trio.run(main)
"""


@pytest.mark.parametrize(
    ("case", "outcome"),
    [
        (_FAN_OUT, "invalid_input"),  # was: a thread abandoned at the deadline kept going
        (_RECURSIVE, "timed_out"),  # passes check_schemas; stops itself at the deadline
    ],
    ids=["ref-fan-out", "recursive-fan-out"],
)
def test_validation_past_its_deadline_stops_using_the_cpu(case: str, outcome: str) -> None:
    script = case + _BURN
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
    result = json.loads(out)
    assert result["outcome"] == outcome, err
    # idle: the process spends (almost) no CPU once the request has its answer
    assert result["cpu_s"] < 0.1, result  # a thread still validating takes ~1 s (less under load)


@pytest.mark.parametrize("args", [("grant",), ("grant", "PEER"), ("promote", "PEER", "planner")])
def test_roster_with_a_missing_or_unknown_argument_is_a_usage_error(args, tmp_path) -> None:
    done = subprocess.run(
        [str(BIN / "hearth-node"), "roster", "--json", "--home", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done  # was invalid_input (9)
    assert json.loads(done.stdout)["error"]["code"] == "usage"


@pytest.mark.parametrize("command", ["hearth", "hearth-node"])
@pytest.mark.parametrize("under", ["", "sub"])
def test_a_home_that_is_a_file_is_invalid_input(command: str, under: str, tmp_path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("")
    home = afile / under if under else afile
    done = subprocess.run(
        [str(BIN / command), "status", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 9, done  # was internal (1)
    assert json.loads(done.stdout)["error"]["code"] == "invalid_input"


def test_a_required_parameter_without_a_property_schema_can_be_written(
    runtime: LlamaRuntime,
) -> None:
    schemas = {"t": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["q"]}}
    check_schemas(schemas)
    calls = [ToolCall("t", {"q": "x"})]
    validate_call(calls[0], schemas)
    assert _round_trips(runtime, schemas, calls) == calls  # was refused by the grammar


def test_a_plan_resumed_past_its_expiry_runs_no_more_steps(tmp_path) -> None:
    executor, _, data = make_executor(tmp_path)
    plan = make_plan(
        ("s1", "device_status", {}, []),
        ("s2", "message_send", {"to": "+15550001111", "body": "hi"}, []),
        ("s3", "notes_create", {"text": "sent"}, []),
    ).model_copy(update={"expires_at": time.time() - 1})  # it expires while interrupted
    stop_before(executor, plan, "s2")  # a crash there
    later, asked, _ = make_executor(tmp_path, answer=True)  # a later `hearth ask --yes`
    assert trio.run(later.resume) == [plan.plan_id]
    steps = later.journal.steps(plan.plan_id)
    assert steps["s1"].state == "ok"
    assert [steps[s].state for s in ("s2", "s3")] == ["skipped", "skipped"]  # were run
    assert "expired" in (steps["s2"].error or "")
    assert asked.asked == [] and not (data.root / "outbox").exists()
    assert trio.run(later.resume) == []


def test_a_step_cut_off_in_a_plan_now_expired_is_not_rerun(tmp_path) -> None:
    executor, asked, data = make_executor(tmp_path)
    plan = make_plan(("s1", "message_send", {"to": "+15550001111", "body": "hi"}, []))
    plan = plan.model_copy(update={"expires_at": time.time() - 1})
    session = SessionRecord(tainted_by=frozenset(), friend=False)
    executor.journal.accept(plan.plan_id, plan.signer, "r", plan.model_dump_json(), session)
    executor.journal.started(plan.plan_id, "s1", "message_send", {})  # then a crash
    assert trio.run(executor.resume) == [plan.plan_id]
    record = executor.journal.steps(plan.plan_id)["s1"]
    assert record.state == "skipped" and "may or may not" in (record.error or "")
    assert asked.asked == [] and not (data.root / "outbox").exists()  # was: asked, sent


def test_the_union_readings_of_one_output_share_one_time_budget() -> None:
    """Each XML value of a union with strings is read against its schema within
    `reading_s`; all of one output's readings together within `readings_s` (was: no
    bound across parameters: 400 costly ones kept a node's event loop 20 s). Eight
    readings that each need far more than `reading_s` use it up, so a cheap ninth is
    undecided and reads as JSON, though 7 breaks its `maximum` (decided, it stays text)."""
    fan_out = {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/d"}] * 2}}
    costly = {"type": ["string", "array"], "items": {"$ref": "#/$defs/d"}}
    properties: dict[str, Any] = {f"p{i}": costly for i in range(8)}
    schema = {
        "type": "object",
        "$defs": {"d": fan_out},
        "properties": properties | {"last": {"type": ["string", "integer"], "maximum": 5}},
    }
    check_schemas({"t": schema})
    deep = "[" * 30 + "]" * 30  # 2**30 checks to decide
    body = "".join(f"<parameter=p{i}>\n{deep}\n</parameter>\n" for i in range(8))
    output = f"<tool_call>\n<function=t>\n{body}<parameter=last>\n7\n</parameter>\n"
    [call] = parse(output + "</function>\n</tool_call>", {"t": schema}).calls
    assert call.arguments["last"] == 7
    alone = output.replace(body, "") + "</function>\n</tool_call>"
    assert parse(alone, {"t": schema}).calls[0].arguments == {"last": "7"}  # decided in time


class _AwayUntil:
    """Answers yes, but only once `until` (wall clock) has passed: the owner was away."""

    def __init__(self, until: float) -> None:
        self.until = until
        self.asked: list[Confirmation] = []

    async def confirm(self, request: Confirmation) -> bool:
        self.asked.append(request)
        while time.time() < self.until:  # bounded: `until` is a second away
            await trio.sleep(0.05)
        return True


def test_a_resumed_plan_that_expires_while_a_confirmation_waits_runs_nothing(tmp_path) -> None:
    """Expiry is checked before each tool runs, not once when resuming starts (was: the
    owner's late yes sent the message of a plan expired meanwhile)."""
    executor, _, data = make_executor(tmp_path)
    plan = make_plan(("s1", "message_send", {"to": "+15550001111", "body": "hi"}, []))
    plan = plan.model_copy(update={"expires_at": time.time() + 1})
    session = SessionRecord(tainted_by=frozenset(), friend=False)
    executor.journal.accept(plan.plan_id, plan.signer, "r", plan.model_dump_json(), session)
    executor.journal.started(plan.plan_id, "s1", "message_send", {})  # then a crash
    executor.confirmer = away = _AwayUntil(plan.expires_at)
    assert trio.run(executor.resume) == [plan.plan_id]
    assert away.asked  # asked while the plan was still valid
    record = executor.journal.steps(plan.plan_id)["s1"]
    assert record.state == "skipped" and "expired" in (record.error or "")
    assert not (data.root / "outbox").exists()


def test_a_plan_resumed_after_the_clock_went_back_runs_nothing(tmp_path) -> None:
    """A clock earlier than the plan's acceptance says nothing of how long has passed:
    the plan runs no more steps (was: an expired plan looked valid again)."""
    executor, asked, data = make_executor(tmp_path)
    plan = make_plan(("s1", "message_send", {"to": "+15550001111", "body": "hi"}, []))
    session = SessionRecord(tainted_by=frozenset(), friend=False)
    executor.journal.accept(plan.plan_id, plan.signer, "r", plan.model_dump_json(), session)
    executor.journal.started(plan.plan_id, "s1", "message_send", {})  # then a crash
    later = time.time() + 3600  # accepted an hour "from now": the clock was set back since
    executor.journal.db.execute("UPDATE plans SET accepted_at=?", (later,))
    assert trio.run(executor.resume) == [plan.plan_id]
    record = executor.journal.steps(plan.plan_id)["s1"]
    assert record.state == "skipped" and "clock" in (record.error or "")
    assert asked.asked == [] and not (data.root / "outbox").exists()


class _Counting(http.server.BaseHTTPRequestHandler):
    """Serves a schema and counts who asked for it."""

    asked: list[str] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        body = b'{"type": "integer"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_remote_ref_in_a_tool_schema_is_never_fetched(tmp_path) -> None:
    """A schema is the sender's: a `$ref` to a URL would make the node (or the phone,
    for an MCP server's schema) fetch it, into the owner's LAN, without a timeout."""
    httpd = http.server.HTTPServer(("127.0.0.1", 0), _Counting)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/schema.json"
    schema = {"type": "object", "properties": {"a": {"$ref": url}}}
    tool = Tool(
        name="probe",
        description="",
        handler=_never_called,
        tier=Tier.READ_ONLY,
        annotations=Annotations(),
        control_args=frozenset(),
        private=False,
        schema=schema,
        source="mcp:probe",
    )
    try:
        with pytest.raises(HearthError):
            check_schemas({"t": schema})
            validate_call(ToolCall("t", {"a": 1}), {"t": schema})
        with pytest.raises(HearthError) as refused:
            tool.validate({"a": 1})
        assert refused.value.code is ErrorCode.PLAN_REJECTED
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert _Counting.asked == []  # was: ["/schema.json"], fetched for each check


async def _never_called(ctx: object, **arguments: object) -> None:
    raise AssertionError("not called")


@pytest.mark.parametrize(
    "output",
    [
        "<tool_call>\n<function=t>\n<parameter=v>\n{deep}\n</parameter>\n</function>\n</tool_call>",
        '<tool_call>{{"name": "t", "arguments": {{"v": {deep}}}}}</tool_call>',
        '<tool_call>{{"name": "t", "arguments": "{{\\"v\\": {deep}}}"}}</tool_call>',
    ],
    ids=["xml", "json", "double-encoded"],
)
def test_model_output_nested_past_the_recursion_limit_is_a_typed_refusal(output: str) -> None:
    """The grammar's JSON values have no depth bound: `[` 100,000 times is a refused
    call (was: RecursionError out of `parse`, an internal error)."""
    schemas = {"t": {"type": "object", "properties": {"v": {"type": "array"}}}}
    with pytest.raises(ModelOutputError, match="nested too deep"):
        parse(output.format(deep="[" * 100_000 + "]" * 100_000), schemas)


@pytest.mark.parametrize(
    "bound",
    [{"maxLength": 10**400}, {"minimum": -(2**64), "maximum": 1}, {"maximum": float("inf")}],
    ids=["past-float", "past-msgpack", "past-json"],
)
def test_a_number_no_float_holds_is_refused_before_the_grammar(bound: dict) -> None:
    """A tool server's JSON may hold any integer (and Python's, Infinity): was
    accepted, then `tool_grammar` raised OverflowError, or msgpack could not send the
    request, or an upstream server could not read it (internal errors)."""
    schemas = {"t": {"type": "object", "properties": {"a": bound}}}
    with pytest.raises(HearthError) as refused:
        check_schemas(schemas)
    assert refused.value.code is ErrorCode.INVALID_INPUT


def test_a_server_schema_slow_to_check_refuses_its_step_without_blocking_the_phone(
    tmp_path,
) -> None:
    """Recursion that fans out passes `check_schemas` (mounting); the plan's deep
    argument then costs 2^40 steps. Was: checked on the event loop, for good."""
    defs = {"n": {"type": "object", "properties": {"a": {"allOf": [{"$ref": "#/$defs/n"}] * 2}}}}
    schema = {"type": "object", "$defs": defs, "properties": {"a": {"$ref": "#/$defs/n"}}}
    check_schemas({"slow.check": schema})
    executor, _, _ = make_executor(tmp_path)
    executor.registry.add(
        Tool(
            name="slow.check",
            description="",
            handler=_never_called,
            tier=Tier.READ_ONLY,
            annotations=Annotations(read_only=True, destructive=False, open_world=False),
            control_args=frozenset(),
            private=False,
            schema=schema,
            source="mcp:slow",
        )
    )
    value: object = {}  # valid: every path is checked
    for _ in range(40):
        value = {"a": value}
    plan = make_plan(("s1", "slow.check", {"a": value}, []))
    ticks = []

    async def go():  # type: ignore[no-untyped-def]
        async with trio.open_nursery() as nursery:

            async def tick() -> None:
                while True:
                    ticks.append(1)
                    await trio.sleep(0.1)

            nursery.start_soon(tick)
            outcomes = await executor.execute(plan, SessionState())
            nursery.cancel_scope.cancel()
        return outcomes

    (outcome,) = trio.run(go)
    assert outcome.status == "refused" and "too long" in (outcome.error or ""), outcome
    assert len(ticks) >= 3  # the event loop ran while the schema was checked


def test_the_patterns_of_one_request_compile_within_a_bound() -> None:
    """RE2 matches in linear time but compiles in time and memory in proportion to the
    program: 200 tools, each a distinct 25-byte pattern of 32,000 instructions, were
    all compiled on the caller's thread (1 s of CPU here; a 1 MiB request holds
    40,000 of them), and up to 512 kept."""
    schemas = {
        f"t{i}": {
            "type": "object",
            "properties": {"a": {"type": "string", "pattern": f"(?:.{{1000}}|[^b]{{1000}}){i}"}},
        }
        for i in range(200)
    }
    with pytest.raises(HearthError, match="RE2 instructions in all") as refused:
        check_schemas(schemas)
    assert refused.value.code is ErrorCode.INVALID_INPUT
    check_schemas(dict(list(schemas.items())[:10]))  # a few such patterns are fine
    big = "(?:" + "|".join(f"[^{c}]{{1000}}" for c in "abcdefghijklmnopqrstuvwxyz") + ")"
    one = {"t": {"type": "object", "properties": {"a": {"type": "string", "pattern": big}}}}
    with pytest.raises(HearthError, match="too large to compile"):  # 289 bytes, 416,000
        check_schemas(one)  # instructions: was compiled (0.6 s, 8 MiB)


def test_a_call_nested_past_the_bound_is_refused_not_a_conversation_breaker() -> None:
    """A value 700 deep parsed (json.loads stops near 1,000) and passed an empty
    schema, then every later render of the history (conversations, the local API's
    `tool_calls`) raised RecursionError."""
    deep = "[" * 700 + "]" * 700
    output = f"<tool_call>\n<function=t>\n<parameter=v>\n{deep}\n</parameter>\n</function>\n"
    output += "</tool_call>"
    with pytest.raises(ModelOutputError, match="nested too deep"):  # was: parsed
        parse(output, {"t": {"type": "object", "properties": {"v": {}}}})
    with pytest.raises(HearthError) as refused:  # a client's call, as the API reads it
        render_calls([ToolCall("t", json.loads(f'{{"v": {deep}}}'))])
    assert refused.value.code is ErrorCode.INVALID_INPUT
    calls = [ToolCall("t", {"v": json.loads("[" * 60 + "]" * 60)})]
    assert parse(render_calls(calls)).calls == calls  # deep enough for any real tool
