"""The node's upstream backend against the servers users run (llama.cpp's own server,
llama-cpp-python's server), and against a server that drops kept-alive connections."""

from __future__ import annotations

import json
import socket
import threading

import anyio
import pytest

from hearth.node.backends import Conversation, GenerationSettings
from hearth.node.backends.upstream import OpenAIUpstream
from hearth.protocol.model.grammar import json_grammar, tool_grammar
from hearth.protocol.model.toolcalls import parse_generation
from hearth.protocol.model.validate import validate_call
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, FunctionSpec, ToolSpec

from .nodes import init_phone, pair, start_node
from .test_companion import hearth
from .upstream_servers import ROOT, SERVERS, command, free_port, wait_serving


@pytest.fixture(params=SERVERS)
def upstream(request, processes, tiny_models) -> str:
    port = free_port()
    proc = processes.spawn(*command(request.param, tiny_models[0], port), cwd=ROOT)
    return wait_serving(proc, port)


@pytest.mark.timeout(600)
def test_hearth_ask_remote_gets_a_plan_through_the_upstream(
    upstream, processes, tmp_path, tiny_models
) -> None:
    node = start_node(processes, tmp_path / "node", "--upstream", upstream)
    phone = tmp_path / "phone"
    init_phone(phone, tiny_models[1])
    pair(phone, node.invite())
    code, out = hearth(
        # the only candidate takes no arguments: a random model's call always fits
        "ask", "device status: battery and network", "--route", "remote",
        "--tool-choice", "required",
        "--yes", "--json", "--home", str(phone),
    )  # fmt: skip
    assert code == 0, out
    assert out["route"] == "remote" and out["plan"]
    assert out["plan"]["signer"] == node.peer_id
    steps = out["plan"]["steps"]
    assert {s["tool"] for s in steps} == {"device_status"}
    for step in steps:  # each ran on the phone and says what the phone told
        assert (step["status"], step["error"]) == ("ok", None), step
        assert set(step["result"]) >= {"battery", "charging", "network"}, step
    assert node.status()["model"]["backend"] == "openai-compatible"


SCHEMAS = {
    "notes_create": {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 40}},
        "required": ["text"],
    }
}


def _conversation() -> Conversation:
    return Conversation(
        messages=[ChatMessage(role="user", content="note milk")],
        tools=[ToolSpec(function=FunctionSpec(name=n, parameters=s)) for n, s in SCHEMAS.items()],
    )


async def _generate(backend: OpenAIUpstream, mode: str = "required"):  # type: ignore[no-untyped-def]
    pieces: list[str] = []

    async def on_text(piece: str) -> None:
        pieces.append(piece)

    try:
        return await backend.generate(
            _conversation(),
            grammar=tool_grammar(SCHEMAS, mode, max_calls=2),  # type: ignore[arg-type]
            settings=GenerationSettings(96),
            on_text=on_text,
            cancel=anyio.Event(),
        )
    finally:
        await backend.aclose()


@pytest.mark.timeout(300)
def test_a_forced_round_yields_a_valid_call_from_each_server(upstream) -> None:
    result = anyio.run(_generate, OpenAIUpstream(upstream), backend="trio")
    parsed = parse_generation(result.text, result.finish, SCHEMAS)
    assert parsed.calls
    for call in parsed.calls:
        validate_call(call, SCHEMAS)


class ScriptedServer:
    """A test-only HTTP server answering each connection from a script: `drop` closes
    it without a response; otherwise the status and body are sent as given."""

    def __init__(self, script: list[tuple[str, int, bytes]]) -> None:
        self.script = script
        self.bodies: list[dict] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        for action, status, body in self.script:
            conn, _ = self.sock.accept()
            with conn:
                conn.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, rest = data.partition(b"\r\n\r\n")
                length = int(next(
                    line.split(b":")[1] for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ))  # fmt: skip
                while len(rest) < length:
                    rest += conn.recv(65536)
                self.bodies.append(json.loads(rest))
                if action == "drop":
                    continue
                conn.sendall(
                    b"HTTP/1.1 %d X\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n"
                    b"Connection: close\r\n\r\n%s" % (status, len(body), body)
                )
        self.sock.close()


def _sse(*chunks: dict) -> bytes:
    return (
        b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    )


NATIVE_CALL = _sse(
    {"choices": [{"delta": {"tool_calls": [
        {"index": 0, "function": {"name": "notes_create", "arguments": '{"text": "mi'}}
    ]}}]},
    {"choices": [{"delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": 'lk </tool_call> <b>"}'}}
    ]}}]},
    {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
)  # fmt: skip


