"""Issue 31's queue figures: N concurrent OpenAI requests (the official async SDK, no
retries) to `hearth serve`'s API for a phone paired with a real node, tiny models.

    .venv/bin/python bench/api_queue.py [--clients 32] [--model hearth-home] [--max-tokens 8]

Each request streams; its wait is the time from sending it to its first chunk (the
queue, then the prompt), its total the time to `[DONE]`. Prints how many succeeded,
the failures by kind, and p50/p99 of both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import openai

from hearth.companion.swarmkit import Processes, init_phone, pair, run, start_companion, start_node
from hearth.protocol.model.tiny import make_tiny

os.environ.setdefault("HEARTH_NO_MDNS", "1")  # loopback only


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] if ordered else float("nan")


async def flood(base: str, token: str, clients: int, model: str, max_tokens: int) -> None:
    client = openai.AsyncOpenAI(base_url=base, api_key=token, max_retries=0, timeout=600)
    waits: list[float] = []
    totals: list[float] = []
    failed: Counter[str] = Counter()

    async def one() -> None:
        sent = time.monotonic()
        try:
            stream = await client.chat.completions.create(
                model=model,
                messages=[{"role": "user", "content": "Say hello"}],
                max_tokens=max_tokens,
                stream=True,
            )
            first = None
            async for _ in stream:
                first = first or time.monotonic()
        except openai.APIError as exc:
            failed[f"{type(exc).__name__} {getattr(exc, 'status_code', '')}".strip()] += 1
            return
        waits.append((first or time.monotonic()) - sent)
        totals.append(time.monotonic() - sent)

    await asyncio.gather(*(one() for _ in range(clients)))
    done = len(totals)
    print(f"{clients} concurrent requests to {model}: {done} succeeded, failed {dict(failed)}")
    for name, values in (("wait to first chunk", waits), ("whole answer", totals)):
        p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
        print(f"{name}: p50 {p50:.2f} s, p99 {p99:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--model", default="hearth-home")
    parser.add_argument("--max-tokens", type=int, default=8)
    args = parser.parse_args()
    processes = Processes()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bf16, q4 = make_tiny(root / "models")
        try:
            node = start_node(processes, root / "node", "--model", str(bf16))
            home = root / "phone"
            init_phone(home, q4, noise=True)
            pair(home, node.invite())
            run("hearth", "config", "set", "limits.max_tokens", "64", "--home", str(home))
            served = start_companion(processes, home)
            token = (home / "api.token").read_text().strip()
            asyncio.run(
                flood(f"{served.ready['api']}/v1", token, args.clients, args.model, args.max_tokens)
            )
        finally:
            processes.cleanup()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
