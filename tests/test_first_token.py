"""What a local request spends before its first token and beyond the model's decode
(issue 34): work that is the same on every request is done once, and the generating
thread hands its text to the event loop without waiting for it."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import threading

import anyio
import httpx
import pytest
import trio

from hearth.companion.local_model import LocalModel
from hearth.companion.swarmkit import init_phone, start_companion
from hearth.companion.tools.selection import _index, select, tool_text
from hearth.node.backends import Conversation, GenerationSettings, ignore_text
from hearth.node.backends.llamacpp import LlamaCppBackend
from hearth.node.backends.scripted import ScriptedBackend
from hearth.node.documents import inert_for
from hearth.protocol.model.chat import ChatTemplate, split_at_first_user_turn
from hearth.protocol.model.checkpoints import Checkpoints
from hearth.protocol.model.grammar import _grammars, tool_grammar
from hearth.protocol.model.limits import DEFAULT_LIMITS, GrammarLimits, ModelLimits, Sampling
from hearth.protocol.model.runtime import LlamaRuntime, SessionMemory
from hearth.protocol.model.validate import _passed, check_schemas
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage

pytestmark = pytest.mark.timeout(300)

TOOLS = {
    "notes_create": tool_text("notes_create", "Write a note", {}),
    "reminders_add": tool_text("reminders_add", "Remind me at a time", {}),
    "messages_send": tool_text("messages_send", "Send a message to a contact", {}),
}
SCHEMAS = {
    "notes_create": {
        "type": "object",
        "properties": {"text": {"type": "string", "pattern": "^[a-z ]+$"}},
        "required": ["text"],
    },
    "reminders_add": {"type": "object", "properties": {"at": {"type": "string"}}},
}


def test_the_tool_index_is_built_once_per_set_of_tools() -> None:
    """The BM25 index over the registry's tools was built again on every request; it is
    built once per set of tools, with the same selections as a fresh one."""
    _index.cache_clear()
    asked = ("note milk", "remind me at noon", "send hi to Alice")
    first = [select(text, TOOLS) for text in asked]
    again = [select(text, TOOLS) for text in asked]
    assert first == again
    assert [s.matched for s in first] == [
        {"notes_create"},
        {"reminders_add"},
        {"messages_send"},
    ]
    assert _index.cache_info().misses == 1
    fewer = {name: text for name, text in TOOLS.items() if name != "notes_create"}
    assert select("note milk", fewer).fallback  # another set of tools: its own index
    assert _index.cache_info().misses == 2


def test_tool_schemas_that_passed_are_not_checked_again_under_the_same_limits() -> None:
    """The same tools come with every request: a set of schemas that passed is kept by
    its digest; under other limits it is checked again, and a refused set never kept."""
    _passed.clear()
    check_schemas(SCHEMAS)
    assert (SCHEMAS, DEFAULT_LIMITS) in _passed
    check_schemas(SCHEMAS)
    assert len(_passed) == 1
    one_tool = ModelLimits(grammar=GrammarLimits(max_tools=1))
    with pytest.raises(HearthError, match="more than 1 tools") as refused:
        check_schemas(SCHEMAS, one_tool)
    assert refused.value.code is ErrorCode.INVALID_INPUT
    lookaround = {"t": {"type": "string", "pattern": "(?=a)"}}
    for _ in range(2):
        with pytest.raises(HearthError, match="RE2"):
            check_schemas(lookaround)
    assert len(_passed) == 1


def test_a_tool_grammar_is_built_once_for_the_same_tools_and_settings() -> None:
    """The grammar of the same tools was built again for every request (about 1 ms on
    the node, before its first token); it is kept by the tools' digest and settings."""
    _grammars.clear()
    first = tool_grammar(SCHEMAS, "required", 2)
    assert tool_grammar(dict(SCHEMAS), "required", 2) is first
    assert tool_grammar(SCHEMAS, "auto", 2) is not first
    assert tool_grammar(SCHEMAS, "required", 3) != first
    assert len(_grammars) == 3
    with pytest.raises(HearthError, match="more than 1 tools"):
        tool_grammar(SCHEMAS, "required", 2, GrammarLimits(max_tools=1))
    assert len(_grammars) == 3