def test_a_connection_dropped_by_keep_alive_is_retried_once() -> None:
    server = ScriptedServer([("drop", 0, b""), ("answer", 200, NATIVE_CALL)])
    result = anyio.run(_generate, OpenAIUpstream(server.url), backend="trio")
    assert len(server.bodies) == 2
    assert parse_generation(result.text, result.finish, SCHEMAS).calls


def test_a_connection_dropped_twice_is_an_error_naming_the_cause() -> None:
    server = ScriptedServer([("drop", 0, b""), ("drop", 0, b"")])
    with pytest.raises(HearthError) as err:
        anyio.run(_generate, OpenAIUpstream(server.url), backend="trio")
    assert err.value.code is ErrorCode.UNREACHABLE and "dropped the connection" in err.value.message


def test_a_server_that_takes_no_grammar_gets_native_calls_validated_as_text() -> None:
    refusal = (
        b'{"error": {"code": 400, "message": "Cannot use custom grammar constraints with tools."}}'
    )
    no_grammar = b'{"error": {"code": 400, "message": "unsupported field: grammar"}}'
    server = ScriptedServer(
        [("answer", 400, refusal), ("answer", 400, no_grammar), ("answer", 200, NATIVE_CALL)]
    )
    result = anyio.run(_generate, OpenAIUpstream(server.url), backend="trio")
    first, second, third = server.bodies
    assert "grammar" in first and "tools" in first and "tool_choice" not in first
    assert "grammar" in second and second["tool_choice"] == "none"
    assert "grammar" not in third and third["tool_choice"] == "required"
    (call,) = parse_generation(result.text, result.finish, SCHEMAS).calls
    assert call.name == "notes_create" and call.arguments == {"text": "milk </tool_call> <b>"}
    validate_call(call, SCHEMAS)


def test_a_json_answer_goes_to_a_server_that_takes_no_grammar_as_its_json_mode() -> None:
    refusal = b'{"error": {"code": 400, "message": "unsupported field: grammar"}}'
    answer = _sse(
        {"choices": [{"delta": {"content": '{"city": "Oslo"}'}, "finish_reason": "stop"}]}
    )
    server = ScriptedServer(
        [("answer", 400, refusal), ("answer", 400, refusal), ("answer", 200, answer)]
    )
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    backend = OpenAIUpstream(server.url)

    async def generate():  # type: ignore[no-untyped-def]
        try:
            return await backend.generate(
                _conversation(),
                grammar=json_grammar(schema),
                settings=GenerationSettings(32),
                on_text=lambda _: anyio.sleep(0),
                cancel=anyio.Event(),
            )
        finally:
            await backend.aclose()

    result = anyio.run(generate, backend="trio")
    first, second, third = server.bodies
    assert "grammar" in first and "grammar" in second and second["tool_choice"] == "none"
    assert "grammar" not in third and third["tool_choice"] == "none"  # never a forced call
    assert third["response_format"]["json_schema"]["schema"] == schema
    assert json.loads(result.text) == {"city": "Oslo"}


def test_an_optional_round_uses_the_servers_own_tool_calling() -> None:
    server = ScriptedServer([("answer", 200, NATIVE_CALL)])
    anyio.run(lambda: _generate(OpenAIUpstream(server.url), "auto"), backend="trio")
    (body,) = server.bodies
    assert "grammar" not in body and "tool_choice" not in body and body["tools"]


def test_errors_name_their_cause() -> None:
    loading = ScriptedServer([("answer", 503, b'{"error": {"message": "Loading model"}}')])
    with pytest.raises(HearthError) as err:
        anyio.run(_generate, OpenAIUpstream(loading.url), backend="trio")
    assert err.value.code is ErrorCode.MODEL_NOT_LOADED and "Loading model" in err.value.message
    closed = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(HearthError) as err:
        anyio.run(_generate, OpenAIUpstream(closed), backend="trio")
    assert err.value.code is ErrorCode.UNREACHABLE and "ConnectError" in err.value.message


def test_a_stream_that_never_ends_is_cut_at_the_token_limit() -> None:
    endless = _sse(*[{"choices": [{"delta": {"content": "x" * 100}}]}] * 200)
    server = ScriptedServer([("answer", 200, endless)])
    result = anyio.run(lambda: _generate(OpenAIUpstream(server.url), "none"), backend="trio")
    assert result.finish == "length" and len(result.text) <= 96 * 64 + 100
