"""The home node as a real process: pairing, plan sessions, admission, faults."""

from __future__ import annotations

import json
import os
import secrets
import signal

import anyio
import pytest
import trio

from hearth.protocol.model.toolcalls import ToolCall
from hearth.protocol.model.validate import validate_call
from hearth.protocol.transport.pairing import redeem
from hearth.protocol.transport.plans import PLAN_PROTOCOL, run_plan_session
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.frames import PREFIX
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.invite import Invite, parse_invite
from hearth.protocol.wire.messages import (
    ChatMessage,
    Limits,
    Observation,
    PlanRequest,
    ToolSpec,
)

from .nodes import cli, pair_phone, start_node
from .upstream_servers import command, free_port, wait_serving

TOOLS = [
    ToolSpec.model_validate(
        {
            "function": {
                "name": "notes_create",
                "description": "Make a note",
                "parameters": {
                    "type": "object",
                    "properties": {"text": {"type": "string", "maxLength": 30}},
                    "required": ["text"],
                },
            }
        }
    ),
    ToolSpec.model_validate(
        {
            "function": {
                "name": "alarm_set",
                "description": "Set an alarm",
                "parameters": {
                    "type": "object",
                    "properties": {"minutes": {"type": "integer", "minimum": 0, "maximum": 99}},
                    "required": ["minutes"],
                },
            }
        }
    ),
]
SCHEMAS = {t.function.name: dict(t.function.parameters) for t in TOOLS}


def request(rid: str = "r1", **limits) -> PlanRequest:
    return PlanRequest(
        request_id=rid,
        tool_choice="required",
        tools=TOOLS,
        conversation=[ChatMessage(role="user", content="note milk and wake me in 5 minutes")],
        limits=Limits(max_rounds=2, max_steps=2, max_tokens=300, **limits),
    )


async def ok_observations(plan) -> list[Observation]:
    return [Observation(step_id=s.id, status="ok", result={"done": True}) for s in plan.steps]


@pytest.fixture
def node(processes, tmp_path, tiny_models):
    return start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))


@pytest.fixture
def phone(node, tmp_path):
    return pair_phone(tmp_path / "phone", node.invite())


def plan(phone, node, req: PlanRequest, **kw):
    async def go():
        host = phone.host()
        async with host.run([]):
            stream = await host.open(node.peer_id, PLAN_PROTOCOL, node.addrs)
            return await run_plan_session(
                stream, req, phone_id=host.peer_id, execute=kw.pop("execute", ok_observations), **kw
            )

    return trio.run(go)


def test_paired_phone_gets_a_signed_valid_plan_then_a_final(node, phone) -> None:
    tokens = []

    async def on_token(token) -> None:
        tokens.append(token.text)

    outcome = plan(phone, node, request(), on_token=on_token)
    assert outcome.plans, "round 1 with tool_choice=required yields a plan"
    first = outcome.plans[0]
    assert first.signer == node.peer_id and first.audience == peer_id_of(phone.key)
    assert first.round == 1 and 1 <= len(first.steps) <= 2
    for step in first.steps:
        validate_call(ToolCall(step.tool, dict(step.arguments)), SCHEMAS)
    assert outcome.final.rounds == 1  # round 2 is forced to answer
    assert tokens and outcome.tokens == len(tokens)
    members = json.loads(cli("hearth-node", "roster", "--json", "--home", str(node.home)).stdout)[
        "members"
    ]
    assert {"peer_id": peer_id_of(phone.key), "roles": ["phone"]}.items() <= {
        **next(m for m in members if m["peer_id"] == peer_id_of(phone.key))
    }.items()


def test_a_used_token_finds_no_listener_and_changes_nothing(node, phone, tmp_path) -> None:
    uri = node.invite()
    pair_phone(tmp_path / "second", uri)
    before = node.status()
    from hearth.protocol.transport.keys import create_identity

    key = create_identity(tmp_path / "third")
    with pytest.raises(HearthError) as info:
        trio.run(redeem, parse_invite(uri), key, "third", "phone")
    assert info.value.code in (ErrorCode.UNREACHABLE, ErrorCode.REFUSED)
    assert "expired" in info.value.message
    assert len(node.status()["peers"]) == len(before["peers"])