def test_the_generating_thread_does_not_wait_for_the_loop_and_text_goes_out_in_batches(
    tiny_models,
) -> None:
    """Each token was handed to the event loop and the model waited until its event had
    been sent (a wake-up and an HTTP chunk per token: most of a local request's CPU
    beyond the decode). The model now generates on while the loop is busy, and what
    gathered meanwhile goes out as one piece, in order, nothing lost."""
    produced = 0
    lock = threading.Lock()

    def cancelled() -> bool:  # called by the generating thread once per token
        nonlocal produced
        with lock:
            produced += 1
        return False

    heard: list[tuple[str, bool]] = []

    async def hear(piece: str, thinking: bool) -> None:
        if not heard:  # the loop is busy with the first piece until 20 more tokens came
            with anyio.fail_after(120):  # old code: the model waits here for ever
                while produced < 20:
                    await anyio.sleep(0.005)
        heard.append((piece, thinking))

    async def go() -> str:
        model = LocalModel(tiny_models[1], n_ctx=2048, sampling=Sampling(temperature=1.0, seed=7))
        result = await model.plan(
            "note milk", [], "phone", mode="none", cancelled=cancelled, on_text=hear
        )
        return result.answer

    answer = trio.run(go)
    text = "".join(piece for piece, thinking in heard if not thinking)
    assert produced >= 20
    assert len(heard) < produced  # batched
    assert text.strip() == answer.strip() != ""


def test_a_session_nobody_holds_is_not_saved_when_the_next_takes_the_context(
    tiny_models,
) -> None:
    """The phone's model runs every round in a new session that is dropped after it, and
    a node's plan session is dropped when it ends; the runtime copied the state of the
    last one out each time the next request took the context (~1 ms before the first
    token). A session still held is saved, and resumes where it was."""
    runtime = LlamaRuntime(tiny_models[1], n_ctx=2048)
    prompt = "<|im_start|>user\nnote milk<|im_end|>\n<|im_start|>assistant\n"
    runtime.generate(SessionMemory(), prompt, grammar=None, max_tokens=4)  # then dropped
    assert runtime._owner is not None and runtime._owner() is None
    held = SessionMemory()
    runtime.generate(held, prompt, grammar=None, max_tokens=4)
    assert held.snapshot is None
    runtime.generate(SessionMemory(), prompt, grammar=None, max_tokens=4)
    assert held.tokens and held.snapshot is not None
    again = runtime.generate(held, "<|im_end|>\n<|im_start|>user\nmore", grammar=None, max_tokens=4)
    assert again.prompt_tokens == len(runtime.tokenize("<|im_end|>\n<|im_start|>user\nmore"))


def test_a_prompt_seen_again_or_gone_on_from_evaluates_only_what_it_adds(tiny_models) -> None:
    """The request's own prompt tokens were evaluated on every request (the largest step
    before a first token: ~8 ms of a remote 17); llama-server starts where its last
    prompt ended. A new session's prompt is kept short of its last token: the same
    prompt again evaluates that one token and answers the same, and the next turn of a
    conversation only what it adds."""
    runtime = LlamaRuntime(tiny_models[1], n_ctx=2048)
    template = ChatTemplate(runtime.chat_template)
    prefix, rest = split_at_first_user_turn(template.render([{"role": "user", "content": "hi"}]))
    first = runtime.generate(SessionMemory(), rest, prefix=prefix, grammar=None, max_tokens=6)
    assert first.prompt_tokens == len(runtime.tokenize(prefix)) + len(runtime.tokenize(rest))
    again = runtime.generate(SessionMemory(), rest, prefix=prefix, grammar=None, max_tokens=6)
    assert again.prompt_tokens == 1
    assert (again.text, again.tokens, again.prompt_total) == (
        first.text,
        first.tokens,
        first.prompt_total,
    )
    turn = rest + first.text + "<|im_end|>\n<|im_start|>user\nand eggs<|im_end|>\n"
    on = runtime.generate(SessionMemory(), turn, prefix=prefix, grammar=None, max_tokens=6)
    assert 1 < on.prompt_tokens == len(runtime.tokenize(turn)) - (len(runtime.tokenize(rest)) - 1)
    other = runtime.generate(
        SessionMemory(),
        "<|im_start|>user\nbye<|im_end|>\n",
        prefix=prefix,
        grammar=None,
        max_tokens=6,
    )  # another prompt: only the shared prefix is held for it
    assert other.prompt_tokens == len(runtime.tokenize("<|im_start|>user\nbye<|im_end|>\n"))


def test_the_nodes_marker_breaker_is_built_once_per_model(tiny_models) -> None:
    """The node built its `Inert` (a trie of the model's special tokens, compiled) again
    for every plan request and every document reading, before the first token."""
    backend = LlamaCppBackend(tiny_models[0], 1024)
    inert = inert_for(backend)
    assert inert_for(backend) is inert
    specials = [s for s in backend.runtime.special_texts if len(s) > 1 and " " not in s]
    assert specials and all(inert(s) != s for s in specials)
    assert inert_for(ScriptedBackend([])) is inert_for(ScriptedBackend([]))


