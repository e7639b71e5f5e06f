"""Nothing lost, nothing twice (issue 33): a resident companion killed (SIGKILL) after a
tool's effect and before the journal records it runs nothing twice when restarted; the
request the kill cut off stays in its conversation (a restart that waits for an
in-process command instead of exiting `busy` is in test_serve.py).

The kill point is the one fault-injection hook (`companion/faults.py`): the companion
stops right after the write named, and the test kills it once the effect is on disk.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
from pathlib import Path

from hearth.companion.audit import AuditLog
from hearth.companion.faults import PAUSE_ENV
from hearth.protocol.wire.messages import PlanStep

from .hostile.harness import Bench, start_bench
from .hostile.script import Round, Script
from .nodes import BIN, cli, last_json, start_companion, wait_until


def _script(bench: Bench, *steps: PlanStep) -> None:
    bench.script.write_text(Script(rounds=[Round(steps=list(steps))]).model_dump_json())


def _ask(processes, home: Path, text: str) -> subprocess.Popen[str]:
    return processes.spawn(
        str(BIN / "hearth"), "ask", text, "--route", "remote", "--yes", "--json",
        "--home", str(home),
    )  # fmt: skip


def _killed_after(processes, monkeypatch, home: Path, point: str, done) -> subprocess.Popen[str]:
    """A companion that pauses at `point`, killed once `done()` holds; the cut-off ask."""
    monkeypatch.setenv(PAUSE_ENV, point)
    companion = start_companion(processes, home)
    monkeypatch.delenv(PAUSE_ENV)
    ask = _ask(processes, home, "write two notes and then text Sam")
    wait_until(done, f"the effect before {point}'s record", timeout=120)
    os.kill(companion.proc.pid, signal.SIGKILL)
    companion.proc.wait(timeout=10)
    ask.wait(timeout=60)
    return ask


def _notes(home: Path) -> list[dict]:
    path = home / "data" / "notes.json"
    return json.loads(path.read_text()) if path.exists() else []


def _steps(home: Path) -> list[dict]:
    conversations = last_json(cli("hearth", "conversations", "--json", "--home", str(home)))
    [summary] = conversations["conversations"]
    detail = cli("hearth", "conversations", summary["id"], "--json", "--home", str(home))
    return last_json(detail)["turns"]


def test_a_note_written_before_its_record_is_not_written_again_and_the_request_is_kept(
    tmp_path, processes, monkeypatch
) -> None:
    bench = start_bench(processes, tmp_path)
    _script(
        bench,
        PlanStep(id="s1", tool="notes_create", arguments={"text": "one"}),
        PlanStep(id="s2", tool="notes_create", arguments={"text": "two"}),
        PlanStep(id="s3", tool="message_send", arguments={"to": "+49", "body": "done"}),
    )
    home = bench.phone
    ask = _killed_after(
        processes, monkeypatch, home, "data/notes.json#2", lambda: len(_notes(home)) == 2
    )
    assert ask.returncode != 0  # the client saw the companion stop
    start_companion(processes, home)  # resumes the plan: s2 is rerun, s3 needs a person
    notes = _notes(home)
    assert [n["text"] for n in notes] == ["one", "two"]  # not twice
    assert len({n["id"] for n in notes}) == 2
    [turn] = _steps(home)
    assert turn["text"] == "write two notes and then text Sam"
    assert turn["state"] == "interrupted" and turn["error"]
    assert AuditLog(home).verify() == (True, "")


def test_an_sms_cut_off_by_a_kill_is_not_sent_again_without_asking(
    tmp_path, processes, monkeypatch
) -> None:
    bench = start_bench(processes, tmp_path)
    _script(bench, PlanStep(id="s1", tool="message_send", arguments={"to": "+49", "body": "hi"}))
    termux = tmp_path / "termux"  # Termux's SMS command, as a program that logs each send
    termux.mkdir()
    sent = tmp_path / "sent.log"
    sms = termux / "termux-sms-send"
    sms.write_text(f'#!/bin/sh\necho "$*" >> {sent}\nexec sleep 60\n')  # sent, not returned
    sms.chmod(0o755)
    monkeypatch.setenv("PATH", f"{termux}:{os.environ['PATH']}")
    home = bench.phone
    _killed_after(processes, monkeypatch, home, "-", sent.exists)  # while it sends
    bench.script.write_text(Script(rounds=[], answer="Nothing to do.").model_dump_json())
    # the next ask, in its own process, resumes the plan first: `--yes` does not cover it
    after = last_json(
        cli("hearth", "ask", "hello", "--route", "remote", "--yes", "--json",
            "--home", str(home), check=False)
    )  # fmt: skip
    assert sent.read_text().splitlines() == ["-n +49 hi"]  # not sent twice
    journal = sqlite3.connect(home / "journal.db")
    step = journal.execute("SELECT state, error FROM steps WHERE tool='message_send'").fetchone()
    journal.close()
    assert step == ("refused", "interrupted; not rerun")
    if "error" not in after:  # a loaded machine may time the ask itself out: the resume holds
        [warning] = [w for w in after["warnings"] if w["source"] == "journal"]
        assert warning["tool"] == "message_send" and "may or may not" in warning["message"]


def test_a_message_put_in_the_outbox_before_its_record_is_put_there_once(
    tmp_path, processes, monkeypatch
) -> None:
    bench = start_bench(processes, tmp_path)
    _script(bench, PlanStep(id="s1", tool="message_send", arguments={"to": "+49", "body": "hi"}))
    home = bench.phone
    outbox = home / "data" / "outbox"
    _killed_after(processes, monkeypatch, home, "outbox/*#1", outbox.exists)
    start_companion(processes, home)
    assert len(list(outbox.iterdir())) == 1
    assert AuditLog(home).verify() == (True, "")
