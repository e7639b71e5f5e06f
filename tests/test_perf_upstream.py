"""The upstream backend's stream reader: pieces reach the phone in batches (a frame
each, not one per token), lines are found however the reads split them, and a server
cannot grow the reader's buffer without bound."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest

from hearth.node.backends import Conversation, GenerationSettings
from hearth.node.backends.upstream import MAX_STREAM_LINE, OpenAIUpstream, _sse_data
from hearth.protocol.model.runtime import Generation
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage

from .test_upstream import ScriptedServer, _sse

pytestmark = pytest.mark.timeout(60)


async def _stream(url: str) -> tuple[Generation, list[str]]:
    calls: list[str] = []

    async def on_text(piece: str) -> None:
        calls.append(piece)

    backend = OpenAIUpstream(url)
    try:
        result = await backend.generate(
            Conversation(messages=[ChatMessage(role="user", content="hi")]),
            grammar=None,
            settings=GenerationSettings(400),
            on_text=on_text,
            cancel=anyio.Event(),
        )
    finally:
        await backend.aclose()
    return result, calls


def test_streamed_pieces_are_handed_on_in_batches() -> None:
    """300 tokens read at once become a few hand-overs, the first at once (before: one
    hand-over, so one frame to the phone, per token)."""
    pieces = [f"w{n} " for n in range(300)]
    server = ScriptedServer(
        [("answer", 200, _sse(*({"choices": [{"delta": {"content": p}}]} for p in pieces)))]
    )
    result, calls = anyio.run(_stream, server.url, backend="trio")
    assert "".join(calls) == result.text == "".join(pieces)
    assert calls[0] == pieces[0]
    assert len(calls) <= 20


def test_an_over_long_stream_line_is_a_protocol_error() -> None:
    """A server sending one endless line is cut at MAX_STREAM_LINE bytes (before: the
    whole line was buffered, then parsed)."""
    content = "x" * (MAX_STREAM_LINE + 10)
    line = b"data: " + json.dumps({"choices": [{"delta": {"content": content}}]}).encode()
    server = ScriptedServer([("answer", 200, line + b"\n\n")])
    with pytest.raises(HearthError) as caught:
        anyio.run(_stream, server.url, backend="trio")
    assert caught.value.code is ErrorCode.PROTOCOL_ERROR


def test_event_lines_are_found_however_reads_split_them() -> None:
    stream = b'data: {"a": 1}\r\n\r\n: comment\nevent: x\ndata:{"b": "\xc3\xa9"}\n\ndata: [DONE]'
    expected = [b'{"a": 1}', b'{"b": "\xc3\xa9"}', b"[DONE]"]

    async def payloads(cuts: list[int]) -> list[bytes]:
        async def chunks():  # type: ignore[no-untyped-def]
            for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
                yield stream[start:end]

        found: list[bytes] = []
        async for batch in _sse_data(httpx.Response(200, content=chunks())):
            found += batch
        return found

    for cut in range(1, len(stream)):
        assert anyio.run(payloads, [cut], backend="trio") == expected
    assert anyio.run(payloads, list(range(1, len(stream))), backend="trio") == expected
    stream = stream.replace(b"\n", b"\r")  # the SSE spec's third way to end a line
    for cut in range(1, len(stream), 7):
        assert anyio.run(payloads, [cut], backend="trio") == expected


def test_batched_thinking_and_answer_keep_their_order_and_sinks() -> None:
    chunks = [{"choices": [{"delta": {"reasoning_content": f"t{n} "}}]} for n in range(50)]
    chunks += [{"choices": [{"delta": {"content": f"a{n} "}}]} for n in range(50)]
    server = ScriptedServer([("answer", 200, _sse(*chunks))])
    handed: list[tuple[str, str]] = []

    async def run() -> Generation:
        async def on_text(piece: str) -> None:
            handed.append(("text", piece))

        async def on_thinking(piece: str) -> None:
            handed.append(("thinking", piece))

        backend = OpenAIUpstream(server.url)
        try:
            return await backend.generate(
                Conversation(messages=[ChatMessage(role="user", content="hi")]),
                grammar=None,
                settings=GenerationSettings(400),
                on_text=on_text,
                on_thinking=on_thinking,
                cancel=anyio.Event(),
            )
        finally:
            await backend.aclose()

    result = anyio.run(run, backend="trio")
    kinds = [kind for kind, _ in handed]
    assert kinds == sorted(kinds, key=lambda k: k == "text")  # all thinking, then text
    assert "".join(p for k, p in handed if k == "thinking") == result.thinking
    assert "".join(p for k, p in handed if k == "text") == result.text
    assert result.thinking == "".join(f"t{n} " for n in range(50))