def test_checkpoints_are_bounded_and_held_only_for_the_tokens_they_were_taken_at() -> None:
    kept = Checkpoints(count=2, max_bytes=10)
    kept.keep("a", (1, 2, 3), b"abc")
    assert kept.longest("a", [1], [2, 3, 4]) == ((1, 2, 3), b"abc")
    assert kept.longest("b", [1], [2, 3, 4]) is None  # another scope's
    assert kept.longest("a", [1], [2, 3]) is None  # the prompt's last token is always evaluated
    assert kept.longest("a", [1], [2, 4, 4]) is None  # diverges
    assert kept.longest("a", [1, 2, 3], [4]) is None  # nothing beyond the start
    kept.keep("a", (1, 2), b"ab")
    assert kept.longest("a", [1], [2, 3, 4, 5]) == ((1, 2, 3), b"abc")  # the longest
    kept.keep("a", (1, 2, 9), b"abcdef")  # over the count: the least recently used goes
    assert len(kept) == 2 and kept.longest("a", [1], [2, 9, 9]) is not None
    assert kept.longest("a", [1], [2, 5, 5]) is None  # (1, 2) went: (1, 2, 3) was used since
    assert kept.longest("a", [1], [2, 3, 4]) == ((1, 2, 3), b"abc")
    kept.keep("a", (7, 7), b"0123456789")  # over the bytes: the oldest go
    assert len(kept) == 1
    kept.keep("a", (8, 8), b"0123456789a")  # larger than all: never held
    assert kept.longest("a", [7], [7, 1]) is not None and kept.longest("a", [8], [8, 1]) is None


def test_a_prompt_kept_for_one_phone_never_starts_another_phones(tiny_models) -> None:
    """The node's model serves its owner's phones and, when allowed, friends' phones: a
    prompt that started where another phone's ended would answer sooner, and so tell a
    friend's phone what the owner's had asked. Each phone's kept prompts are its own."""
    backend = LlamaCppBackend(tiny_models[1], 2048)

    async def ask(scope: str) -> int:
        result = await backend.generate(
            Conversation(messages=[ChatMessage(role="user", content="note milk")], scope=scope),
            grammar=None,
            settings=GenerationSettings(max_tokens=4),
            on_text=ignore_text,
            cancel=anyio.Event(),
        )
        return result.prompt_tokens

    assert trio.run(ask, "owner-phone") > 1
    assert trio.run(ask, "owner-phone") == 1  # its own prompt again
    assert trio.run(ask, "friend-phone") > 1  # the same prompt: evaluated, as if never seen
    assert trio.run(ask, "friend-phone") == 1


def _chunk(line: str) -> dict:
    return json.loads(line[len("data: ") :])


def _content(line: str) -> str | None:
    chunk = _chunk(line)
    assert "error" not in chunk, chunk  # old code: `database is locked`, after 5 s
    return chunk["choices"][0]["delta"].get("content")


def test_the_first_token_does_not_wait_for_the_request_to_be_kept_and_an_answer_is_never_lost(
    tmp_path, processes, tiny_models
) -> None:
    """Keeping a request as it starts is a commit with its fsync (~12 ms on a busy disk),
    and it ran on the event loop before the model began. Another writer holds the
    conversations now: the first token still streams; the answer ends only once the
    request is kept, and a companion killed right after it has lost nothing."""
    home = tmp_path / "phone"
    init_phone(home, tiny_models[1])
    companion = start_companion(processes, home)
    token = (home / "api.token").read_text().strip()
    body = {
        "model": "hearth-local",
        "messages": [{"role": "user", "content": "note milk"}],
        "stream": True,
        "max_tokens": 64,
        "temperature": 1.0,  # greedily, the random tiny model streams only control characters
        "seed": 7,
        "tool_choice": "none",
    }
    url = f"{companion.ready['api']}/v1/chat/completions"
    writer = sqlite3.connect(home / "conversations.db", isolation_level=None)
    with httpx.Client(timeout=120, headers={"Authorization": f"Bearer {token}"}) as client:
        client.post(url, json={**body, "stream": False}).raise_for_status()  # model loaded
        writer.execute("BEGIN IMMEDIATE")  # another writer: `hearth conversations rename`
        with client.stream("POST", url, json=body) as response:
            lines = (line for line in response.iter_lines() if line.startswith("data: {"))
            first = next(lines)
            while not _content(first):
                first = next(lines)
            assert writer.execute("SELECT COUNT(*) FROM turns").fetchone() == (1,)
            writer.execute("ROLLBACK")
            chunks = [_chunk(line) for line in lines]
    routed = chunks[-1]["hearth"]
    streamed = "".join(
        c["choices"][0]["delta"].get("content") or "" for c in [_chunk(first), *chunks]
    )
    os.kill(companion.proc.pid, signal.SIGKILL)  # right after the answer
    companion.proc.wait(timeout=30)
    writer.close()
    kept = sqlite3.connect(home / "conversations.db")
    row = kept.execute(
        "SELECT state, answer FROM turns WHERE request_id = ?", (routed["request_id"],)
    ).fetchone()
    kept.close()
    assert row is not None and row[0] == "answered"
    assert row[1].strip() == streamed.strip() != ""
