"""Issue 43's findings on the OpenAI-compatible API, against a real `hearth serve` (a phone
with the tiny model, unpaired: `hearth-local`): `GET /health` without a token, `logprobs:
false` accepted, a fresh seed per request reported in `system_fingerprint`, context
overflow as `context_length_exceeded`, and `usage: null` on the chunks before the usage
chunk with `stream_options.include_usage`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from .conftest import Processes
from .nodes import cli, init_phone, start_companion

pytestmark = pytest.mark.timeout(600)

HI = [{"role": "user", "content": "Say hello"}]
SEED = re.compile(r"seed-(\d+)")


@dataclass
class Served:
    home: Path
    url: str  # http://127.0.0.1:PORT
    token: str

    def client(self) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=f"{self.url}/v1", api_key=self.token, max_retries=0, timeout=300
        )

    def http(self, **headers: str) -> httpx.Client:
        auth = {"Authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.url, headers={**auth, **headers}, timeout=300)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> Iterator[Served]:
    """`hearth serve` for an unpaired phone with the tiny model; an answer may ask for as
    many tokens as the model's whole context (so a request can overflow it)."""
    processes = Processes()
    home = tmp_path_factory.mktemp("issue43") / "phone"
    try:
        init_phone(home, tiny_models[1], noise=True)
        cli("hearth", "config", "set", "limits.max_tokens", "8192", "--home", str(home))
        running = start_companion(processes, home)
        token = (home / "api.token").read_text().strip()
        yield Served(home, running.ready["api"], token)
    finally:
        processes.cleanup()


def seed_of(fingerprint: str | None) -> int:
    assert fingerprint is not None, "no system_fingerprint"
    found = SEED.fullmatch(fingerprint)
    assert found, fingerprint
    return int(found.group(1))


def chunks_of(reply: httpx.Response) -> list[dict]:
    events = "".join(reply.iter_text()).split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""], events[-3:]
    return [json.loads(e.removeprefix("data: ")) for e in events[:-2]]


# 1. GET /health ----------------------------------------------------------------------------


def test_health_needs_no_token_and_says_only_that_it_is_up(served: Served) -> None:
    port = served.url.rsplit(":", 1)[1]
    with httpx.Client(base_url=served.url, timeout=30) as http:
        up = http.get("/health")
        assert up.status_code == 200
        assert up.json() == {"status": "ok"}
        assert http.get("/health", headers={"Host": f"localhost:{port}"}).status_code == 200
        assert http.get("/health", headers={"Host": f"evil.example:{port}"}).status_code == 421
        assert http.get("/health", headers={"Origin": "http://evil.example"}).status_code == 403
        # the rest still needs the token
        assert http.get("/v1/models").status_code == 401
        assert http.get("/api/status").status_code == 401


# 2. logprobs: false --------------------------------------------------------------------------


def test_logprobs_false_with_top_logprobs_0_is_accepted(served: Served) -> None:
    completion = served.client().chat.completions.create(
        model="hearth-local",
        messages=HI,
        max_tokens=4,
        tool_choice="none",
        logprobs=False,
        top_logprobs=0,
    )
    assert completion.choices[0].finish_reason in ("stop", "length")
    with pytest.raises(openai.BadRequestError) as refused:
        served.client().chat.completions.create(
            model="hearth-local", messages=HI, max_tokens=4, logprobs=True
        )
    assert refused.value.body["param"] == "logprobs"


# 3. a fresh seed per request --------------------------------------------------------------


def test_without_a_seed_each_request_draws_one_and_reports_it(served: Served) -> None:
    client = served.client()
    drawn = {"max_tokens": 12, "temperature": 1.2, "tool_choice": "none"}
    answers = [
        client.chat.completions.create(model="hearth-local", messages=HI, **drawn) for _ in range(3)
    ]
    seeds = [seed_of(a.system_fingerprint) for a in answers]
    assert len(set(seeds)) == 3  # each request drew its own
    again = client.chat.completions.create(
        model="hearth-local", messages=HI, seed=seeds[1], **drawn
    )
    assert seed_of(again.system_fingerprint) == seeds[1]  # an explicit seed is kept
    assert again.choices[0].message.content == answers[1].choices[0].message.content

    # streamed: every chunk says the seed, and the seed repeats the answer
    stream = client.chat.completions.create(model="hearth-local", messages=HI, stream=True, **drawn)
    chunks = list(stream)
    [seed] = {seed_of(c.system_fingerprint) for c in chunks}
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    repeated = client.chat.completions.create(model="hearth-local", messages=HI, seed=seed, **drawn)
    assert repeated.choices[0].message.content == text


# 4. context overflow ------------------------------------------------------------------------


def test_a_request_past_the_context_is_context_length_exceeded(served: Served) -> None:
    too_long = {"model": "hearth-local", "messages": HI, "max_tokens": 8192, "tool_choice": "none"}
    with pytest.raises(openai.BadRequestError) as refused:
        served.client().chat.completions.create(**too_long)
    assert refused.value.code == "context_length_exceeded"
    assert refused.value.body["code"] == "context_length_exceeded"
    assert "context" in refused.value.body["message"]
    with served.http() as http:
        reply = http.post("/v1/chat/completions", json=too_long)
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    with (
        served.http() as http,
        http.stream("POST", "/v1/chat/completions", json={**too_long, "stream": True}) as streamed,
    ):
        raw = "".join(streamed.iter_text())
    assert '"code":"context_length_exceeded"' in raw.replace(" ", ""), raw[-300:]


# 5. usage: null with include_usage -----------------------------------------------------------


def test_include_usage_sends_usage_null_on_every_chunk_but_the_last(served: Served) -> None:
    body = {
        "model": "hearth-local",
        "messages": HI,
        "max_tokens": 6,
        "tool_choice": "none",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with served.http() as http, http.stream("POST", "/v1/chat/completions", json=body) as reply:
        assert reply.status_code == 200
        chunks = chunks_of(reply)
    *before, last = chunks
    assert before and all("usage" in c and c["usage"] is None for c in before), before
    assert last["choices"] == [] and last["usage"]["completion_tokens"] == 6
    assert last["usage"]["total_tokens"] == (
        last["usage"]["prompt_tokens"] + last["usage"]["completion_tokens"]
    )
    assert {c["system_fingerprint"] for c in chunks} == {chunks[0]["system_fingerprint"]}
