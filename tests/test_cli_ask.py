"""`hearth ask` as a person and a script meet it: exit statuses for refused steps, prompts
that never reach stdout, plain answers shown once, streams without tool-call markup, and
Ctrl-C at any moment. Plans come from a scripted (hostile) home or a real node."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hearth.protocol.model.prose import ProseOnly

from .conftest import Processes
from .hostile.harness import start_bench
from .hostile.script import Round, Script
from .nodes import BIN, cli, init_phone, pair, start_node
from .terminal import on_terminal

SEND = {"id": "s1", "tool": "message_send", "arguments": {"to": "alice", "body": "hi"}}
READ = {"id": "s1", "tool": "device_status", "arguments": {}}
ANSWER = "array[i] = x[j]; [bold]not bold[/bold] \x1b[31m"


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory):
    """A phone paired with a home that plans from a script."""
    processes = Processes()
    try:
        yield start_bench(processes, tmp_path_factory.mktemp("bench"))
    finally:
        processes.cleanup()


def ask(bench, script: dict, *args: str) -> subprocess.CompletedProcess[str]:
    bench.script.write_text(Script.model_validate(script).model_dump_json())
    return subprocess.run(
        [str(BIN / "hearth"), "ask", "--route", "remote", "--home", str(bench.phone), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HEARTH_NO_MDNS": "1"},
    )


def one_json(out: str) -> dict:
    lines = out.strip().splitlines()
    assert len(lines) == 1, out
    return json.loads(lines[0])


def test_a_refused_step_prints_the_ask_object_and_exits_8(bench) -> None:
    result = ask(bench, {"rounds": [{"steps": [SEND]}]}, "--no", "--json", "send it")
    assert result.returncode == 8, result.stdout + result.stderr
    [step] = one_json(result.stdout)["plans"][0]["steps"]
    assert step["status"] == "refused" and step["error"]


def test_no_with_nothing_to_refuse_exits_0(bench) -> None:
    result = ask(bench, {"rounds": [{"steps": [READ]}]}, "--no", "--json", "battery?")
    assert result.returncode == 0, result.stdout + result.stderr
    assert one_json(result.stdout)["plans"][0]["steps"][0]["status"] == "ok"


def test_a_declined_confirmation_asks_on_the_terminal_never_on_stdout(bench) -> None:
    script = Script(rounds=[Round.model_validate({"steps": [SEND]})])
    bench.script.write_text(script.model_dump_json())
    term = on_terminal(
        str(BIN / "hearth"), "ask", "--route", "remote", "--json", "--home", str(bench.phone),
        "send it", stdout=subprocess.PIPE, env={"HEARTH_NO_MDNS": "1"},
    )  # fmt: skip
    term.expect("Go ahead?")
    term.type("n")
    assert term.finish() == 8
    assert term.proc.stdout is not None
    out = one_json(term.proc.stdout.read().decode())
    assert out["plans"][0]["steps"][0]["status"] == "refused"


def test_answers_and_reasons_show_as_plain_text_once(bench) -> None:
    bench.script.write_text(
        Script(rounds=[Round.model_validate({"steps": [SEND]})], answer=ANSWER).model_dump_json()
    )
    term = on_terminal(
        str(BIN / "hearth"), "ask", "--route", "remote", "--no", "--home", str(bench.phone),
        "send it", env={"HEARTH_NO_MDNS": "1"},
    )  # fmt: skip
    assert term.finish() == 8
    shown = term.text()
    assert shown.count("array[i] = x[j]; [bold]not bold[/bold] \\x1b[31m") == 1, shown
    assert "\x1b[31m" not in shown  # the answer's escape is shown, not obeyed
    assert "message_send" in shown and "refused" in shown
    assert "confirmation declined" in shown  # a step that is not ok says why


PROSE = st.text(alphabet=st.sampled_from("ab <>/_tolc\n"), max_size=30)


@given(
    before=PROSE.filter(lambda t: "<tool_call>" not in t),
    call=st.text(max_size=40).filter(lambda t: "</tool_call>" not in t),
    after=PROSE.filter(lambda t: "<tool_call>" not in t),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=8),
)
def test_the_stream_shows_prose_and_never_a_tool_call(
    before: str, call: str, after: str, cuts: list[int]
) -> None:
    text = f"{before}<tool_call>{call}</tool_call>{after}"
    prose = ProseOnly()
    edges = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    shown = "".join(prose.feed(text[a:b]) for a, b in itertools.pairwise(edges))
    assert before + after == shown + _held_back(after)


def _held_back(after: str) -> str:
    """What may stay held at the end: a tail that could still open a tool call."""
    for n in range(min(len("<tool_call>") - 1, len(after)), 0, -1):
        if "<tool_call>".startswith(after[-n:]):
            return after[-n:]
    return ""


@pytest.fixture(scope="module")
def real_phone(tmp_path_factory: pytest.TempPathFactory, tiny_models):
    """A phone with the tiny local model, paired with a real node serving the tiny model."""
    processes = Processes()
    root = tmp_path_factory.mktemp("real")
    try:
        node = start_node(processes, root / "node", "--model", str(tiny_models[0]))
        phone = root / "phone"
        init_phone(phone, tiny_models[1])
        pair(phone, node.invite())
        yield phone
    finally:
        processes.cleanup()


def story(phone: Path, route: str) -> list[str]:
    return [str(BIN / "hearth"), "ask", "--json", "--route", route, "--tool-choice", "none",
            "--home", str(phone), "tell me a long story about the sea"]  # fmt: skip


@pytest.fixture(scope="module")
def ask_seconds(real_phone: Path) -> dict[str, float]:
    """How long a whole ask takes here and now, per route: the Ctrl-C moments are spread
    over it (fixed moments fell after the end of a faster ask and tested nothing)."""
    took: dict[str, float] = {}
    for route in ("local", "remote"):
        start = time.monotonic()
        subprocess.run(story(real_phone, route), capture_output=True, timeout=180,
                       env={**os.environ, "HEARTH_NO_MDNS": "1"})  # fmt: skip
        took[route] = time.monotonic() - start
    return took


@pytest.fixture(scope="module")
def startup_seconds() -> float:
    """How long a fresh interpreter takes here and now to reach the command's first
    statement (`hold()`, which holds a Ctrl-C from then on): before it, Python's own
    handler raises, and no program can answer for that."""
    first = [str(BIN / "python"), "-c", "from hearth.companion.entry import hold"]
    runs = []
    for _ in range(3):
        start = time.monotonic()
        subprocess.run(first, capture_output=True, timeout=60, check=True)
        runs.append(time.monotonic() - start)
    return sorted(runs)[1]


@pytest.mark.parametrize("route", ["local", "remote"])
@pytest.mark.parametrize("share", [0.04, 0.15, 0.3, 0.45, 0.6])
@pytest.mark.timing
def test_ctrl_c_at_any_moment_is_cancelled_with_one_json_object(
    real_phone: Path,
    ask_seconds: dict[str, float],
    startup_seconds: float,
    route: str,
    share: float,
) -> None:
    moment = max(share * ask_seconds[route], 2 * startup_seconds)  # once `hold()` can run
    proc = subprocess.Popen(
        story(real_phone, route),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HEARTH_NO_MDNS": "1"},
    )
    time.sleep(moment)
    if proc.poll() is not None:  # done before this moment came: nothing to interrupt
        proc.communicate()
        pytest.skip(f"the {route} ask ended within {moment:.2f} s")
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    print(f"{route} at {moment} s: ended {time.monotonic() - sent:.2f} s after SIGINT")
    if proc.returncode in (0, -signal.SIGINT) and '"answer"' in out:  # its one object
        pytest.skip(f"the {route} ask had answered; SIGINT came while the process exited")
    assert proc.returncode == 130, out + err
    assert one_json(out) == {"error": {"code": "cancelled", "message": "cancelled by the user"}}
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


def hearth(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return cli("hearth", *args, env={"HEARTH_NO_MDNS": "1"}, check=False, timeout=timeout)


@pytest.mark.parametrize("route", ["local", "remote"])
def test_think_keeps_the_thinking_apart_from_the_answer(real_phone: Path, route: str) -> None:
    home = ("--home", str(real_phone))
    assert hearth("config", "set", "limits.max_thinking_tokens", "8", *home).returncode == 0
    try:
        ask = ("ask", "--json", "--route", route, "--tool-choice", "none", *home)
        runs = {think: hearth(*ask, *(["--think"] if think else []), "why is the sky blue")
                for think in (False, True)}  # fmt: skip
    finally:
        hearth("config", "set", "limits.max_thinking_tokens", "1024", *home)
    for think, result in runs.items():
        assert result.returncode == 0, result.stdout + result.stderr
        out = one_json(result.stdout)
        assert out["route"] == route
        if not think:
            assert "thinking" not in out  # off by default
            continue
        assert out["thinking"].rstrip().endswith("</think>")  # one block, closed in budget
        assert "<think>" not in out["answer"] and "</think>" not in out["answer"]


@pytest.mark.parametrize("think", [False, True])
def test_the_terminal_shows_the_model_has_begun_before_any_visible_text(
    real_phone: Path, think: bool
) -> None:
    """The tiny model's answer is whitespace (its thinking, with --think, hidden): before,
    a terminal showed nothing until the command ended; now the view says the model has
    begun from its first token, and the view is gone when the answer is printed."""
    term = on_terminal(
        str(BIN / "hearth"), "ask", "--route", "local", "--tool-choice", "none",
        *(["--think"] if think else []), "--home", str(real_phone), "why is the sky blue",
        env={"HEARTH_NO_MDNS": "1"},
    )  # fmt: skip
    term.expect("thinking…" if think else "…")
    assert term.finish() == 0, term.text()


def test_attach_reads_a_document_named_relative_to_where_the_command_runs(
    real_phone: Path, tmp_path: Path
) -> None:
    (tmp_path / "trip.md").write_text("# Trip\n\nThe flight leaves at nine.\n")
    asked = [str(BIN / "hearth"), "ask", "--json", "--route", "local", "--tool-choice", "none",
             "--home", str(real_phone), "when does the flight leave"]  # fmt: skip
    env = {**os.environ, "HEARTH_NO_MDNS": "1"}
    done = subprocess.run(
        [*asked, "--attach", "trip.md"], cwd=tmp_path, capture_output=True, text=True,
        timeout=180, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    documents = one_json(done.stdout)["documents"]
    assert [(d["name"], d["sent"]) for d in documents] == [("trip.md", False)]
    missing = subprocess.run(
        [*asked, "--attach", "nowhere.pdf"], cwd=tmp_path, capture_output=True, text=True,
        timeout=180, env=env,
    )  # fmt: skip
    assert missing.returncode == 9, missing.stdout + missing.stderr
    assert one_json(missing.stdout)["error"]["code"] == "invalid_input"
