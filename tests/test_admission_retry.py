"""A crowd turned away at capacity is asked back spread out, one phone per queue place
that opens, at the pace of the sessions this node has actually run (not a fixed guess)."""

from __future__ import annotations

import time

import anyio
import pytest
import trio

from hearth.node.admission import FIRST_SESSION_S, Admission
from hearth.protocol.wire.errors import ErrorCode, HearthError


async def hold(admission: Admission, peer: str, done: anyio.Event) -> None:
    async with admission.slot(peer):
        await done.wait()


async def turned_away(admission: Admission, peers: list[str]) -> list[float]:
    """The `retry_after` each of `peers` is told, asking one after another."""
    afters = []
    for peer in peers:
        with pytest.raises(HearthError) as info:
            async with admission.slot(peer):
                pass
        assert info.value.code is ErrorCode.BUSY and info.value.retry_after is not None
        afters.append(info.value.retry_after)
    return afters


async def full(admission: Admission, tg: anyio.abc.TaskGroup, done: anyio.Event) -> None:
    """Its one slot and its one queue place taken until `done`."""
    tg.start_soon(hold, admission, "holder", done)
    tg.start_soon(hold, admission, "queued", done)
    while admission.stats.queued < 1:
        await trio.sleep(0)


def test_phones_turned_away_together_are_asked_back_one_interval_apart() -> None:
    async def go() -> None:
        admission = Admission(max_active=1, max_queue=1, per_peer=1)
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            await full(admission, tg, done)
            afters = await turned_away(admission, [f"p{i}" for i in range(6)])
            # back too early: behind the five still to come, not behind itself too
            (early,) = await turned_away(admission, ["p0"])
            done.set()
        # no session has ended yet: one guessed session apart (each asks within
        # microseconds of the last; the hint is rounded to 10 ms)
        assert [round(a / FIRST_SESSION_S) for a in afters] == [1, 2, 3, 4, 5, 6]
        assert afters == sorted(set(afters))
        assert round(early / FIRST_SESSION_S) == 6

    trio.run(go)


def test_the_pace_is_the_sessions_run_here_from_the_first_one_on() -> None:
    async def go() -> None:
        admission = Admission(max_active=1, max_queue=1, per_peer=1)
        began = time.monotonic()
        async with admission.slot("first"):
            await trio.sleep(0.05)
        took = time.monotonic() - began  # the session's time in its slot is within this
        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            await full(admission, tg, done)
            first, second = await turned_away(admission, ["p1", "p2"])
            done.set()
        assert 0.04 <= first <= took + 0.01  # one session, not a 5 s guess blended in
        assert 0.04 <= second - first <= took + 0.01

    trio.run(go)
