"""kill -9 of a real phone process between and inside steps: after a restart every
step has run exactly once, or (not idempotent, user says no) not again; nothing lost."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from .phone_kit import make_plan

ROOT = Path(__file__).resolve().parents[1]


def step_state(home: Path, step: str) -> str | None:
    if not (home / "journal.db").exists():
        return None
    try:
        db = sqlite3.connect(f"file:{home / 'journal.db'}?mode=ro", uri=True, timeout=1)
        row = db.execute("SELECT state FROM steps WHERE step_id=?", (step,)).fetchone()
        db.close()
    except sqlite3.OperationalError:
        return None
    return row[0] if row else None


def phone(processes, home: Path, *args: str) -> subprocess.Popen[str]:
    return processes.spawn(
        sys.executable, "-m", "tests.crash_phone", str(home), *args, cwd=str(ROOT)
    )


def kill_when(proc, home: Path, step: str, state: str) -> None:
    deadline = time.monotonic() + 60
    while step_state(home, step) != state:
        assert proc.poll() is None, "the phone process ended before the kill point"
        assert time.monotonic() < deadline, f"{step} never reached {state}"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def integrity(home: Path) -> None:
    for name in ("journal.db", "audit.db"):
        db = sqlite3.connect(home / name)
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",), name
        db.close()


def notes(home: Path) -> list[str]:
    return [n["text"] for n in json.loads((home / "data" / "notes.json").read_text())]


def test_killed_inside_and_between_steps_every_step_runs_exactly_once(tmp_path, processes) -> None:
    home = tmp_path / "phone"
    plan = make_plan(
        ("s1", "notes_create", {"text": "one"}, []),
        ("s2", "pause", {"seconds": 3}, []),
        ("s3", "notes_create", {"text": "three"}, []),
        ("s4", "message_send", {"to": "+49", "body": "done"}, []),
    )
    (tmp_path / "plan.json").write_text(plan.model_dump_json())
    first = phone(processes, home, "run", str(tmp_path / "plan.json"))
    kill_when(first, home, "s2", "running")  # s1 done, s2 mid-run, s3 and s4 not started
    integrity(home)
    assert notes(home) == ["one"]
    resumed = phone(processes, home, "resume", "yes")
    resumed.wait(timeout=120)
    assert json.loads(resumed.stdout.read().splitlines()[-1]) == [plan.plan_id]
    assert notes(home) == ["one", "three"]  # s1 not rerun, s3 ran once
    assert len(list((home / "data" / "outbox").iterdir())) == 1
    assert [step_state(home, s) for s in ("s1", "s2", "s3", "s4")] == ["ok"] * 4
    integrity(home)
    from hearth.companion.audit import AuditLog

    assert AuditLog(home).verify() == (True, "")


def test_a_non_idempotent_step_caught_mid_run_is_not_rerun_when_the_user_says_no(
    tmp_path, processes
) -> None:
    home = tmp_path / "phone"
    plan = make_plan(
        ("s1", "append_then_wait", {"line": "effect", "seconds": 30}, []),
        ("s2", "notes_search", {"query": ""}, []),
    )
    (tmp_path / "plan.json").write_text(plan.model_dump_json())
    first = phone(processes, home, "run", str(tmp_path / "plan.json"))
    kill_when(first, home, "s1", "running")
    deadline = time.monotonic() + 10
    while not (home / "effects.log").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    resumed = phone(processes, home, "resume", "no")
    resumed.wait(timeout=120)
    assert (home / "effects.log").read_text().splitlines() == ["effect"]  # not twice
    assert step_state(home, "s1") == "refused" and step_state(home, "s2") == "ok"
    integrity(home)


def test_opening_the_journal_again_keeps_the_locks_of_connections_in_use(tmp_path) -> None:
    from hearth.companion.journal import connect

    path = tmp_path / "journal.db"
    in_use = connect(path)
    in_use.execute("CREATE TABLE t (x)")
    in_use.execute("INSERT INTO t VALUES (1)")
    connect(path)  # another Phone of this process opens the journal too
    # another process comes and goes: it must see that this one still uses the journal
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys; db = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "db.execute('INSERT INTO t VALUES (2)'); db.close()",
            str(path),
        ],
        check=True,
        timeout=60,
    )
    assert (tmp_path / "journal.db-wal").exists()  # not checkpointed away under our feet
    in_use.execute("INSERT INTO t VALUES (3)")
    assert in_use.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert [r[0] for r in in_use.execute("SELECT x FROM t")] == [1, 2, 3]
