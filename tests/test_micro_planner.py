"""The micro-planner: a model that truly plans, measured on requests it never saw.

CI runs its evaluation (`python -m hearth.node.evaluate`, the node's own prompt,
grammar, sampling and parser) on both files kept in the package; training runs by hand.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from hearth.companion.tools.builtin import register_builtin
from hearth.companion.tools.registry import Registry
from hearth.companion.tools.storage import PhoneData
from hearth.node.search import WebSearchTool
from hearth.protocol.model.chat import ChatTemplate
from hearth.protocol.model.micro.files import kept, tool_specs
from hearth.protocol.model.micro.requests import RESERVED, examples, held_out
from hearth.protocol.model.micro.weights import NAME, template

DEMO_AND_TESTS = (
    "Note that we need milk and remind me tomorrow at 9",
    "Write a note: buy bread",
    "What time is it?",
)


@pytest.fixture(scope="module")
def scores() -> list[dict]:
    """The evaluation of both kept files on 200 held-out requests, run once."""
    out = subprocess.run(
        [sys.executable, "-m", "hearth.node.evaluate", "--count", "200", "--json"],
        capture_output=True,
        text=True,
        timeout=840,
        check=True,
    )
    found = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [s["model"] for s in found] == [p.name for p in kept()]
    return found


@pytest.mark.timeout(900)
def test_both_files_pick_the_right_tools_and_answer_questions_in_words(scores) -> None:
    """What the micro-planner does today (seed 0, temperature 0; measured 38% exact,
    the right tools for 154 of 159 plans, 41 of 41 questions answered in words, on both
    files): a bound it must not fall below."""
    for s in scores:
        assert s["requests"] == 200 and s["temperature"] == 0, s
        assert s["plans"] > 150, s  # most requests need a plan
        assert s["plans_right_tools"] >= 0.9 * s["plans"], s
        assert s["questions"] > 0 and s["questions_in_words"] == s["questions"], s
        assert s["share"] >= 0.3, s


@pytest.mark.timeout(900)
@pytest.mark.xfail(
    strict=True,
    reason="measured 38% exact on both files: the micro-planner picks the right tools and "
    "answers in words, but does not yet copy slot values it never saw (a note's text, a "
    "name, the date from the phone's time) into its calls; issue 40 stays open",
)
def test_the_held_out_requests_are_planned_exactly_on_both_files(scores) -> None:
    """At least 95% exact (tools and arguments) on 200 held-out requests, each file."""
    for s in scores:
        assert s["share"] >= 0.95, s


def test_the_evaluation_prints_its_share_as_a_person_reads_it() -> None:
    bf16, _ = kept()
    out = subprocess.run(
        [sys.executable, "-m", "hearth.node.evaluate", "--model", str(bf16), "--count", "10"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    line = out.stdout.strip()
    assert line.startswith(f"{bf16.name}: ") and "% exact (" in line, line
    assert "seed 0, temperature 0" in line


def test_held_out_requests_share_no_phrasing_or_value_with_training() -> None:
    trained = list(examples("train", 20_000, 0))
    train = [ex.request for ex in trained]
    held = [ex.request for ex in examples("held-out", 400, 0)]
    assert not set(train) & set(held)
    for request in DEMO_AND_TESTS:
        assert request not in train
    values = {v for ex in trained for call in ex.calls for v in call.arguments.values()}
    for value in RESERVED:  # no training plan writes the demo's or the tests' values
        assert held_out(value) and value not in values, value


def test_the_split_holds_out_a_fifth_of_phrasings_and_values() -> None:
    values = [f"value {i}" for i in range(2000)]
    share = sum(map(held_out, values)) / len(values)
    assert 0.15 < share < 0.25


def test_the_tools_it_learned_are_the_ones_the_phone_and_node_offer() -> None:
    registry = Registry()
    with tempfile.TemporaryDirectory() as tmp:
        register_builtin(registry, PhoneData(Path(tmp)))
    offered = [s.model_dump(mode="json") for s in registry.specs()]
    offered.append(WebSearchTool.spec.model_dump(mode="json"))
    assert tool_specs() == offered


def test_its_template_is_read_as_any_gguf_template_is() -> None:
    chat = ChatTemplate.for_model(template(), NAME)
    assert chat.call_format.name == "qwen-xml" and chat.dated
    tools = tool_specs()[:2]
    text = chat.render([{"role": "user", "content": "hi"}], tools, now="2026-12-07 10:53")
    assert "tools: calendar_list calendar_create\nnow: 2026-12-07 10:53\n" in text
