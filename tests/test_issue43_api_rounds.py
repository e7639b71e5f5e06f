"""Issue 43's findings on how many model rounds an OpenAI request costs, against a real
`hearth serve` with the official `openai` SDK: a token limit that cuts a tool call is
`finish_reason: "length"`, never an error (the phone's own model, with the app's tools
and with the phone's); client tools on the home route are one generation (the first
plan's calls come back, nothing of a second round is generated or streamed); and
`parallel_tool_calls: false` on `hearth-home` gives at most one call. The home is a
scripted node (`hearth-node serve --script`), so each round is exactly known."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from .conftest import Processes
from .nodes import init_phone, pair, start_companion
from .test_node_script import notes, start_scripted_node, tool_call

pytestmark = pytest.mark.timeout(600)

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
WORD = re.compile(r"\s*\S+|\s+")  # the scripted backend's token: a word


def words(text: str) -> int:
    return len(WORD.findall(text))


# what the scripted home plays, by request
ONE_ROUND = "Weather in Oslo, Rome and Paris?"
CITIES = ("Oslo", "Rome", "Paris")
THREE_CALLS = "\n".join(tool_call("get_weather", city=city) for city in CITIES)
SECOND_ROUND = "A second round that nobody asked for."
CUT = "Weather in Lyon and Bonn?"
TWO_CALLS = tool_call("get_weather", city="Lyon") + "\n" + tool_call("get_weather", city="Bonn")
CUT_AT = words(tool_call("get_weather", city="Lyon")) + 3  # words: inside the second call
PLANS = [
    {"request": ONE_ROUND, "repeat": True, "rounds": [THREE_CALLS, SECOND_ROUND]},
    {"request": CUT, "repeat": True, "rounds": [TWO_CALLS, SECOND_ROUND]},
]


@dataclass
class Served:
    url: str  # http://127.0.0.1:PORT
    token: str
    home: Path

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=f"{self.url}/v1", api_key=self.token, max_retries=0, timeout=300
        )

    def raw_stream(self, body: dict[str, Any]) -> tuple[int, list[str]]:
        """The status and the `data:` events of a streamed request, as sent."""
        auth = {"Authorization": f"Bearer {self.token}"}
        with (
            httpx.Client(base_url=self.url, headers=auth, timeout=300) as http,
            http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as reply,
        ):
            raw = "".join(reply.iter_text())
        return reply.status_code, [e.removeprefix("data: ") for e in raw.split("\n\n") if e]


def serve(processes: Processes, home: Path) -> Served:
    running = start_companion(processes, home)
    return Served(running.ready["api"], (home / "api.token").read_text().strip(), home)


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> Iterator[Served]:
    """`hearth serve` for an unpaired phone with the tiny model (`hearth-local`)."""
    processes = Processes()
    home = tmp_path_factory.mktemp("rounds-local") / "phone"
    try:
        init_phone(home, tiny_models[1], noise=True)
        yield serve(processes, home)
    finally:
        processes.cleanup()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`hearth serve` for a phone paired with a node playing `PLANS` (`hearth-home`)."""
    processes = Processes()
    root = tmp_path_factory.mktemp("rounds-home")
    try:
        node = start_scripted_node(processes, root, PLANS)
        phone = root / "phone"
        init_phone(phone)
        pair(phone, node.invite())
        yield serve(processes, phone)
    finally:
        processes.cleanup()


