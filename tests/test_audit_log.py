"""The audit log read beside a companion that appends to it."""

from __future__ import annotations

import threading
from pathlib import Path

from hearth.companion.audit import AuditLog, AuditRecord


def test_verify_beside_a_writer_never_reports_a_truncated_log(tmp_path: Path) -> None:
    """`hearth audit --verify` while the companion writes: the head and the records are
    one snapshot, so a record appended between reading them is no "truncated log"."""
    writer, reader = AuditLog(tmp_path), AuditLog(tmp_path)
    done = threading.Event()

    def append() -> None:
        try:
            for i in range(1500):
                writer.append(AuditRecord(f"p{i}", "signer", "s1", "", "allow", "ok", "ok"))
        finally:
            done.set()

    thread = threading.Thread(target=append)
    thread.start()
    problems = []
    try:
        while not done.is_set():  # bounded by the writer's 1500 appends
            ok, problem = reader.verify()
            if not ok:
                problems.append(problem)
    finally:
        thread.join(timeout=120)
    assert reader.verify() == (True, "")
    assert problems == []
