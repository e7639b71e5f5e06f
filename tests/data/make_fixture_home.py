"""Make the fixture home in `tests/data/home-v0/` with the landed code, through its real
commands: `python -m tests.data.make_fixture_home OUT`.

A home node (`hearth-node init`/`serve`), a phone paired with it (`hearth init`,
`hearth pair -`), then the node replaced by the scripted home of `tests/hostile/` on
the same identity, so that the plans are known: a resident companion (`hearth serve`)
answers two remote asks in one conversation (notes, a message into the outbox, a
calendar event, a reminder); with the home away, a multi-step request is kept in the
inbox; a plan is killed (SIGKILL) between its steps, so the journal holds it mid-plan.
Every database is then filled: conversations, inbox, journal, audit, roster, address book.
Sockets, ready and lock files and logs are left out of the copy.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from hearth.companion.swarmkit import (
    Processes,
    init_phone,
    last_json,
    pair,
    run,
    start_companion,
    start_node,
    wait_ready,
)
from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.wire.messages import PlanStep

from ..hostile.script import Round, Script
from ..phone_kit import make_plan

ROOT = Path(__file__).resolve().parents[2]
LEFT_OUT = {"companion.sock", "companion.lock", "serve-ready.json", "ready.json", "inbox.lock"}


def _script(path: Path, *rounds: list[PlanStep]) -> None:
    path.write_text(
        Script(rounds=[Round(steps=s) for s in rounds], answer="Done.").model_dump_json()
    )


def _ask(home: Path, text: str, *extra: str) -> dict[str, object]:
    out = run("hearth", "ask", text, "--json", "--yes", "--home", str(home), *extra, check=False)
    return last_json(out)


def _journal_mid_plan(processes: Processes, home: Path, work: Path) -> None:
    """A plan killed while its second step runs: step 1 done, 2 running, 3 not begun."""
    plan = make_plan(
        ("s1", "notes_create", {"text": "written before the crash"}, []),
        ("s2", "pause", {"seconds": 60}, []),
        ("s3", "notes_create", {"text": "written on resume"}, []),
    )
    (work / "plan.json").write_text(plan.model_dump_json())
    proc = processes.spawn(
        sys.executable, "-m", "tests.crash_phone", str(home), "run", str(work / "plan.json"),
        cwd=str(ROOT),
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            db = sqlite3.connect(f"file:{home / 'journal.db'}?mode=ro", uri=True, timeout=1)
            row = db.execute(
                "SELECT state FROM steps WHERE plan_id=? AND step_id='s2'", (plan.plan_id,)
            ).fetchone()
            db.close()
        except sqlite3.OperationalError:
            row = None
        if row == ("running",):
            break
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError(f"the plan never reached its second step: {proc.communicate()}")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def make(out: Path, work: Path) -> None:
    with Processes() as processes:
        node = start_node(processes, work / "node")
        phone = work / "phone"
        init_phone(phone)
        pair(phone, node.invite())
        node.proc.terminate()
        node.proc.wait(timeout=30)
        script = work / "script.json"
        _script(
            script,
            [
                PlanStep(id="s1", tool="notes_create", arguments={"text": "milk", "title": "shop"}),
                PlanStep(id="s2", tool="message_send", arguments={"to": "+4912345", "body": "hi"}),
            ],
        )
        hostile = processes.spawn(
            sys.executable, "-m", "tests.hostile.node", str(node.home), "--script", str(script),
            "--log", str(work / "heard.jsonl"), "--ready-file", str(work / "hostile.json"),
            cwd=str(ROOT), stderr=subprocess.DEVNULL,
        )  # fmt: skip
        AddressBook(phone).remember(
            node.peer_id, wait_ready(hostile, work / "hostile.json")["addrs"]
        )
        companion = start_companion(processes, phone)
        first = _ask(phone, "write a note and then text Sam", "--route", "remote")
        assert first.get("answer") == "Done.", first
        _script(
            script,
            [
                PlanStep(
                    id="s1",
                    tool="calendar_create",
                    arguments={
                        "title": "dentist",
                        "start": "2026-12-24T09:00",
                        "end": "2026-12-24T10:00",
                    },
                ),
                PlanStep(
                    id="s2",
                    tool="reminder_create",
                    arguments={"text": "call", "at": "2026-12-24T08:00"},
                ),
            ],
        )
        second = _ask(phone, "book the dentist and then remind me", "--route", "remote",
                      "--conversation", str(first["conversation_id"]))  # fmt: skip
        assert second.get("answer") == "Done.", second
        hostile.kill()
        hostile.wait(timeout=10)
        kept = _ask(phone, "compare my notes and then summarise them")  # the home is away
        assert kept.get("error") or kept.get("deferred"), kept
        companion.stop()
        _journal_mid_plan(processes, phone, work)
        assert last_json(run("hearth", "audit", "--verify", "--json", "--home", str(phone)))[
            "verified"
        ]
    if out.exists():
        shutil.rmtree(out)
    for name, source in (("phone", phone), ("node", node.home)):
        shutil.copytree(
            source,
            out / name,
            ignore=lambda _dir, names: [n for n in names if n in LEFT_OUT or n == "logs"],
        )
    for db in out.rglob("*.db"):  # one self-contained file each: the WAL folded in
        con = sqlite3.connect(db)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("PRAGMA journal_mode=DELETE")
        con.close()
    for extra in out.rglob("*.db-*"):
        extra.unlink()
    (out / "effects.log").unlink(missing_ok=True)
    print(json.dumps({"made": str(out)}))


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        make(Path(sys.argv[1]).resolve(), Path(tmp))
