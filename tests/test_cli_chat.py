"""`hearth chat`: a conversation in the terminal, in-process or through the companion,
ended by Ctrl-D, `/quit` or Ctrl-C (exit 130), every line a turn of one conversation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .nodes import BIN, cli, start_companion
from .terminal import OnTerminal, on_terminal

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def phone(tmp_path, tiny_models) -> Path:
    """An unpaired phone with the tiny Q4 model: every request is answered locally."""
    home = tmp_path / "phone"
    cli("hearth", "init", "--model", str(tiny_models[1]), "--json", "--home", str(home))
    return home


@pytest.fixture
def companion(processes, phone) -> Iterator[subprocess.Popen[str]]:
    running = start_companion(processes, phone)
    yield running.proc
    running.stop()


def chat(phone: Path, *args: str) -> OnTerminal:
    return on_terminal(str(BIN / "hearth"), "chat", "--route", "local", "--home", str(phone), *args)


def say(term: OnTerminal, line: str, prompts: int) -> None:
    """Type `line` and wait for the prompt that follows its answer (the `prompts`th)."""
    term.type(line)
    for _ in range(600):
        if term.seen.count(b"you> ") >= prompts:
            return
        assert term.proc.poll() is None, term.text()
        term.read(0.1)
    raise AssertionError(f"no answer to {line!r}: {term.text()}")


def conversations(phone: Path, *args: str) -> dict:
    result = cli("hearth", "conversations", *args, "--json", "--home", str(phone))
    return json.loads(result.stdout)


def test_each_line_is_a_turn_of_one_conversation_and_ctrl_d_ends_it(phone) -> None:
    term = chat(phone)
    term.expect("you> ")
    say(term, "remember the milk", 2)
    say(term, "and the bread", 3)
    os.write(term.master, b"\x04")  # Ctrl-D at the prompt
    assert term.finish() == 0, term.text()
    [summary] = conversations(phone)["conversations"]
    assert summary["turns"] == 2 and summary["title"].startswith("remember the milk")
    detail = conversations(phone, summary["id"])
    assert [t["text"] for t in detail["turns"]] == ["remember the milk", "and the bread"]


def test_chat_through_the_companion_continues_a_conversation(phone, companion) -> None:
    term = chat(phone)
    term.expect("you> ")
    say(term, "first", 2)
    term.type("/quit")
    assert term.finish() == 0, term.text()
    [summary] = conversations(phone)["conversations"]
    term = chat(phone, "--conversation", summary["id"])
    term.expect("you> ")
    say(term, "second", 2)
    term.type("/quit")
    assert term.finish() == 0, term.text()
    detail = conversations(phone, summary["id"])
    assert [t["text"] for t in detail["turns"]] == ["first", "second"]
    assert companion.poll() is None


def test_ctrl_c_at_the_prompt_exits_130_without_a_traceback(phone) -> None:
    term = chat(phone)
    term.expect("you> ")
    os.kill(term.proc.pid, signal.SIGINT)
    assert term.finish(timeout=10) == 130, term.text()
    assert "Traceback" not in term.text()
