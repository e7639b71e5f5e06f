"""Where a remote streamed plan round's time goes before its first token: the steps of
`offload.py`'s streaming row, stamped on both ends (issue 34).

    .venv/bin/python bench/first_token_steps.py [--runs 30]

A `hearth-node serve` (tiny bf16) runs under this file's `node` mode, which wraps the
steps of a plan request (Noise reads and writes, the stream's accept and protocol
negotiation, the request's parsing and checks, the `Progress` frame, the prompt's
render, the model's thread, its prompt evaluation, the first token and its hand-over
to the event loop, the `Token` frame) with `time.perf_counter` marks; this process is
the phone, marking its own steps. Both clocks are CLOCK_MONOTONIC: each step is shown
as the median, over the rounds, of its first mark after the phone's request (ms).
Measuring only: every wrapped call is the real one.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import runpy
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

Marks = list[tuple[str, float]]


def marking(marks: Marks, owner: Any, attr: str, name: str, end: bool = True) -> None:
    """`owner.attr` marked `name>` as it is called and `name<` as it returns."""
    real: Callable[..., Any] = getattr(owner, attr)
    if getattr(real, "__code__", None) and real.__code__.co_flags & 0x80:  # a coroutine

        @functools.wraps(real)
        async def marked_async(*args: Any, **kwargs: Any) -> Any:
            marks.append((f"{name}>", time.perf_counter()))
            try:
                return await real(*args, **kwargs)
            finally:
                if end:
                    marks.append((f"{name}<", time.perf_counter()))

        setattr(owner, attr, marked_async)
        return

    @functools.wraps(real)
    def marked(*args: Any, **kwargs: Any) -> Any:
        marks.append((f"{name}>", time.perf_counter()))
        try:
            return real(*args, **kwargs)
        finally:
            if end:
                marks.append((f"{name}<", time.perf_counter()))

    setattr(owner, attr, marked)


def node(marks_file: Path, command: list[str]) -> None:
    """Run `command` (hearth-node serve) with its steps marked; SIGUSR1 writes the marks."""
    import llama_cpp
    from libp2p.security.noise import io as noise

    import hearth.node.backends.llamacpp as llamacpp
    import hearth.node.planner as planner
    import hearth.protocol.model.relay as relay
    import hearth.protocol.model.runtime as runtime
    import hearth.protocol.transport.multiselect as multiselect
    import hearth.protocol.transport.streams as streams
    import hearth.protocol.wire.session as session

    marks: Marks = []
    signal.signal(signal.SIGUSR1, lambda *_: marks_file.write_text(json.dumps(marks)))
    for owner, attr, name, end in (
        (noise.BaseNoiseMsgReadWriter, "read_msg", "node: Noise read", True),
        (noise.BaseNoiseMsgReadWriter, "write_msg", "node: Noise write", True),
        (streams.CreditYamux, "accept_stream", "node: stream accepted", True),
        (multiselect.PipelinedListener, "negotiate", "node: protocol negotiated", True),
        (planner.Planner, "serve", "node: plan session", False),
        (session.PlanSession, "receive_data", "node: request parsed", True),
        (planner._Session, "_rounds", "node: rounds", False),
        (llamacpp.LlamaCppBackend, "generate", "node: backend.generate", False),
        (llamacpp.LlamaCppBackend, "_text_for", "node: prompt rendered", True),
        (runtime.LlamaRuntime, "generate", "node: model thread runs", False),
        (runtime.LlamaRuntime, "_load_seq", "node: saved state loaded", True),
        (llama_cpp.Llama, "eval", "node: prompt tokens evaluated", True),
        (runtime.LlamaRuntime, "_append", "node: one token evaluated", True),
        (runtime._TokenLoop, "run", "node: first token sampled", False),
        (relay.TextRelay, "put", "node: piece put on the relay", False),
        (relay.TextRelay, "_wake", "node: event loop woken", False),
    ):
        marking(marks, owner, attr, name, end)
    send = planner._Session.send

    async def marked_send(self: planner._Session, message: Any) -> None:
        kind = type(message).__name__
        marks.append((f"node: {kind} frame sent>", time.perf_counter()))
        await send(self, message)
        marks.append((f"node: {kind} frame sent<", time.perf_counter()))

    planner._Session.send = marked_send  # type: ignore[method-assign]
    sys.argv = command
    runpy.run_path(command[0], run_name="__main__")


async def rounds(root: Path, ready: dict[str, Any], runs: int, marks: Marks) -> None:
    from offload import phone_host, plan_request

    from hearth.protocol.transport.plans import PLAN_PROTOCOL
    from hearth.protocol.wire.messages import ActionPlan, Token
    from hearth.protocol.wire.session import PlanSession, Side

    host = phone_host(root / "phone")
    async with host.run([]):
        await host.connect(ready["peer_id"], ready["addrs"])
        for i in range(3 + runs):
            if i == 3:
                marks.clear()  # warm: the model's prefix and the prompt's state held
            request = plan_request(f"steps-{i}")
            marks.append(("phone: request", time.perf_counter()))
            stream = await host.open(ready["peer_id"], PLAN_PROTOCOL)
            plan = PlanSession(Side.PHONE)
            await stream.write(plan.send(request))
            marks.append(("phone: request written", time.perf_counter()))
            seen = False
            while not seen:
                for event in plan.receive_data(await stream.read_some()):
                    seen = seen or isinstance(event, ActionPlan)
                    if isinstance(event, Token):
                        marks.append(("phone: token", time.perf_counter()))
            await stream.reset()


def steps(marks: Marks) -> dict[str, list[float]]:
    """Each step's first mark after each request, up to its first token (ms); `name>`
    marks a step's start, `name<` its end."""
    found: dict[str, list[float]] = {}
    start: float | None = None
    done = True
    named: set[str] = set()
    for name, at in sorted(marks, key=lambda mark: mark[1]):
        if name == "phone: request":
            start, done, named = at, False, set()
        if start is None or done or name in named:
            continue
        if name.endswith("<") and f"{name[:-1]}>" not in named:
            continue  # ended what began before this request (the last round's tail)
        named.add(name)
        found.setdefault(name, []).append((at - start) * 1000)
        done = name == "phone: token"
    return found


