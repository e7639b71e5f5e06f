"""Consent belongs to the request that asked (issue 41): `hearth ask` in its own process,
Ctrl-C at a send's "Go ahead? [y/N]", refuses that step and closes its plan; the next,
unrelated `hearth ask --yes` (which used to resume the plan with its own confirmer and
send the refused message) sends nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest

from .conftest import Processes
from .hostile.harness import start_bench
from .hostile.script import Round, Script
from .nodes import BIN
from .terminal import on_terminal

SEND = {"id": "s1", "tool": "message_send", "arguments": {"to": "+15550199", "body": "hi"}}


@pytest.fixture
def bench(tmp_path):
    processes = Processes()
    try:
        yield start_bench(processes, tmp_path)
    finally:
        processes.cleanup()


def hearth(bench, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "hearth"), *args, "--home", str(bench.phone)],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "HEARTH_NO_MDNS": "1"},
    )


@pytest.mark.timeout(300)
def test_ctrl_c_at_a_confirmation_refuses_the_send_for_every_later_request(bench) -> None:
    bench.script.write_text(
        Script(rounds=[Round.model_validate({"steps": [SEND]})]).model_dump_json()
    )
    term = on_terminal(
        str(BIN / "hearth"), "ask", "--route", "remote", "--home", str(bench.phone),
        "text the number", env={"HEARTH_NO_MDNS": "1"},
    )  # fmt: skip
    term.expect("Go ahead?")
    os.kill(term.proc.pid, signal.SIGINT)
    assert term.finish() == 130, term.text()
    later = hearth(bench, "ask", "--route", "local", "--yes", "--json", "what time is it")
    assert "Traceback" not in later.stderr
    outbox = bench.phone / "data" / "outbox"
    assert not outbox.exists() or not list(outbox.iterdir())  # nothing was sent
    again = hearth(bench, "ask", "--route", "local", "--yes", "--json", "what time is it")
    assert not outbox.exists() or not list(outbox.iterdir())
    audit = hearth(bench, "audit", "--json")
    sends = [r for r in json.loads(audit.stdout)["records"] if r["step"] == "s1"]
    assert sends and all(r["outcome"] != "ok" for r in sends), sends
    assert any(r["outcome"] == "refused" for r in sends), sends  # refused, closed
    assert again.returncode in (0, 7), again.stderr  # answered, or no local model here
