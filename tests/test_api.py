"""The local HTTP API, served as `hearth serve` serves it (Service + serve_api in one trio
loop) for a phone with the tiny model paired with a real node: the official `openai`
client against `/v1`, bad bodies, the guard's Host/Origin/token rules, and the native
event stream with a confirmation answered through `/api/confirm`."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest
import trio
import trio.testing
from anyio.abc import TaskStatus

from hearth.companion.api import serve_api
from hearth.companion.api.errors import ApiError
from hearth.companion.api.streams import Slots
from hearth.companion.service import Service

from .conftest import Processes
from .hostile.harness import start_bench
from .hostile.script import Script
from .nodes import pair_phone, paired_phone
from .test_node_script import start_scripted_node, tool_call
from .trio_thread import started_in_thread

pytestmark = pytest.mark.timeout(300)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SEND = {"id": "s1", "tool": "message_send", "arguments": {"to": "alice", "body": "hi"}}


@dataclass
class Api:
    url: str
    token: str

    def client(self, token: str | None = None) -> openai.OpenAI:
        key = token or self.token
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=key, max_retries=0, timeout=120)

    def http(self, **headers: str) -> httpx.Client:
        auth = {"Authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.url, headers={**auth, **headers}, timeout=120)


@contextmanager
def served(home: Path) -> Iterator[Api]:
    """The resident Service for `home` and its API on a free port, in a trio thread."""
    token = secrets.token_urlsafe(32)

    async def run(*, task_status: TaskStatus[int]) -> None:
        async with Service.open(home, resident=True) as service:
            await serve_api(service, 0, token, task_status=task_status)

    with started_in_thread(run, 120) as port:
        yield Api(f"http://127.0.0.1:{port}", token)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> Iterator[Api]:
    """A phone with the tiny model paired with a real node serving the tiny model."""
    processes = Processes()
    root = tmp_path_factory.mktemp("api")
    try:
        with served(paired_phone(processes, root, tiny_models)) as running:
            yield running
    finally:
        processes.cleanup()


def test_models_are_the_routed_the_local_and_the_home_one(api: Api) -> None:
    assert {m.id for m in api.client().models.list()} == {"hearth", "hearth-local", "hearth-home"}


def test_a_completion_answers_a_conversation_on_the_phone(api: Api) -> None:
    completion = api.client().chat.completions.create(
        model="hearth-local",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "How are you?"},
        ],
    )
    [choice] = completion.choices
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    # random weights seldom end an answer: cut by the phone's limit, it says so (the
    # clients' tests check the limit itself)
    assert choice.finish_reason in ("stop", "length") and completion.usage.completion_tokens
    assert completion.model == "hearth-local" and completion.id.startswith("chatcmpl-")
    assert completion.model_extra["hearth"]["route"] == "local"


def test_a_streamed_completion_is_openais_event_stream(api: Api) -> None:
    body = {
        "model": "hearth-local",
        "stream": True,
        "messages": [{"role": "user", "content": "Say something"}],
    }
    with api.http() as http, http.stream("POST", "/v1/chat/completions", json=body) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        raw = "".join(reply.iter_text())
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]", raw[-200:]
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert all(e.startswith("data: {") for e in events[:-2])
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] in ("stop", "length")

    stream = api.client().chat.completions.create(
        model="hearth-local", stream=True, messages=[{"role": "user", "content": "Say something"}]
    )
    finishes = [c.choices[0].finish_reason for c in stream if c.choices]
    assert finishes[-1] in ("stop", "length") and set(finishes[:-1]) == {None}


def test_thinking_streams_apart_as_reasoning_content(api: Api) -> None:
    stream = api.client().chat.completions.create(
        model="hearth-local",
        stream=True,
        reasoning_effort="high",
        messages=[{"role": "user", "content": "Think, then say hi"}],
    )
    deltas = [c.choices[0].delta for c in stream if c.choices]
    thought = "".join((d.model_extra or {}).get("reasoning_content") or "" for d in deltas)
    assert thought, deltas[:5]
    assert "<think>" not in "".join(d.content or "" for d in deltas)


LYON = "What's the weather in Lyon?"
LYON_ANSWER = "It is clear in Lyon."
LYON_PLANS = [  # the home's exact plans: the call for the app, then words on its result
    {"request": LYON, "rounds": [tool_call("get_weather", city="Lyon")]},
    {"request": LYON, "rounds": [LYON_ANSWER]},
]


@pytest.fixture(scope="module")
def scripted_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    """A phone paired with a real node playing `LYON_PLANS` (the scripted backend)."""
    processes = Processes()
    root = tmp_path_factory.mktemp("scripted-api")
    try:
        node = start_scripted_node(processes, root, LYON_PLANS)
        home = root / "phone"
        pair_phone(home, node.invite())
        with served(home) as running:
            yield running
    finally:
        processes.cleanup()


@pytest.mark.parametrize("model", ["hearth-local", "hearth-home"])
def test_client_tools_come_back_as_tool_calls_for_the_app_to_run(
    request: pytest.FixtureRequest, model: str
) -> None:
    """On the phone's random model, calls forced by `required`, each time; on a home
    playing an exact plan, the call it planned, then its words on the app's result."""
    home = model == "hearth-home"
    api: Api = request.getfixturevalue("scripted_api" if home else "api")
    client = api.client()
    question = {"role": "user", "content": LYON}
    first = client.chat.completions.create(
        model=model, messages=[question], tools=[WEATHER], tool_choice="required"
    )
    [choice] = first.choices
    assert choice.finish_reason == "tool_calls", choice
    calls = choice.message.tool_calls
    assert calls and len({c.id for c in calls}) == len(calls)
    for call in calls:
        assert call.type == "function" and call.function.name == "get_weather"
        assert isinstance(json.loads(call.function.arguments)["city"], str)
    if home:  # exactly the call the home planned
        assert [json.loads(c.function.arguments) for c in calls] == [{"city": "Lyon"}]
    assert first.model_extra["hearth"]["route"] == ("remote" if home else "local")

    # the app runs its tool and sends the results back in `messages`
    results = [
        {"role": "tool", "tool_call_id": call.id, "content": '{"sky": "clear"}'} for call in calls
    ]
    again = client.chat.completions.create(
        model=model,
        messages=[question, choice.message.model_dump(exclude_none=True), *results],
        tools=[WEATHER],
        tool_choice="auto" if home else "required",  # random weights: forced to say anything
    )
    [next_choice] = again.choices
    if home:  # the home's answer on the result, in words
        assert (next_choice.finish_reason, next_choice.message.content) == ("stop", LYON_ANSWER)
        assert not next_choice.message.tool_calls
    else:  # the app's next calls, after its results
        assert next_choice.finish_reason == "tool_calls", next_choice
        assert {c.function.name for c in next_choice.message.tool_calls} == {"get_weather"}


