"""Hostile members: unknown protocols, stream floods; the node keeps serving others."""

from __future__ import annotations

import anyio
import pytest
import trio

from hearth.protocol.transport.plans import PLAN_PROTOCOL, run_plan_session
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .nodes import pair_phone, start_node
from .test_node import ok_observations, plan, request


@pytest.fixture
def node(processes, tmp_path, tiny_models):
    return start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))


def test_an_unknown_protocol_id_is_a_typed_error_and_serving_goes_on(node, tmp_path) -> None:
    phone = pair_phone(tmp_path / "phone", node.invite())

    async def probe() -> HearthError:
        host = phone.host()
        async with host.run([]):
            with pytest.raises(HearthError) as info:
                await host.open(node.peer_id, "/hearth/does-not-exist/1", node.addrs)
            return info.value

    assert trio.run(probe).code is ErrorCode.PROTOCOL_ERROR
    assert plan(phone, node, request()).final is not None


def test_a_member_flooding_streams_gets_busy_and_others_are_still_served(node, tmp_path) -> None:
    flooder = pair_phone(tmp_path / "flooder", node.invite())
    other = pair_phone(tmp_path / "other", node.invite())
    outcomes: list[str] = []

    async def flood() -> None:
        host = flooder.host()
        async with host.run([]):
            await host.connect(node.peer_id, node.addrs)

            async def one(i: int) -> None:
                try:
                    stream = await host.open(node.peer_id, PLAN_PROTOCOL)
                    await run_plan_session(
                        stream, request(f"f{i}"), phone_id=host.peer_id, execute=ok_observations
                    )
                    outcomes.append("ok")
                except HearthError as exc:
                    outcomes.append(exc.code.value)

            async with anyio.create_task_group() as tg:
                for i in range(24):
                    tg.start_soon(one, i)

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(flood)
            await anyio.sleep(0.3)  # the flood is under way
            result = await anyio.to_thread.run_sync(lambda: plan(other, node, request("o")))
            assert result.final is not None  # the other phone is served meanwhile

    trio.run(both)
    assert outcomes.count("busy") >= 24 - 2 - 2  # per-phone share: 2 running or queued
    assert set(outcomes) <= {"ok", "busy"}
