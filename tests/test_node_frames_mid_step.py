"""The phone hears the node while a step runs: a node that gives up (its observation
deadline, its shutdown) ends the session at once, and the running step is cancelled,
journaled as such (never rerun by a later ask)."""

from __future__ import annotations

import json
import signal
from typing import Annotated

import anyio
import pytest
import trio
from pydantic import Field

from hearth.companion.ask import ask
from hearth.companion.confirm import Scripted
from hearth.companion.events import AskRequest
from hearth.companion.service import Service
from hearth.companion.settings import set_setting
from hearth.companion.tools.registry import Annotations, Tier, ToolContext
from hearth.protocol.transport.plans import PLAN_PROTOCOL, run_plan_session
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, Limits, Observation, PlanRequest, ToolSpec

from .nodes import pair_phone, start_node

pytestmark = pytest.mark.timeout(180)
SLOW_STEP_S = 60  # far longer than the node waits: the step must be cut off, not awaited

REQUEST = PlanRequest(
    request_id="slow1",
    tool_choice="required",
    tools=[
        ToolSpec.model_validate(
            {
                "function": {
                    "name": "archive_photos",
                    "description": "Archive the photo library (slow)",
                    "parameters": {
                        "type": "object",
                        "properties": {"album": {"type": "string", "maxLength": 10}},
                        "required": ["album"],
                    },
                }
            }
        )
    ],
    conversation=[ChatMessage(role="user", content="archive my holiday photos")],
    limits=Limits(max_rounds=2, max_steps=1, max_tokens=200),
)


def session_with_a_slow_step(phone, node, while_running=None):  # type: ignore[no-untyped-def]
    """Run a plan session whose step outlasts the node's patience; returns the error and
    what the step got to do."""
    step = {"started": False, "finished": False}

    async def slow(plan) -> list[Observation]:  # type: ignore[no-untyped-def]
        step["started"] = True
        if while_running is not None:
            while_running()
        await anyio.sleep(SLOW_STEP_S)
        step["finished"] = True
        return [Observation(step_id=s.id, status="ok", result={"archived": 1}) for s in plan.steps]

    async def go() -> HearthError:
        host = phone.host()
        async with host.run([]):
            stream = await host.open(node.peer_id, PLAN_PROTOCOL, node.addrs)
            with pytest.raises(HearthError) as info:
                await run_plan_session(stream, REQUEST, phone_id=host.peer_id, execute=slow)
            return info.value

    return trio.run(go), step


def test_the_nodes_error_mid_step_ends_the_session_and_cancels_the_step(
    processes, tmp_path, tiny_models
) -> None:
    node = start_node(
        processes,
        tmp_path / "node",
        "--model",
        str(tiny_models[0]),
        config="observation_timeout_s = 1\n",
    )
    phone = pair_phone(tmp_path / "phone", node.invite())
    error, step = session_with_a_slow_step(phone, node)
    assert step == {"started": True, "finished": False}
    assert error.code is ErrorCode.TIMED_OUT
    assert "while a step ran" in error.message
    assert node.proc.poll() is None  # and the node still serves


def test_the_nodes_shutdown_mid_step_ends_the_session_as_cancelled(
    processes, tmp_path, tiny_models
) -> None:
    node = start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))
    phone = pair_phone(tmp_path / "phone", node.invite())
    error, step = session_with_a_slow_step(
        phone, node, while_running=lambda: node.proc.send_signal(signal.SIGTERM)
    )
    assert step == {"started": True, "finished": False}
    assert error.code in (ErrorCode.CANCELLED, ErrorCode.UNREACHABLE)
    assert "while a step ran" in error.message


def test_a_step_cut_off_by_the_node_is_journaled_cancelled_and_never_rerun(
    processes, tmp_path, tiny_models
) -> None:
    node = start_node(
        processes,
        tmp_path / "node",
        "--model",
        str(tiny_models[0]),
        config="observation_timeout_s = 1\n",
    )
    home = tmp_path / "phone"
    pair_phone(home, node.invite())
    builtin = sorted(Service(home).registry.tools)
    (home / "policy.toml").write_text(f"never_remote_tools = {json.dumps(builtin)}\n")
    # one call a plan: random weights would otherwise fill the phone's 20 calls past the
    # token limit and the node would reject the plan as cut off before any step ran
    set_setting(home, "limits.max_steps", "1")
    phone = Service(home)
    ran = []

    @phone.registry.tool(
        tier=Tier.READ_ONLY,
        annotations=Annotations(
            read_only=True, destructive=False, idempotent=True, open_world=False
        ),
    )
    async def archive_photos(ctx: ToolContext, album: Annotated[str, Field(max_length=10)]) -> dict:
        """Archive the photos of an album (slow)."""
        ran.append(album)
        await anyio.sleep(SLOW_STEP_S)
        return {"archived": album}

    async def nothing(_event: object) -> None:
        return None

    request = AskRequest(
        text="archive the holiday photos album", route="remote", tool_choice="required"
    )
    with pytest.raises(HearthError) as info:
        trio.run(lambda: ask(phone, request, nothing, Scripted(True), trio.Event()))
    assert info.value.code is ErrorCode.TIMED_OUT and len(ran) == 1
    [(plan_id,)] = phone.journal.db.execute("SELECT plan_id FROM plans").fetchall()
    record = phone.journal.steps(plan_id)["s1"]
    assert record.state == "cancelled" and "may or may not have happened" in (record.error or "")
    resume = phone.executor(Scripted(True)).resume
    assert trio.run(resume) == [] and len(ran) == 1  # not rerun, idempotent or not