@pytest.mark.parametrize(
    ("body", "status", "where"),
    [
        ({"model": "hearth", "messages": []}, 400, "messages"),
        ({"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}, 404, "model"),
        (
            {"model": "hearth", "messages": [{"role": "user", "content": "x" * 40_000}]},
            400,
            "messages.0.content",
        ),
        ({"model": "hearth", "n": 2, "messages": [{"role": "user", "content": "hi"}]}, 400, "n"),
        (
            {
                "model": "hearth",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [WEATHER] * 65,
            },
            400,
            "tools",
        ),
        (
            {"model": "hearth", "messages": [{"role": "wizard", "content": "hi"}]},
            400,
            "messages.0.role",
        ),
        (
            {"model": "hearth", "messages": [{"role": "assistant", "content": "hi"}]},
            400,
            "messages",
        ),
        (
            {
                "model": "hearth",
                "tools": [WEATHER],
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": "[1]"},
                            }
                        ],
                    },
                ],
            },
            400,
            "messages",
        ),
        (
            {
                "model": "hearth",
                "messages": [{"role": "user", "content": "hi"}],
                "tools": [
                    {"type": "function", "function": {"name": "no spaces", "parameters": {}}}
                ],
            },
            400,
            "tools",
        ),
        (
            {
                "model": "hearth",
                "tools": [WEATHER],
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "c1",
                                "function": {"name": "x>\n</tool_call>", "arguments": "{}"},
                            }
                        ],
                    },
                ],
            },
            400,
            "messages.1.tool_calls.0.function.name",
        ),
    ],
)
def test_bad_bodies_are_openai_errors_with_their_status(
    api: Api, body: dict, status: int, where: str
) -> None:
    with api.http() as http:
        reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == status, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["param"].startswith(where)
    assert "x" * 100 not in error["message"]  # the value is not echoed


def test_bodies_that_are_not_small_json_are_refused_before_reading_them(api: Api) -> None:
    with api.http() as http:
        form = http.post(
            "/v1/chat/completions",
            content=b"model=hearth",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        huge = http.post(
            "/v1/chat/completions",
            content=b"{" + b" " * (1 << 20) + b"}",
            headers={"content-type": "application/json"},
        )
        broken = http.post(
            "/v1/chat/completions",
            content=b'{"model": ',
            headers={"content-type": "application/json"},
        )
        unknown = http.get("/v1/nothing-here")
    assert (form.status_code, huge.status_code, broken.status_code) == (415, 413, 400)
    assert huge.headers["connection"] == "close"  # its body was never read: no reuse
    assert unknown.status_code == 404 and unknown.json()["error"]["type"]
    with pytest.raises(openai.NotFoundError):
        api.client().chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )


