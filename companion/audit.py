"""The audit log: append-only, hash-chained records; the chain head under an HMAC.

Each record's hash covers the previous hash and its own fields. The head (count and
last hash) is kept with an HMAC under a phone-local key, in the same transaction as
the record, so `hearth audit --verify` detects an edited, inserted, removed or
truncated record: forging a head needs the key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hearth.protocol.transport.keys import read_secret, write_secret

from .formats import migrate
from .journal import connect

SCHEMA = """
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY, time REAL, plan_id TEXT, signer TEXT, step TEXT, args_hash TEXT,
    decision TEXT, reason TEXT, outcome TEXT, prev TEXT, hash TEXT
);
CREATE TABLE IF NOT EXISTS audit_head (id INTEGER PRIMARY KEY CHECK (id = 1), count INTEGER,
    hash TEXT, mac TEXT);
"""
GENESIS = "0" * 64
KEY_FILE = "audit.key"


@dataclass
class AuditRecord:
    plan_id: str
    signer: str
    step: str
    args_hash: str
    decision: str  # run | refused | confirmed | declined | resumed
    reason: str
    outcome: str  # ok | error | refused | skipped


def args_hash(arguments: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(arguments, sort_keys=True).encode()).hexdigest()


def _record_hash(prev: str, seq: int, when: float, record: AuditRecord) -> str:
    body = json.dumps({"seq": seq, "time": when, **asdict(record)}, sort_keys=True)
    return hashlib.sha256(prev.encode() + b"\0" + body.encode()).hexdigest()


class AuditLog:
    """The tamper-evident log of every decision the executor made."""

    def __init__(self, home: Path) -> None:
        key_path = home / KEY_FILE
        if not key_path.exists():
            write_secret(key_path, secrets.token_bytes(32))
        self._key = read_secret(key_path)
        self.db = connect(home / "audit.db")
        try:
            migrate(self.db, home / "audit.db", SCHEMA)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        """Close the database: a connection is in a reference cycle with its statement
        cache, so one merely dropped stays open until the cyclic collector runs."""
        self.db.close()

    def _mac(self, count: int, head: str) -> str:
        return hmac.new(self._key, f"{count}:{head}".encode(), hashlib.sha256).hexdigest()

    def append(self, record: AuditRecord) -> int:
        with self.db:  # one transaction: the record and the new head, or neither
            self.db.execute("BEGIN IMMEDIATE")
            row = self.db.execute("SELECT count, hash FROM audit_head WHERE id=1").fetchone()
            count, prev = row if row else (0, GENESIS)
            seq, when = count + 1, time.time()
            digest = _record_hash(prev, seq, when, record)
            self.db.execute(
                "INSERT INTO audit VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    seq,
                    when,
                    record.plan_id,
                    record.signer,
                    record.step,
                    record.args_hash,
                    record.decision,
                    record.reason,
                    record.outcome,
                    prev,
                    digest,
                ),
            )
            self.db.execute(
                "INSERT OR REPLACE INTO audit_head VALUES (1, ?, ?, ?)",
                (seq, digest, self._mac(seq, digest)),
            )
        return seq

    def records(self) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT seq, time, plan_id, signer, step, args_hash, decision, reason, outcome "
            "FROM audit ORDER BY seq"
        )
        names = (
            "seq",
            "time",
            "plan_id",
            "signer",
            "step",
            "args_hash",
            "decision",
            "reason",
            "outcome",
        )
        return [dict(zip(names, r, strict=True)) for r in rows]

    def verify(self) -> tuple[bool, str]:
        """(True, "") when the chain and its head are intact; else (False, what broke).
        The head and the records are read in one snapshot: a companion appending beside
        this check is not a truncated log."""
        self.db.execute("BEGIN")
        try:
            return self._verify()
        finally:
            self.db.execute("COMMIT")

    def _verify(self) -> tuple[bool, str]:
        row = self.db.execute("SELECT count, hash, mac FROM audit_head WHERE id=1").fetchone()
        count, head, mac = row if row else (0, GENESIS, self._mac(0, GENESIS))
        if not hmac.compare_digest(mac, self._mac(count, head)):
            return False, "the chain head does not match its HMAC (edited head)"
        prev, seen = GENESIS, 0
        for r in self.db.execute("SELECT * FROM audit ORDER BY seq"):
            seq, when, *fields, stored_prev, digest = r
            seen += 1
            if seq != seen or stored_prev != prev:
                return False, f"record {seq}: the chain is broken (removed or inserted record)"
            if _record_hash(prev, seq, when, AuditRecord(*fields)) != digest:
                return False, f"record {seq}: its content was edited"
            prev = digest
        if seen != count or prev != head:
            return False, f"{count} records expected, {seen} found (truncated log)"
        return True, ""
