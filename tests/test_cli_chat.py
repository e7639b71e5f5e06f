"""`hearth chat`: a conversation in the terminal, in-process or through the companion,
ended by Ctrl-D, `/quit` or Ctrl-C (exit 130), every line a turn of one conversation.
Lines are edited with prompt_toolkit and kept across sessions (Up recalls them); `/`
commands are never sent to a model; Ctrl-C during an answer stops only that answer (the
home node hears a cancel) and the chat goes on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .hostile.harness import Bench
from .hostile.script import Script
from .nodes import BIN, cli, start_companion, wait_until
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


PROMPT = "you>"  # prompt_toolkit draws the prompt's trailing space as a cursor move
# prompt_toolkit redraws the prompt at each key; a new prompt starts by turning bracketed
# paste on, once
NEW_PROMPT = b"\x1b[?2004h"
UP = "\x1b[A"
# the pseudo-terminal answers no cursor position request: prompt_toolkit need not wait for one
NO_CPR = {"PROMPT_TOOLKIT_NO_CPR": "1"}


def chat(phone: Path, *args: str, route: str = "local") -> OnTerminal:
    return on_terminal(
        str(BIN / "hearth"), "chat", "--route", route, "--home", str(phone), *args, env=NO_CPR
    )


def say(term: OnTerminal, line: str, prompts: int) -> None:
    """Type `line` and wait for the prompt that follows its answer (the `prompts`th)."""
    term.type(line)
    for _ in range(600):
        if term.seen.count(NEW_PROMPT) >= prompts:
            return
        assert term.proc.poll() is None, term.text()
        term.read(0.1)
    raise AssertionError(f"no answer to {line!r}: {term.text()}")


def conversations(phone: Path, *args: str) -> dict:
    result = cli("hearth", "conversations", *args, "--json", "--home", str(phone))
    return json.loads(result.stdout)


def test_each_line_is_a_turn_of_one_conversation_and_ctrl_d_ends_it(phone) -> None:
    term = chat(phone)
    term.expect(PROMPT)
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
    term.expect(PROMPT)
    say(term, "first", 2)
    term.type("/quit")
    assert term.finish() == 0, term.text()
    [summary] = conversations(phone)["conversations"]
    term = chat(phone, "--conversation", summary["id"])
    term.expect(PROMPT)
    say(term, "second", 2)
    term.type("/quit")
    assert term.finish() == 0, term.text()
    detail = conversations(phone, summary["id"])
    assert [t["text"] for t in detail["turns"]] == ["first", "second"]
    assert companion.poll() is None


def test_ctrl_c_at_the_prompt_exits_130_without_a_traceback(phone) -> None:
    term = chat(phone)
    term.expect(PROMPT)
    os.kill(term.proc.pid, signal.SIGINT)
    assert term.finish(timeout=10) == 130, term.text()
    assert "Traceback" not in term.text()


def test_slash_commands_are_answered_by_the_chat_never_sent_to_a_model(phone) -> None:
    term = chat(phone)
    term.expect(PROMPT)
    say(term, "/help", 2)
    assert "/route auto|local|remote" in term.text() and "/new" in term.text()
    say(term, "/route", 3)
    assert "Route: local." in term.text()
    say(term, "/nonsense please", 4)
    assert "/nonsense is not a command" in term.text()
    say(term, "first request", 5)
    say(term, "/new", 6)
    say(term, "//etc is a folder", 7)
    term.type("/quit")
    assert term.finish() == 0, term.text()
    listed = conversations(phone)["conversations"]
    asked = sorted(t["text"] for c in listed for t in conversations(phone, c["id"])["turns"])
    assert asked == ["/etc is a folder", "first request"]  # two conversations, no command
    assert len(listed) == 2


def test_the_up_arrow_recalls_a_line_typed_in_an_earlier_session(phone) -> None:
    term = chat(phone)
    term.expect(PROMPT)
    say(term, "remember the milk", 2)
    term.type("/quit")
    assert term.finish() == 0, term.text()
    history = phone / "chat_history"
    assert history.stat().st_mode & 0o777 == 0o600
    term = chat(phone)
    term.expect(PROMPT)
    os.write(term.master, UP.encode())  # "/quit"
    os.write(term.master, UP.encode())  # "remember the milk"
    say(term, "", 2)
    term.type("/quit")
    assert term.finish() == 0, term.text()
    assert "^[[A" not in term.text()
    turns = [t["text"] for c in conversations(phone)["conversations"]
             for t in conversations(phone, c["id"])["turns"]]  # fmt: skip
    assert turns == ["remember the milk", "remember the milk"]


def heard(bench: Bench) -> list[str]:
    """The frames the hostile home has heard from the phone, in order."""
    if not bench.heard.exists():
        return []
    return [json.loads(line)["frame"] for line in bench.heard.read_text().splitlines()]


def test_ctrl_c_stops_the_answer_the_home_hears_it_and_the_chat_goes_on(bench: Bench) -> None:
    bench.script.write_text(Script(rounds=[], hold_final=True).model_dump_json())
    term = chat(bench.phone, route="remote")
    term.expect(PROMPT)
    term.type("what is on my calendar?")
    wait_until(lambda: "plan_request" in heard(bench), "the request reached the home", 60)
    os.kill(term.proc.pid, signal.SIGINT)  # Ctrl-C while the answer is being written
    term.expect("Stopped.")
    wait_until(lambda: "cancel" in heard(bench), "the home heard the cancel", 30)
    term.expect(PROMPT)
    assert term.seen.count(NEW_PROMPT) == 2, term.text()
    assert term.proc.poll() is None  # still chatting
    say(term, "/help", 3)
    os.kill(term.proc.pid, signal.SIGINT)  # at the prompt: leave
    assert term.finish(timeout=10) == 130, term.text()
    assert "Traceback" not in term.text()
