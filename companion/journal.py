"""The execution journal: every step recorded before and after it runs (SQLite, WAL).

A plan id is accepted once, ever (replays are refused). After a crash the next start
finds accepted plans that did not finish: completed steps keep their results and are
not run again; a step caught mid-run is rerun only if its tool is idempotent; a
plan past its expiry, or past its request's deadline and a grace (the phone's own
bound, whatever expiry the planner set), runs no more steps. Nothing leaves a plan open
but a crash (or a confirmation left unanswered): a plan a failure stopped is closed with
its steps journaled `error` or `skipped` (`Executor`).
Each plan keeps the session it ran in (the untrusted sources seen so far, where its
planner read private data, whether a friend planned it) and each result its labels, so
a resumed plan gets back exactly the labels and the taint it had. Rows from before
labels existed resume with the strictest labels.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .formats import migrate
from .labels import UNLABELLED, Labels

SCHEMA = """
CREATE TABLE IF NOT EXISTS plans (
    plan_id TEXT PRIMARY KEY, signer TEXT NOT NULL, request_id TEXT NOT NULL,
    accepted_at REAL NOT NULL, state TEXT NOT NULL, body TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS steps (
    plan_id TEXT NOT NULL, step_id TEXT NOT NULL, tool TEXT NOT NULL, args TEXT NOT NULL,
    state TEXT NOT NULL, result TEXT, error TEXT, started_at REAL, finished_at REAL,
    PRIMARY KEY (plan_id, step_id)
);
"""


UNKNOWN_READS = "a plan journaled before its private reads were kept"


class SessionRecord(BaseModel):
    """The session a plan ran in, as far as its labels and its lifetime go."""

    model_config = ConfigDict(frozen=True)

    tainted_by: frozenset[str] = UNLABELLED.untrusted
    read_private: frozenset[str] = frozenset({UNKNOWN_READS})
    friend: bool = True
    lifetime_s: float | None = None
    """How long after its acceptance it may run: its request's deadline and a grace,
    whatever expiry it says (None: journaled before the phone bounded it; its expiry)."""


@dataclass
class StepRecord:
    step_id: str
    tool: str
    state: str  # running | ok | error | timed_out | refused | skipped
    result: Any
    error: str | None
    labels: Labels


def connect(path: Path, timeout: float = 5.0) -> sqlite3.Connection:
    """A SQLite connection in WAL mode with full fsync, for a file that must survive kills;
    a write waits up to `timeout` seconds for another connection's.

    The database and its WAL and shared-memory files are the owner's only (0600), also
    when they existed before with another mode (SQLite gives the WAL and SHM files the
    database's mode)."""
    if not path.exists():  # never open and close an fd of a database in use: that drops
        # every POSIX lock this process holds on it (SQLite's own warning), and corrupts it
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        if (path.parent / name).exists():
            (path.parent / name).chmod(0o600)
    db = sqlite3.connect(path, timeout, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db


class Journal:
    """Plans and steps, as executed on this phone."""

    def __init__(self, path: Path) -> None:
        self.db = connect(path)
        migrate(self.db, path, SCHEMA)  # the label columns came as steps (formats.py)

    def accept(
        self, plan_id: str, signer: str, request_id: str, body: str, session: SessionRecord
    ) -> None:
        """Record a plan as accepted; a plan id seen before is a replay."""
        try:
            self.db.execute(
                "INSERT INTO plans (plan_id, signer, request_id, accepted_at, state, body, "
                "session) VALUES (?, ?, ?, ?, 'accepted', ?, ?)",
                (plan_id, signer, request_id, time.time(), body, session.model_dump_json()),
            )
        except sqlite3.IntegrityError as exc:
            raise HearthError(
                ErrorCode.PLAN_REJECTED, f"plan {plan_id} was already accepted once (replay)"
            ) from exc

    def seen(self, plan_id: str) -> bool:
        return (
            self.db.execute("SELECT 1 FROM plans WHERE plan_id=?", (plan_id,)).fetchone()
            is not None
        )

    def started(self, plan_id: str, step_id: str, tool: str, args: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO steps (plan_id, step_id, tool, args, state, started_at) "
            "VALUES (?, ?, ?, ?, 'running', ?)",
            (plan_id, step_id, tool, json.dumps(args), time.time()),
        )

    def finished(
        self,
        plan_id: str,
        step_id: str,
        state: str,
        result: Any = None,
        error: str | None = None,
        tool: str = "",
        labels: Labels = UNLABELLED,
    ) -> None:
        now = time.time()
        self.db.execute(
            "INSERT INTO steps (plan_id, step_id, tool, args, state, result, error, started_at, "
            "finished_at, labels) VALUES (?, ?, ?, '{}', ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT(plan_id, step_id) DO UPDATE SET state=excluded.state, "
            "result=excluded.result, error=excluded.error, finished_at=excluded.finished_at, "
            "labels=excluded.labels",
            (
                plan_id,
                step_id,
                tool,
                state,
                json.dumps(result),
                error,
                now,
                now,
                labels.model_dump_json(),
            ),
        )

    def close_plan(self, plan_id: str) -> None:
        self.db.execute("UPDATE plans SET state='finished' WHERE plan_id=?", (plan_id,))

    def states(self, plan_id: str) -> dict[str, str]:
        """Each journaled step's state, by step id (its result not decoded)."""
        rows = self.db.execute("SELECT step_id, state FROM steps WHERE plan_id=?", (plan_id,))
        return {r[0]: r[1] for r in rows}

    def steps(self, plan_id: str) -> dict[str, StepRecord]:
        rows = self.db.execute(
            "SELECT step_id, tool, state, result, error, labels FROM steps WHERE plan_id=?",
            (plan_id,),
        )
        return {
            r[0]: StepRecord(
                r[0],
                r[1],
                r[2],
                json.loads(r[3]) if r[3] else None,
                r[4],
                Labels.model_validate_json(r[5]),
            )
            for r in rows
        }

    def unfinished(self) -> list[tuple[str, SessionRecord, str, float]]:
        """Accepted plans that did not finish: (plan id, its session, plan as JSON, when
        it was accepted)."""
        rows = self.db.execute(
            "SELECT plan_id, session, body, accepted_at FROM plans WHERE state='accepted' "
            "ORDER BY accepted_at"
        )
        return [(r[0], SessionRecord.model_validate_json(r[1]), r[2], r[3]) for r in rows]
