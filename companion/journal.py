"""The execution journal: every step recorded before and after it runs (SQLite, WAL).

A plan id is accepted once, ever (replays are refused). After a crash the next start
finds accepted plans that did not finish: completed steps keep their results and are
not run again; a step caught mid-run is rerun only if its tool is idempotent.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hearth.protocol.wire.errors import ErrorCode, HearthError

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


@dataclass
class StepRecord:
    step_id: str
    tool: str
    state: str  # running | ok | error | refused
    result: Any
    error: str | None


def connect(path: Path) -> sqlite3.Connection:
    """A SQLite connection in WAL mode with full fsync, for a file that must survive kills."""
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    return db


class Journal:
    """Plans and steps, as executed on this phone."""

    def __init__(self, path: Path) -> None:
        self.db = connect(path)
        self.db.executescript(SCHEMA)

    def accept(self, plan_id: str, signer: str, request_id: str, body: str) -> None:
        """Record a plan as accepted; a plan id seen before is a replay."""
        try:
            self.db.execute(
                "INSERT INTO plans VALUES (?, ?, ?, ?, 'accepted', ?)",
                (plan_id, signer, request_id, time.time(), body),
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
            "INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, 'running', NULL, NULL, ?, NULL)",
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
    ) -> None:
        self.db.execute(
            "INSERT INTO steps VALUES (?, ?, ?, '{}', ?, ?, ?, ?, ?) "
            "ON CONFLICT(plan_id, step_id) DO UPDATE SET state=excluded.state, "
            "result=excluded.result, error=excluded.error, finished_at=excluded.finished_at",
            (plan_id, step_id, tool, state, json.dumps(result), error, time.time(), time.time()),
        )

    def close_plan(self, plan_id: str) -> None:
        self.db.execute("UPDATE plans SET state='finished' WHERE plan_id=?", (plan_id,))

    def steps(self, plan_id: str) -> dict[str, StepRecord]:
        rows = self.db.execute(
            "SELECT step_id, tool, state, result, error FROM steps WHERE plan_id=?", (plan_id,)
        )
        return {
            r[0]: StepRecord(r[0], r[1], r[2], json.loads(r[3]) if r[3] else None, r[4])
            for r in rows
        }

    def unfinished(self) -> list[tuple[str, str, str]]:
        """Accepted plans that did not finish: (plan id, signer, plan as JSON)."""
        rows = self.db.execute(
            "SELECT plan_id, signer, body FROM plans WHERE state='accepted' ORDER BY accepted_at"
        )
        return [(r[0], r[1], r[2]) for r in rows]
