"""Prompt-injection corpus: untrusted text (web results, message bodies, MCP results)
that tries to make the phone send, delete, pay or write files. After such input, every
such step must end in a refusal or in a confirmation that names its source; with
`--yes` the tainted step is refused, with `--no` nothing happens at all."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import trio

from hearth.companion.executor import SessionState
from hearth.protocol.wire.messages import UntrustedInput

from .phone_kit import make_executor, make_plan

CORPUS = json.loads((Path(__file__).parent / "injection" / "corpus.json").read_text())


def untrusted(case: dict) -> UntrustedInput:
    return UntrustedInput(
        tool=case["source"] if case["source"] != "message_body" else "messages_read",
        source=case["origin"],
        digest=hashlib.sha256(case["text"].encode()).digest(),
    )


@pytest.mark.parametrize("answer", [True, False], ids=["--yes", "--no"])
@pytest.mark.parametrize("case", CORPUS, ids=[f"{c['source']}-{c['tool']}" for c in CORPUS])
def test_injected_actions_end_in_refusal_or_a_confirmation_naming_the_source(
    tmp_path, case, answer
) -> None:
    executor, asked, data = make_executor(tmp_path, answer=answer)
    plan = make_plan(("s1", case["tool"], case["arguments"], []), untrusted=[untrusted(case)])
    (obs,) = trio.run(lambda: executor.execute(plan, SessionState()))
    assert obs.status == "refused"  # nothing the injection wanted ran
    named = [q for q in asked.asked if any(case["origin"] in src for src in q.tainted.values())]
    assert named, "the confirmation must name where the argument came from"
    assert not (data.root / "outbox").exists() or not list((data.root / "outbox").iterdir())


def test_corpus_counts() -> None:
    sources = {c["source"] for c in CORPUS}
    assert len(CORPUS) >= 10 and sources == {"web_search", "message_body", "mcp"}