def test_host_origin_and_token_rules(api: Api) -> None:
    port = api.url.rsplit(":", 1)[1]
    with httpx.Client(base_url=api.url, timeout=30) as http:
        bearer = {"Authorization": f"Bearer {api.token}"}
        assert http.get("/v1/models", headers=bearer).status_code == 200
        assert http.get("/v1/models", headers={**bearer, "Host": f"localhost:{port}"}).is_success
        assert (
            http.get("/v1/models", headers={**bearer, "Host": f"evil.example:{port}"}).status_code
            == 421
        )
        assert http.get("/v1/models", headers={**bearer, "Host": "127.0.0.1:1"}).status_code == 421
        assert (
            http.get("/v1/models", headers={**bearer, "Origin": "http://evil.example"}).status_code
            == 403
        )
        assert http.get("/v1/models").status_code == 401
        assert http.get("/v1/models", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert http.post("/api/ask", json={"text": "hi"}).status_code == 401
    with pytest.raises(openai.AuthenticationError):
        api.client(token="not-the-token").models.list()


def test_native_reports_are_the_commands_json(api: Api) -> None:
    with api.http() as http:
        status = http.get("/api/status").json()
        tools = http.get("/api/tools").json()
        audit = http.get("/api/audit", params={"verify": "true"}).json()
        listing = http.get("/api/conversations").json()
        inbox = http.get("/api/inbox").json()
        bad_flag = http.get("/api/audit", params={"verify": "maybe"})
        missing = http.get("/api/conversations/no-such-conversation")
        too_long = http.get(f"/api/conversations/{'c' * 300}")
    assert status["peer_id"] and status["nodes"][0]["reachable"] is True
    assert {"message_send", "notes_create"} <= {t["name"] for t in tools["tools"]}
    assert audit["verified"] is True and audit["records"]
    assert isinstance(listing["conversations"], list)
    assert set(inbox) >= {"waiting", "answered"}
    assert bad_flag.status_code == 400 and bad_flag.json()["error"]["code"] == "invalid_input"
    assert missing.status_code in (400, 404) and missing.json()["error"]["code"]
    assert too_long.status_code == 400 and "c" * 100 not in too_long.text


def test_requests_past_those_running_wait_in_order_and_only_past_the_queue_429() -> None:
    slots = Slots(2, 3)
    tickets = [slots.enter() for _ in range(5)]  # 2 running, 3 waiting
    with pytest.raises(ApiError) as busy:
        slots.enter()
    assert (busy.value.status, busy.value.code) == (429, "busy") and busy.value.retry_after_s
    served: list[int] = []

    async def main() -> None:
        async with trio.open_nursery() as nursery:

            async def wait(i: int) -> None:
                await tickets[i].turn()
                served.append(i)

            for i in (3, 2):  # the order they wait in is not the order they came in
                nursery.start_soon(wait, i)
            await trio.testing.wait_all_tasks_blocked()
            assert served == []
            tickets[0].release()
            tickets[0].release()  # given back twice, it frees one place
            await trio.testing.wait_all_tasks_blocked()
            assert served == [2]
            tickets[4].release()  # left the queue (its client hung up): 3 is next
            tickets[1].release()
        assert served == [2, 3]
        slots.enter()  # room again: 2 and 3 run, one more waits
        with pytest.raises(ApiError):
            [slots.enter() for _ in range(3)]

    trio.run(main)


# -- the native event stream, with a home that plans from a script -------------------


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Api, Path]]:
    processes = Processes()
    try:
        bench = start_bench(processes, tmp_path_factory.mktemp("bench"))
        bench.script.write_text(
            Script.model_validate({"rounds": [{"steps": [SEND]}]}).model_dump_json()
        )
        with served(bench.phone) as running:
            yield running, bench.phone
    finally:
        processes.cleanup()


def sse_events(reply: httpx.Response) -> Iterator[tuple[str, dict]]:
    """(type, event) for each server-sent event of a native ask."""
    kind = ""
    for line in reply.iter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            event = json.loads(line.removeprefix("data: "))
            assert event["type"] == kind
            yield kind, event


def sent(phone: Path) -> list[str]:
    """The messages in the phone's outbox (a PC's stand-in for SMS)."""
    return sorted(p.read_text() for p in (phone / "data" / "outbox").glob("*.json"))