def phone(runs: int) -> None:
    import trio

    from hearth.companion.swarmkit import Processes, pair_in_process, start_node
    from hearth.protocol.model.tiny import make_tiny
    from hearth.protocol.transport.host import quiet_libp2p

    quiet_libp2p()
    load = [os.getloadavg()[0]]
    marks: Marks = []
    with tempfile.TemporaryDirectory() as tmp, Processes() as processes:
        root = Path(tmp)
        bf16, _ = make_tiny(root / "models")
        marks_file = root / "marks.json"
        wrapper = (sys.executable, __file__, "node", str(marks_file))
        started = start_node(processes, root / "node", "--model", str(bf16), prefix=wrapper)
        pair_in_process(root / "phone", started.invite(), "bench")
        trio.run(rounds, root, started.ready, runs, marks)
        started.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not marks_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # written whole: the node writes it at once
        marks += [(name, at) for name, at in json.loads(marks_file.read_text())]
    load.append(os.getloadavg()[0])
    print(f"load average {load[0]:.2f} → {load[1]:.2f}; medians over {runs} rounds (ms)")
    table = steps(marks)
    for name, values in sorted(table.items(), key=lambda item: statistics.median(item[1])):
        print(f"{statistics.median(values):8.3f}  {name}")


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    if len(sys.argv) > 2 and sys.argv[1] == "node":
        node(Path(sys.argv[2]), sys.argv[3:])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    phone(parser.parse_args().runs)


if __name__ == "__main__":
    main()