def test_a_wrong_token_is_refused_and_guessing_never_locks_out_the_right_one(
    node, tmp_path
) -> None:
    real = parse_invite(node.invite())
    from hearth.protocol.transport.keys import create_identity

    key = create_identity(tmp_path / "guesser")
    codes = []
    for _ in range(6):
        guess = Invite(real.node, real.addrs, secrets.token_bytes(32), real.expires)
        with pytest.raises(HearthError) as info:
            trio.run(redeem, guess, key, "x", "phone")
        codes.append(info.value.code)
    assert set(codes) == {ErrorCode.REFUSED}
    assert len(node.status()["peers"]) == 0
    result, _ = trio.run(redeem, real, key, "x", "phone")  # throttled, and still let in
    assert result.roles == ["phone"]
    pairing = node.status()["handshakes"]["pairing"]
    assert pairing["failed"] >= 6 and pairing["throttled"] >= 1


def test_an_expired_invite_finds_no_listener(node, tmp_path) -> None:
    real = parse_invite(node.invite("--ttl", "1s"))
    trio.run(trio.sleep, 2.2)
    from hearth.protocol.transport.keys import create_identity

    late = Invite(real.node, real.addrs, real.token, real.expires + 3600)  # skip the local check
    with pytest.raises(HearthError) as info:
        trio.run(redeem, late, create_identity(tmp_path / "late"), "late", "phone")
    assert info.value.code in (ErrorCode.UNREACHABLE, ErrorCode.REFUSED)


def test_busy_when_the_queue_is_full(processes, tmp_path, tiny_models) -> None:
    node = start_node(
        processes,
        tmp_path / "node",
        "--model",
        str(tiny_models[0]),
        config="max_sessions = 1\nmax_queue = 0\n",
    )
    phone = pair_phone(tmp_path / "phone", node.invite())
    holding = anyio.Event()
    release = anyio.Event()

    async def slow(plan_):
        holding.set()
        await release.wait()
        return await ok_observations(plan_)

    async def go():
        host = phone.host()
        async with host.run([]):
            first = await host.open(node.peer_id, PLAN_PROTOCOL, node.addrs)
            second = await host.open(node.peer_id, PLAN_PROTOCOL, node.addrs)
            async with anyio.create_task_group() as tg:
                tg.start_soon(
                    lambda: run_plan_session(
                        first, request("a"), phone_id=host.peer_id, execute=slow
                    )
                )
                await holding.wait()
                with pytest.raises(HearthError) as info:
                    await run_plan_session(
                        second, request("b"), phone_id=host.peer_id, execute=ok_observations
                    )
                release.set()
            return info.value

    error = trio.run(go)
    assert error.code is ErrorCode.BUSY and error.retry_after is not None


def test_cancel_stops_the_session_on_the_node(node, phone) -> None:
    async def go():
        host = phone.host()
        async with host.run([]):
            stream = await host.open(node.peer_id, PLAN_PROTOCOL, node.addrs)
            cancel = anyio.Event()

            async def on_token(_):
                cancel.set()

            req = request().model_copy(update={"tool_choice": "none"})
            with pytest.raises(HearthError) as info:
                await run_plan_session(
                    stream,
                    req,
                    phone_id=host.peer_id,
                    execute=ok_observations,
                    on_token=on_token,
                    cancel=cancel,
                )
            return info.value

    assert trio.run(go).code is ErrorCode.CANCELLED
    for _ in range(100):  # the node lets go of the session (bounded wait)
        if node.status()["sessions"] == 0:
            break
        trio.run(trio.sleep, 0.05)
    assert node.status()["sessions"] == 0