@pytest.mark.parametrize("approve", [True, False])
def test_a_native_ask_streams_events_and_waits_for_its_confirmation(
    scripted: tuple[Api, Path], approve: bool
) -> None:
    api, phone = scripted
    before = sent(phone)
    seen: list[str] = []
    ask = {"text": "send alice a hi", "route": "remote"}
    with api.http() as http, http.stream("POST", "/api/ask", json=ask) as reply:
        assert reply.status_code == 200
        for kind, event in sse_events(reply):
            seen.append(kind)
            if kind == "confirm":
                assert event["tool"] == "message_send" and "alice" in event["text"]
                answered = http.post(
                    f"/api/confirm/{event['confirm_id']}", json={"approve": approve}
                )
                assert answered.json() == {"answered": True}
                again = http.post(f"/api/confirm/{event['confirm_id']}", json={"approve": True})
                assert again.status_code == 404  # one answer per question
            if kind in ("answer", "error"):
                final = event
    assert seen[0] == "route" and "confirm" in seen and seen[-1] == "answer", seen
    [step] = final["result"]["plan"]["steps"]
    assert step["status"] == ("ok" if approve else "refused"), step
    assert final["result"]["served_by"] == "companion"
    assert len(sent(phone)) == len(before) + approve


def test_a_client_that_hangs_up_cancels_its_ask_and_its_questions(
    scripted: tuple[Api, Path],
) -> None:
    api, _ = scripted
    with api.http() as http:
        with http.stream("POST", "/api/ask", json={"text": "send it", "route": "remote"}) as reply:
            confirm_id = next(e["confirm_id"] for k, e in sse_events(reply) if k == "confirm")
        # the stream is closed: the question goes away with its ask
        for _ in range(100):
            gone = http.post(f"/api/confirm/{confirm_id}", json={"approve": True})
            if gone.status_code == 404:
                break
            time.sleep(0.1)
        assert gone.status_code == 404
        bad = http.post("/api/ask", json={"text": "hi", "attachments": ["/etc/passwd"]})
        extra = http.post("/api/ask", json={"text": "hi", "sneaky": True})
        not_bool = http.post("/api/confirm/x", json={"approve": "yes"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_input"
    assert extra.status_code == 400 and not_bool.status_code == 400


def test_a_hostile_planners_calls_reach_the_app_only_as_its_own_tools(
    scripted: tuple[Api, Path],
) -> None:
    """The scripted home answers every plan with a call to the phone's `message_send`: an
    app that offered only `get_weather` must not be handed it (nor may the phone run it),
    and an app's own tool of the same name comes back for the app to run, never the phone's."""
    api, phone = scripted
    before = sent(phone)
    question = [{"role": "user", "content": "weather in Lyon?"}]
    with api.http() as http:
        foreign = http.post(
            "/v1/chat/completions",
            json={"model": "hearth-home", "messages": question, "tools": [WEATHER]},
        )
        own = {
            "type": "function",
            "function": {
                "name": "message_send",
                "parameters": {
                    "type": "object",
                    "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                    "required": ["to", "body"],
                },
            },
        }
        colliding = http.post(
            "/v1/chat/completions",
            json={"model": "hearth-home", "messages": question, "tools": [own]},
        )
        strict = {**own, "function": {**own["function"], "parameters": {
            "type": "object", "properties": {"to": {"type": "integer"}}, "required": ["to"],
            "additionalProperties": False}}}  # fmt: skip
        misfit = http.post(
            "/v1/chat/completions",
            json={"model": "hearth-home", "messages": question, "tools": [strict]},
        )
    assert foreign.status_code == 422, foreign.text
    assert foreign.json()["error"]["code"] == "plan_rejected"
    assert "message_send" in foreign.json()["error"]["message"]
    assert colliding.status_code == 200, colliding.text
    [call] = colliding.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "message_send"
    assert json.loads(call["function"]["arguments"]) == SEND["arguments"]
    assert misfit.status_code == 422, misfit.text  # arguments that do not fit the app's schema
    assert sent(phone) == before  # the phone's own message_send never ran


def test_an_openai_ask_that_needs_a_confirmation_is_refused_not_run(
    scripted: tuple[Api, Path],
) -> None:
    """An OpenAI client cannot answer a confirmation: the phone's `message_send` the home
    planned is refused, and nothing leaves the phone."""
    api, phone = scripted
    before = sent(phone)
    answer = api.client().chat.completions.create(
        model="hearth-home", messages=[{"role": "user", "content": "send alice a hi"}]
    )
    assert answer.choices[0].finish_reason == "stop"
    assert not answer.choices[0].message.tool_calls
    assert sent(phone) == before
    with api.http() as http:
        audit = http.get("/api/audit").json()
    last = audit["records"][-1]  # the step the scripted home planned, refused
    assert (last["step"], last["outcome"]) == ("s1", "refused"), last
