"""A generation on a worker thread, its text streamed to the event loop
(`generate_streamed`, which the phone's model and the node's llama.cpp backend share):
the worker is told to stop when nobody wants more, and never abandoned."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import pytest
import trio

from hearth.protocol.model.relay import TextRelay, generate_streamed

pytestmark = pytest.mark.timeout(120)


class Counter:
    """A worker that puts numbered pieces until it is told to stop; it records that it
    ended (the thread returned), so a test can see it was not left running."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.ended = threading.Event()
        self.fail_at = fail_at

    def __call__(self, relay: TextRelay, stopped: Callable[[], bool]) -> int:
        try:
            n = 0
            while not stopped():
                if n == self.fail_at:
                    raise ValueError("the model broke")
                relay.put(f"{n},", thought=n % 3 == 0)
                n += 1
                threading.Event().wait(0.0005)  # a token's time
            return n
        finally:
            self.ended.set()


def numbers(heard: list[str]) -> list[int]:
    return [int(x) for x in "".join(heard).split(",") if x]


def test_a_set_cancel_stops_the_worker_and_every_piece_it_put_is_delivered() -> None:
    worker = Counter()
    answer: list[str] = []
    thinking: list[str] = []
    cancel = anyio.Event()

    async def on_text(piece: str) -> None:
        answer.append(piece)
        if len(numbers(answer)) >= 30:
            cancel.set()

    async def on_thinking(piece: str) -> None:
        thinking.append(piece)

    produced = trio.run(generate_streamed, worker, on_text, on_thinking, cancel)
    assert worker.ended.is_set()
    assert produced >= 45
    assert sorted(numbers(answer) + numbers(thinking)) == list(range(produced))
    assert all(n % 3 == 0 for n in numbers(thinking))
    assert all(n % 3 for n in numbers(answer))


def test_a_sink_that_fails_stops_the_worker_before_its_error_comes_out() -> None:
    """The text has nowhere to go (the phone hung up): generating on is waste."""
    worker = Counter()

    async def gone(piece: str) -> None:
        raise anyio.BrokenResourceError

    async def go() -> None:
        with pytest.raises(anyio.BrokenResourceError):  # itself, not a group
            await generate_streamed(worker, gone, gone)
        assert worker.ended.is_set()

    trio.run(go)


def test_a_deadline_stops_the_worker_and_waits_for_it() -> None:
    worker = Counter()
    heard: list[str] = []

    async def hear(piece: str) -> None:
        heard.append(piece)

    async def go() -> None:
        with anyio.move_on_after(0.05) as scope:
            await generate_streamed(worker, hear, hear, anyio.Event())
        assert scope.cancelled_caught
        assert worker.ended.is_set()  # never left generating for nobody

    trio.run(go)
    assert numbers(heard) == list(range(len(numbers(heard))))


def test_the_workers_own_error_comes_out_as_itself_after_its_text() -> None:
    worker = Counter(fail_at=40)
    heard: list[str] = []

    async def hear(piece: str) -> None:
        heard.append(piece)

    async def go() -> None:
        with pytest.raises(ValueError, match="the model broke"):
            await generate_streamed(worker, hear, hear)

    trio.run(go)
    assert numbers(heard) == list(range(40))
