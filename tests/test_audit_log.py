"""The audit log read beside a companion that appends to it."""

from __future__ import annotations

import contextlib
import gc
import os
import threading
from pathlib import Path

from hearth.companion.audit import AuditLog, AuditRecord
from hearth.companion.reports import audit_report


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


def test_an_audit_report_leaves_no_database_open(tmp_path: Path) -> None:
    """`hearth audit --verify` answered by a resident companion closes the connection it
    opened: the soak found its descriptors growing by three a report (a SQLite connection
    is in a reference cycle with its statement cache, so only the cyclic collector ever
    freed them, at its leisure)."""
    with contextlib.closing(AuditLog(tmp_path)) as log:
        log.append(AuditRecord("p1", "signer", "s1", "", "allow", "ok", "ok"))
        gc.disable()  # what the collector would free later is what the companion holds meanwhile
    try:
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(5):
            assert audit_report(tmp_path, verify=True).verified is True
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        gc.enable()