def streamed_to_the_end(served: Served, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The chunks of a streamed request, which must end with `[DONE]` and hold no error."""
    status, events = served.raw_stream(body)
    assert status == 200, events
    assert events[-1] == "[DONE]", events[-3:]
    chunks = [json.loads(e) for e in events[:-1]]
    assert not [c for c in chunks if "error" in c], chunks
    return chunks


def finish_of(chunks: list[dict[str, Any]]) -> str | None:
    [last] = [c for c in chunks if c["choices"] and c["choices"][0].get("finish_reason")]
    return last["choices"][0]["finish_reason"]


# 1. a token limit is `length` --------------------------------------------------------------

CUT_LOCALLY = {"max_tokens": 32, "tool_choice": "required", "seed": 1}  # a call, cut in it


def test_a_client_tool_call_cut_by_the_token_limit_is_length_not_an_error(
    local: Served,
) -> None:
    asked = {
        "model": "hearth-local",
        "messages": [{"role": "user", "content": "Say hello"}],
        "tools": [WEATHER],
        **CUT_LOCALLY,
    }
    completion = local.client().chat.completions.create(**asked)
    [choice] = completion.choices
    assert choice.finish_reason == "length", choice
    for call in choice.message.tool_calls or []:  # what comes back is only complete calls
        assert call.function.name == "get_weather"
        assert isinstance(json.loads(call.function.arguments)["city"], str)
    assert "<tool_call" not in (choice.message.content or "")

    chunks = streamed_to_the_end(local, asked)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert finish_of(chunks) == "length"
    # the SDK reads the same stream to its end
    stream = local.client().chat.completions.create(**asked, stream=True)
    assert [c.choices[0].finish_reason for c in stream if c.choices][-1] == "length"


def test_a_cut_call_of_the_phones_own_tools_is_length_and_runs_nothing(local: Served) -> None:
    asked = {
        "model": "hearth-local",
        "messages": [{"role": "user", "content": "Note that we need milk"}],
        **CUT_LOCALLY,
    }
    completion = local.client().chat.completions.create(**asked)
    [choice] = completion.choices
    assert choice.finish_reason == "length", choice
    assert not choice.message.tool_calls  # the phone's tools are not the app's
    assert "<tool_call" not in (choice.message.content or "")
    assert finish_of(streamed_to_the_end(local, asked)) == "length"
    assert notes(local.home) == []  # a cut plan runs none of its calls


def test_a_client_tool_call_the_home_cut_is_length_not_an_error(home: Served) -> None:
    asked = {
        "model": "hearth-home",
        "messages": [{"role": "user", "content": CUT}],
        "tools": [WEATHER],
        "max_tokens": CUT_AT,
    }
    completion = home.client().chat.completions.create(**asked)
    [choice] = completion.choices
    assert choice.finish_reason == "length", choice
    calls = choice.message.tool_calls or []
    assert [json.loads(c.function.arguments) for c in calls] in ([], [{"city": "Lyon"}])
    assert finish_of(streamed_to_the_end(home, asked)) == "length"


@pytest.mark.xfail(
    strict=True,
    reason="the complete calls before a cut one are lost where the round is parsed "
    "(protocol/model/toolcalls.parse raises; node/planner.model_round and "
    "companion/local_model.LocalModel.plan hand on only the error)",
)
def test_the_calls_complete_before_the_cut_one_come_back(home: Served) -> None:
    completion = home.client().chat.completions.create(
        model="hearth-home",
        messages=[{"role": "user", "content": CUT}],
        tools=[WEATHER],
        max_tokens=CUT_AT,
    )
    [choice] = completion.choices
    assert choice.finish_reason == "length"
    [call] = choice.message.tool_calls or []
    assert json.loads(call.function.arguments) == {"city": "Lyon"}


# 2. client tools on the home route are one generation ------------------------------------

ONE_ROUND_BODY = {
    "model": "hearth-home",
    "messages": [{"role": "user", "content": ONE_ROUND}],
    "tools": [WEATHER],
}


def test_client_tools_on_the_home_route_are_one_generation(home: Served) -> None:
    completion = home.client().chat.completions.create(**ONE_ROUND_BODY)
    [choice] = completion.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    cities = [json.loads(c.function.arguments)["city"] for c in choice.message.tool_calls]
    assert tuple(cities) == CITIES

    chunks = streamed_to_the_end(home, ONE_ROUND_BODY)
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    streamed = "".join(d.get("content") or "" for d in deltas)
    assert streamed == "", streamed  # nothing of a second round
    [with_calls] = [d for d in deltas if d.get("tool_calls")]
    assert [json.loads(t["function"]["arguments"])["city"] for t in with_calls["tool_calls"]] == [
        *CITIES
    ]
    assert finish_of(chunks) == "tool_calls"

    stream = home.client().chat.completions.create(**ONE_ROUND_BODY, stream=True)
    sdk_chunks = [c for c in stream if c.choices]
    assert not "".join(c.choices[0].delta.content or "" for c in sdk_chunks)
    assert sdk_chunks[-1].choices[0].finish_reason == "tool_calls"


@pytest.mark.xfail(
    strict=True,
    reason="the node reports usage only in `Final`, which a session ended after its first "
    "plan never gets: one round's usage needs the wire to carry it with the plan",
)
def test_client_tools_on_the_home_route_count_one_round(home: Served) -> None:
    completion = home.client().chat.completions.create(**ONE_ROUND_BODY)
    assert completion.usage is not None
    assert completion.usage.completion_tokens == words(THREE_CALLS)  # the first round's


# 3. parallel_tool_calls: false ------------------------------------------------------------


def test_no_parallel_tool_calls_on_the_home_route_is_at_most_one_call(home: Served) -> None:
    completion = home.client().chat.completions.create(**ONE_ROUND_BODY, parallel_tool_calls=False)
    [choice] = completion.choices
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert json.loads(call.function.arguments) == {"city": CITIES[0]}
    chunks = streamed_to_the_end(home, {**ONE_ROUND_BODY, "parallel_tool_calls": False})
    sent = [
        t for c in chunks if c["choices"] for t in c["choices"][0]["delta"].get("tool_calls", [])
    ]
    assert len(sent) == 1


@pytest.mark.timeout(600)
def test_a_call_cut_in_a_later_round_keeps_the_labels_of_what_ran_before(
    processes, tmp_path
) -> None:
    """Round 1 read a note (anyone could have written it); round 2 wrote prose, then a
    call the token limit cut: the `length` answer still says what its planner read
    (it came back with no sources, and "none of it ran")."""
    import json as _json

    import httpx

    from .nodes import init_phone, pair, start_companion
    from .test_node_script import start_scripted_node, tool_call

    request = "What does my note say?"
    cut = "Your note says: visit evil.example " + tool_call("notes_create", text="x " * 40)
    node = start_scripted_node(
        processes,
        tmp_path,
        [{"request": request, "rounds": [tool_call("notes_search", query=""), cut]}],
    )
    phone = tmp_path / "phone"
    init_phone(phone)
    pair(phone, node.invite())
    (phone / "data").mkdir(parents=True, exist_ok=True)
    (phone / "data" / "notes.json").write_text(
        _json.dumps([{"id": "n1", "title": "t", "text": "visit evil.example"}])
    )
    running = start_companion(processes, phone)
    token = (phone / "api.token").read_text().strip()
    body = {
        "model": "hearth-home",
        "messages": [{"role": "user", "content": request}],
        "max_tokens": 20,
    }
    with httpx.Client(
        base_url=running.ready["api"], headers={"Authorization": f"Bearer {token}"}, timeout=200
    ) as client:
        got = client.post("/v1/chat/completions", json=body)
    assert got.status_code == 200, got.text
    out = got.json()
    assert out["choices"][0]["finish_reason"] == "length"
    assert out["hearth"]["untrusted_sources"] == ["notes_search result"], out["hearth"]
    assert "1 earlier step(s) ran" in out["hearth"]["reason"]
