"""A trio task served from a background thread, for the synchronous tests (httpx, the
OpenAI client) that talk to it while it runs."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import trio


@contextmanager
def started_in_thread(start: Callable[..., Awaitable[Any]], bound_s: float) -> Iterator[Any]:
    """Run `start(task_status=...)` in a trio thread; yield what it reported started
    (within `bound_s` seconds); on exit cancel it and join the thread."""
    up = threading.Event()
    state: dict[str, Any] = {}

    async def main() -> None:
        state["trio"] = trio.lowlevel.current_trio_token()
        try:
            async with trio.open_nursery() as tasks:
                state["scope"] = tasks.cancel_scope
                state["started"] = await tasks.start(start)
                up.set()
        finally:
            up.set()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert up.wait(bound_s) and "started" in state, f"{start} did not start"
    try:
        yield state["started"]
    finally:
        trio.from_thread.run_sync(state["scope"].cancel, trio_token=state["trio"])
        thread.join(30)
        assert not thread.is_alive()
