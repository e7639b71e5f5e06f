"""The node's upstream backend against each server it fronts, called directly.

    .venv/bin/python bench/upstream.py [--runs 15]

For llama.cpp's own server (embedded by xllamacpp) and llama-cpp-python's server, on
loopback with the same tiny GGUF: one forced-call round through `OpenAIUpstream`
(what a plan session's round costs the node), and the same request body streamed
directly with httpx (the backend's own body, so prompt, tools, grammar, greedy
sampling and token limit are equal). Runs alternate; prints medians and the ratio,
and how many keep-alive retries (and errors) a run of short rounds met.
"""

from __future__ import annotations

import argparse
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import anyio
import httpx
from rich.console import Console
from rich.table import Table

from hearth.node.backends import Conversation, GenerationSettings
from hearth.node.backends.upstream import OpenAIUpstream
from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.tiny import make_tiny
from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.messages import ChatMessage, FunctionSpec, ToolSpec

sys.path.insert(0, str(Path(__file__).parent.parent))
from tests.upstream_servers import ROOT, SERVERS, command, free_port, wait_serving

SCHEMAS = {
    "notes_create": {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 60}},
        "required": ["text"],
    }
}
MAX_TOKENS = 128


def conversation() -> Conversation:
    return Conversation(
        messages=[ChatMessage(role="user", content="Note that we need milk and eggs")],
        tools=[ToolSpec(function=FunctionSpec(name=n, parameters=s)) for n, s in SCHEMAS.items()],
    )


async def measure(url: str, runs: int) -> dict[str, list[float]]:
    grammar = tool_grammar(SCHEMAS, "required", max_calls=1)
    backend = OpenAIUpstream(url)
    times: dict[str, list[float]] = {"upstream": [], "direct": []}

    async def nothing(_piece: str) -> None:
        return None

    async def through_backend() -> None:
        await backend.generate(
            conversation(),
            grammar=grammar,
            settings=GenerationSettings(MAX_TOKENS),
            on_text=nothing,
            cancel=anyio.Event(),
        )

    await through_backend()  # learns the server's style; warms its prompt cache
    body = backend._body(conversation(), grammar, GenerationSettings(MAX_TOKENS))
    async with httpx.AsyncClient(timeout=600) as client:

        async def direct() -> None:
            async with client.stream("POST", f"{backend.url}/chat/completions", json=body) as r:
                assert r.status_code == 200, await r.aread()
                async for _ in r.aiter_lines():
                    pass

        await direct()
        for _ in range(runs):
            for name, call in (("upstream", through_backend), ("direct", direct)):
                start = time.perf_counter()
                await call()
                times[name].append((time.perf_counter() - start) * 1000)
    await backend.aclose()
    return times


class Retries(logging.Handler):
    """Counts the backend's keep-alive retries."""

    count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += "retrying once" in record.getMessage()


async def soak(url: str, requests: int, retries: Retries) -> tuple[int, int]:
    """(retries, errors) over `requests` short rounds on one kept-alive client."""
    backend = OpenAIUpstream(url)
    errors = 0

    async def nothing(_piece: str) -> None:
        return None

    for _ in range(requests):
        try:
            await backend.generate(
                conversation(),
                grammar=None,
                settings=GenerationSettings(4),
                on_text=nothing,
                cancel=anyio.Event(),
            )
        except HearthError:
            errors += 1
    await backend.aclose()
    return retries.count, errors


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--soak", type=int, default=300, help="short rounds for the retry count")
    args = parser.parse_args()
    model = make_tiny(Path(tempfile.mkdtemp()))[0]
    table = Table(title=f"one forced-call round, {MAX_TOKENS} tokens max, median of {args.runs}")
    retries = Retries()
    logging.getLogger("hearth.node.backends").addHandler(retries)
    logging.getLogger("hearth.node.backends").setLevel(logging.INFO)
    columns = ("server", "upstream backend ms", "server directly ms", "ratio")
    for column in (*columns, f"retries / errors in {args.soak} rounds"):
        table.add_column(column)
    for kind in SERVERS:
        port = free_port()
        proc = subprocess.Popen(
            command(kind, model, port),
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            url = wait_serving(proc, port)
            times = anyio.run(measure, url, args.runs, backend="trio")
            retries.count = 0
            dropped, failed = anyio.run(soak, url, args.soak, retries, backend="trio")
        finally:
            proc.kill()
            proc.wait()
        ours, theirs = median(times["upstream"]), median(times["direct"])
        table.add_row(
            kind, f"{ours:.1f}", f"{theirs:.1f}", f"{ours / theirs:.2f}", f"{dropped} / {failed}"
        )
    Console().print(table)


if __name__ == "__main__":
    main()