def test_malformed_and_oversized_frames_get_error_frames_and_others_are_served(node, phone) -> None:
    async def misbehave():
        host = phone.host()
        codes = []
        async with host.run([]):
            for garbage in (PREFIX.pack(3) + b"\xc1\xc1\xc1", PREFIX.pack(50 << 20)):
                stream = await host.open(node.peer_id, PLAN_PROTOCOL, node.addrs)
                await stream.write(garbage)
                with pytest.raises(HearthError) as info:
                    await stream.receive()
                codes.append(info.value.code)
        return codes

    assert trio.run(misbehave) == [ErrorCode.PROTOCOL_ERROR] * 2
    assert plan(phone, node, request()).final is not None


def test_kill_9_mid_stream_gives_a_typed_error_not_a_hang(node, phone) -> None:
    async def on_token(_):
        if node.proc.poll() is None:
            os.kill(node.proc.pid, signal.SIGKILL)

    with pytest.raises(HearthError) as info:
        plan(phone, node, request().model_copy(update={"tool_choice": "none"}), on_token=on_token)
    assert info.value.code in (ErrorCode.UNREACHABLE, ErrorCode.TIMED_OUT)


def test_sigterm_cancels_open_sessions_with_a_typed_error(node, phone) -> None:
    async def hold(_plan):  # a step still running when the node is told to stop
        os.kill(node.proc.pid, signal.SIGTERM)
        await trio.sleep(2)
        return []

    with pytest.raises(HearthError) as info:
        plan(phone, node, request(), execute=hold)
    assert info.value.code is ErrorCode.CANCELLED
    assert node.proc.wait(timeout=20) == 0


def test_serving_without_a_model_answers_model_not_loaded(processes, tmp_path) -> None:
    node = start_node(processes, tmp_path / "node")
    phone = pair_phone(tmp_path / "phone", node.invite())
    with pytest.raises(HearthError) as info:
        plan(phone, node, request())
    assert info.value.code is ErrorCode.MODEL_NOT_LOADED


def test_bad_config_exits_9_naming_the_field(tmp_path) -> None:
    home = tmp_path / "node"
    cli("hearth-node", "init", "--home", str(home))
    (home / "config.toml").write_text("max_sesions = 3\n")
    result = cli("hearth-node", "serve", "--home", str(home), check=False)
    assert result.returncode == 9 and "max_sesions" in result.stderr


def start_reference_server(processes, model) -> str:
    """llama-cpp-python's own OpenAI-compatible server on loopback, with `model`."""
    import subprocess

    port = free_port()
    proc = processes.spawn(*command("llama-cpp-python", model, port), stderr=subprocess.DEVNULL)
    return wait_serving(proc, port)


def test_the_same_session_through_an_openai_compatible_upstream(
    processes, tmp_path, tiny_models
) -> None:
    url = start_reference_server(processes, tiny_models[0])
    node = start_node(processes, tmp_path / "node", "--upstream", url)
    phone = pair_phone(tmp_path / "phone", node.invite())
    outcome = plan(phone, node, request())
    assert outcome.plans and outcome.tokens > 0
    for step in outcome.plans[0].steps:
        validate_call(ToolCall(step.tool, dict(step.arguments)), SCHEMAS)
    assert node.status()["model"]["backend"] == "openai-compatible"


def test_health_answers_model_and_load(node, phone) -> None:
    from hearth.protocol.wire.messages import Health, HealthRequest

    async def ask():
        host = phone.host()
        async with host.run([]):
            stream = await host.open(node.peer_id, "/hearth/health/1", node.addrs)
            await stream.send(HealthRequest())
            return await stream.receive()

    health = trio.run(ask)
    assert isinstance(health, Health) and health.peer_id == node.peer_id
    assert health.model is not None and health.model.quant == "BF16"
    assert health.model.backend == "llama-cpp" and health.capacity >= 1


def test_metrics_are_served_on_loopback_when_asked(processes, tmp_path, tiny_models) -> None:
    import urllib.request

    port = free_port()
    start_node(processes, tmp_path / "node", "--metrics-port", str(port))
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert "hearth_sessions 0" in body and "# TYPE hearth_busy_total counter" in body
