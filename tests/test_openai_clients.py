"""Real OpenAI clients against a real `hearth serve` (tiny models, a phone paired with a
real node): the official `openai` SDK (sync, async, streaming), `llm` through its OpenAI
plugin (`extra-openai-models.yaml`) and LiteLLM. Every standard field is honoured or
refused with OpenAI's error, every answer has `usage`, requests beyond those running
wait their turn, and apps' requests are kept apart from the user's conversations."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import jsonschema
import openai
import pytest

from .conftest import Processes
from .nodes import cli, init_phone, last_json, pair, paired_phone, start_companion
from .test_api import WEATHER
from .test_node_script import start_scripted_node

pytestmark = pytest.mark.timeout(600)

MAX_TOKENS = 320  # the phone's limit here (random weights write until it): room for calls
NOTE = {
    "type": "function",
    "function": {
        "name": "save_note",
        "description": "Save a note",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
        },
    },
}
HI = [{"role": "user", "content": "Say hello"}]
CITY = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 8},
        "days": {"type": "integer", "minimum": 0, "maximum": 9},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}


@dataclass
class Served:
    home: Path
    url: str  # the API's base, http://127.0.0.1:PORT
    token: str

    @property
    def base(self) -> str:
        return f"{self.url}/v1"

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.base, api_key=self.token, max_retries=0, timeout=300)

    def http(self, **headers: str) -> httpx.Client:
        auth = {"Authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.url, headers={**auth, **headers}, timeout=300)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> Iterator[Served]:
    """`hearth serve` for a phone paired with a real node; answers of at most 320 tokens,
    and `host.docker.internal` among the API's Host names."""
    processes = Processes()
    root = tmp_path_factory.mktemp("clients")
    try:
        home = paired_phone(processes, root, tiny_models)
        cli("hearth", "config", "set", "limits.max_tokens", str(MAX_TOKENS), "--home", str(home))
        cli("hearth", "config", "set", "limits.max_steps", "4", "--home", str(home))  # calls fit
        config = home / "config.toml"  # a top-level key, before the file's tables
        config.write_text('api_hosts = ["host.docker.internal"]\n' + config.read_text())
        running = start_companion(processes, home)
        token = (home / "api.token").read_text().strip()
        yield Served(home, running.ready["api"], token)
    finally:
        processes.cleanup()


def counted(usage: object) -> None:
    """`usage` as OpenAI's: tokens of the prompt and the answer, and their sum."""
    assert usage is not None
    prompt, completion = usage.prompt_tokens, usage.completion_tokens  # type: ignore[attr-defined]
    assert prompt > 0 and 0 < completion <= MAX_TOKENS
    assert usage.total_tokens == prompt + completion  # type: ignore[attr-defined]


# -- the official SDK ---------------------------------------------------------------------


@pytest.mark.parametrize("model", ["hearth-local", "hearth-home"])
def test_every_answer_has_usage_and_a_cut_one_says_length(served: Served, model: str) -> None:
    completion = served.client().chat.completions.create(model=model, messages=HI, max_tokens=5)
    [choice] = completion.choices
    counted(completion.usage)
    assert completion.usage.completion_tokens == 5  # random weights never stop on their own
    assert choice.finish_reason == "length"
    assert not choice.message.content.endswith(" …")  # the content as generated


@pytest.mark.parametrize("model", ["hearth-local", "hearth-home"])
def test_a_streamed_answer_is_the_same_text_and_its_last_chunk_has_usage(
    served: Served, model: str
) -> None:
    client = served.client()
    whole = client.chat.completions.create(model=model, messages=HI, max_tokens=6)
    chunks = list(
        client.chat.completions.create(
            model=model,
            messages=HI,
            max_tokens=6,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert text == whole.choices[0].message.content
    assert finishes[-1] == "length" == whole.choices[0].finish_reason
    assert chunks[-1].choices == []
    counted(chunks[-1].usage)
    assert chunks[-1].usage.completion_tokens == whole.usage.completion_tokens == 6


@pytest.mark.parametrize("model", ["hearth-local", "hearth-home"])
def test_temperature_and_seed_reach_the_model(served: Served, model: str) -> None:
    client = served.client()

    def sampled(seed: int) -> str:
        completion = client.chat.completions.create(
            model=model, messages=HI, max_tokens=12, temperature=1.5, top_p=1.0, seed=seed
        )
        return completion.choices[0].message.content or ""

    first = sampled(1)
    assert sampled(1) == first  # the same seed, the same draw
    assert len({first, sampled(2), sampled(3)}) > 1  # random weights at 1.5: seeds differ


def test_thinking_tokens_count_in_the_usage(served: Served) -> None:
    completion = served.client().chat.completions.create(
        model="hearth-local", messages=HI, max_tokens=5, reasoning_effort="low"
    )
    assert completion.usage.completion_tokens > 5  # the answer's 5 and the thinking's


def test_a_temperature_out_of_range_is_a_400_naming_it(served: Served) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        served.client().chat.completions.create(model="hearth", messages=HI, temperature=2.5)
    assert refused.value.body["param"] == "temperature"


@pytest.mark.parametrize("model", ["hearth-local", "hearth-home"])
def test_the_answer_ends_before_a_stop_string(served: Served, model: str) -> None:
    client = served.client()
    # the same draws each time; the phone's own tools not offered: an answer, not a call
    drawn = {"max_tokens": 24, "temperature": 1.0, "seed": 5, "tool_choice": "none"}
    free = client.chat.completions.create(model=model, messages=HI, **drawn)
    text = free.choices[0].message.content or ""
    stop = next(c for c in text[len(text) // 2 :] if not c.isspace())  # within the answer
    cut = client.chat.completions.create(model=model, messages=HI, stop=[stop], **drawn)
    expected = text[: text.index(stop)].strip()
    assert cut.choices[0].message.content == expected
    assert cut.choices[0].finish_reason == "stop"
    streamed = client.chat.completions.create(
        model=model, messages=HI, stop=stop, stream=True, **drawn
    )
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == expected


@pytest.mark.parametrize("model", ["hearth-local", "hearth-home"])
def test_a_json_schema_answer_validates_against_the_schema(served: Served, model: str) -> None:
    completion = served.client().chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Weather where?"}],
        max_tokens=MAX_TOKENS,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "city", "schema": CITY, "strict": True},
        },
    )
    jsonschema.validate(json.loads(completion.choices[0].message.content), CITY)
    assert completion.choices[0].finish_reason == "stop"


HELLO = {"greeting": "hello", "to": ["you", "all"], "times": 2}
HELLO_PLANS = [  # played only under a JSON answer's grammar, as a model under it writes
    {"request": HI[0]["content"], "repeat": True, "rounds": [{"json_answer": HELLO}]}
]


@pytest.fixture(scope="module")
def scripted_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`hearth serve` for a phone (no model of its own) paired with a real node playing
    `HELLO_PLANS` (the scripted backend): an answer a test can parse every time."""
    processes = Processes()
    root = tmp_path_factory.mktemp("scripted-clients")
    try:
        node = start_scripted_node(processes, root, HELLO_PLANS)
        home = root / "phone"
        init_phone(home)
        pair(home, node.invite())
        running = start_companion(processes, home)
        token = (home / "api.token").read_text().strip()
        yield Served(home, running.ready["api"], token)
    finally:
        processes.cleanup()


def test_a_json_object_answer_is_an_object(scripted_served: Served) -> None:
    """Random weights fill any limit inside an open object: the home plays the object a
    model under the JSON grammar writes (the script refuses to play it without one)."""
    completion = scripted_served.client().chat.completions.create(
        model="hearth-home",
        messages=HI,
        max_tokens=MAX_TOKENS,
        response_format={"type": "json_object"},
    )
    [choice] = completion.choices
    assert choice.finish_reason == "stop", choice
    assert json.loads(choice.message.content) == HELLO  # the object, whole, as the app parses it
    counted(completion.usage)


@pytest.mark.parametrize("model", ["hearth-local", "hearth-home"])
def test_a_named_tool_choice_calls_that_tool(served: Served, model: str) -> None:
    completion = served.client().chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Note that it rains"}],
        tools=[NOTE, WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    )
    [choice] = completion.choices
    assert choice.finish_reason == "tool_calls"
    assert {c.function.name for c in choice.message.tool_calls} == {"get_weather"}


@pytest.mark.parametrize("model", ["hearth-local", "hearth-home"])
def test_no_parallel_tool_calls_is_at_most_one_call(served: Served, model: str) -> None:
    completion = served.client().chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "Weather in Oslo, Rome, Paris and Bonn"}],
        tools=[WEATHER],
        tool_choice="required",
        parallel_tool_calls=False,
    )
    assert len(completion.choices[0].message.tool_calls) == 1


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"n": 2}, "n"),
        ({"logprobs": True}, "logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"modalities": ["text", "audio"]}, "modalities"),
        ({"audio": {"voice": "alloy", "format": "wav"}}, "audio"),
        ({"functions": [WEATHER["function"]]}, "functions"),
        ({"web_search_options": {}}, "web_search_options"),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "What is this?"},
                            {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}},
                        ],
                    }
                ]
            },
            "messages[0].content",
        ),
    ],
)
def test_what_the_phone_cannot_do_is_a_400_naming_the_field(
    served: Served, extra: dict, param: str
) -> None:
    body = {"model": "hearth", "messages": HI, **extra}
    with served.http() as http:
        reply = http.post("/v1/chat/completions", json=body)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert "validation" not in error["message"].lower() and "union" not in error["message"]


def test_image_parts_are_refused_in_words(served: Served) -> None:
    image = {"type": "image_url", "image_url": {"url": "https://example.org/cat.png"}}
    with pytest.raises(openai.BadRequestError) as refused:
        served.client().chat.completions.create(
            model="hearth", messages=[{"role": "user", "content": [image]}]
        )
    assert "image parts are not supported" in refused.value.body["message"]


def test_a_model_by_id_and_every_v1_error_in_openais_shape(served: Served) -> None:
    client = served.client()
    assert client.models.retrieve("hearth-home").id == "hearth-home"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")
    with httpx.Client(timeout=60) as http:
        unauthorized = http.get(f"{served.base}/models")
    assert unauthorized.status_code == 401
    error = unauthorized.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=served.base, api_key="x" * 40, max_retries=0).models.list()


def test_api_hosts_are_accepted_and_other_hosts_still_421(served: Served) -> None:
    port = served.url.rsplit(":", 1)[1]
    with served.http(Host=f"host.docker.internal:{port}") as http:
        assert http.get("/v1/models").status_code == 200
    with served.http(Host=f"evil.example:{port}") as http:
        assert http.get("/v1/models").status_code == 421
    with served.http(
        Host=f"host.docker.internal:{port}", Origin="http://evil.example"
    ) as http:  # the Origin rule is unchanged
        assert http.get("/v1/models").status_code == 403


def test_concurrent_requests_wait_their_turn_instead_of_429(served: Served) -> None:
    client = openai.AsyncOpenAI(base_url=served.base, api_key=served.token, max_retries=0)

    async def many() -> list[object]:
        asks = [
            client.chat.completions.create(model="hearth-home", messages=HI, max_tokens=4)
            for _ in range(18)
        ]
        return await asyncio.gather(*asks, return_exceptions=True)

    answers = asyncio.run(many())
    failed = [a for a in answers if isinstance(a, BaseException)]
    assert not failed, failed[:3]
    for answer in answers:
        counted(answer.usage)  # type: ignore[attr-defined]


def test_the_native_api_answer_has_the_same_usage(served: Served) -> None:
    body = {"text": "hello", "route": "local", "tool_choice": "none"}
    with served.http() as http, http.stream("POST", "/api/ask", json=body) as reply:
        lines = [line for line in reply.iter_lines() if line.startswith("data: ")]
    answer = json.loads(lines[-1].removeprefix("data: "))
    assert answer["type"] == "answer"
    usage = answer["result"]["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] == MAX_TOKENS
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert answer["result"]["finish"] == "length"


def test_api_requests_are_kept_apart_from_the_users_conversations(served: Served) -> None:
    home = str(served.home)
    asked = last_json(cli("hearth", "ask", "hello", "--route", "local", "--json", "--home", home))
    assert asked["usage"]["completion_tokens"] > 0 and asked["usage"]["prompt_tokens"] > 0
    mine = asked["conversation_id"]
    client = served.client()
    apart = client.chat.completions.create(model="hearth-local", messages=HI, max_tokens=3)
    continued = client.chat.completions.create(
        model="hearth-local", messages=HI, max_tokens=3, metadata={"conversation": mine}
    )
    apps = apart.model_extra["hearth"]["conversation_id"]
    assert continued.model_extra["hearth"]["conversation_id"] == mine
    listed = last_json(cli("hearth", "conversations", "--json", "--home", home))
    everything = last_json(cli("hearth", "conversations", "--all", "--json", "--home", home))
    users = {c["id"]: c for c in listed["conversations"]}
    assert mine in users and apps not in users and users[mine]["turns"] == 2
    assert {c["id"]: c["source"] for c in everything["conversations"]}[apps] == "api"
    with served.http() as http:  # the chat page's list is the user's
        page = http.get("/api/conversations").json()
    assert apps not in {c["id"] for c in page["conversations"]}


# -- llm ----------------------------------------------------------------------------------


def test_llm_streams_answers_and_continues_a_conversation(served: Served, tmp_path: Path) -> None:
    (tmp_path / "extra-openai-models.yaml").write_text(
        f"- model_id: hearth-local\n  model_name: hearth-local\n  api_base: {served.base}\n"
        "  api_key_name: hearth\n"
    )
    (tmp_path / "keys.json").write_text(json.dumps({"hearth": served.token}))
    env = {**os.environ, "LLM_USER_PATH": str(tmp_path)}
    llm = str(Path(sys.executable).parent / "llm")

    def run(*args: str) -> str:
        done = subprocess.run(
            [llm, *args],
            env=env,
            stdin=subprocess.DEVNULL,  # else llm reads it as more prompt
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    run("-m", "hearth-local", "Say hello", "--no-stream", "-o", "max_tokens", "4")
    run("-m", "hearth-local", "Say hello", "-o", "max_tokens", "4")
    run("-c", "And again", "-o", "max_tokens", "4")
    no_stream, streamed, again = json.loads(run("logs", "--json", "-n", "3"))  # oldest first
    assert again["prompt"].endswith("And again")
    assert again["conversation_id"] == streamed["conversation_id"]  # -c continued it
    assert no_stream["conversation_id"] != streamed["conversation_id"]
    for entry in (no_stream, streamed, again):  # usage, streamed or not
        assert entry["input_tokens"] > 0 and entry["output_tokens"] == 4, entry


# -- LiteLLM ------------------------------------------------------------------------------


def test_litellm_completes_streams_and_counts_usage(served: Served) -> None:
    import litellm

    common = {"model": "openai/hearth-local", "api_base": served.base, "api_key": served.token}
    whole = litellm.completion(messages=HI, max_tokens=5, **common)
    assert whole.usage.completion_tokens == 5 and whole.usage.prompt_tokens > 0
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + 5
    assert whole.choices[0].finish_reason == "length"
    chunks = list(
        litellm.completion(
            messages=HI,
            max_tokens=5,
            stream=True,
            stream_options={"include_usage": True},
            **common,
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    assert [c.usage for c in chunks if getattr(c, "usage", None)][-1].completion_tokens == 5
    later = asyncio.run(litellm.acompletion(messages=HI, max_tokens=3, **common))
    assert later.usage.completion_tokens == 3 and later.usage.prompt_tokens > 0
