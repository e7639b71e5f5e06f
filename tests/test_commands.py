"""The companion's core commands without a door: the dispatcher's in-process path and how
every door reports a command's failure (companion/commands.py)."""

from __future__ import annotations

import errno
import logging
import sqlite3
from pathlib import Path

import pytest
import trio

from hearth.companion.commands import AuditOp, error_event, failure, perform_here
from hearth.protocol.wire.errors import ErrorCode, HearthError


@pytest.mark.parametrize(
    ("exc", "code", "says"),
    [
        (HearthError(ErrorCode.BUSY, "try later", retry_after=2.0), ErrorCode.BUSY, "try later"),
        (OSError(errno.EROFS, "Read-only", "/home/h/x.db"), ErrorCode.INVALID_INPUT, "read-only"),
        (OSError(errno.ENOSPC, "No space", "/home/h/x"), ErrorCode.INVALID_INPUT, "full disk"),
        (OSError(errno.EACCES, "Denied"), ErrorCode.INVALID_INPUT, "not writable"),
        (
            sqlite3.OperationalError("attempt to write a readonly database"),
            ErrorCode.INVALID_INPUT,
            "cannot be written",
        ),
        (OSError(errno.ENOENT, "No such file"), ErrorCode.INTERNAL, "internal error (trace "),
        (sqlite3.OperationalError("no such table: x"), ErrorCode.INTERNAL, "internal error"),
        (ValueError("secret detail"), ErrorCode.INTERNAL, "internal error (trace "),
    ],
)
def test_a_commands_failure_is_reported_as_a_typed_error(
    exc: Exception, code: ErrorCode, says: str, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        raise exc
    except Exception as raised:
        with caplog.at_level(logging.ERROR, "hearth.companion.commands"):
            reported = failure(raised)
    assert reported.code is code and says in reported.message
    if isinstance(exc, HearthError):
        assert reported is exc  # its retry hint kept
    event = error_event(reported)
    assert (event.code, event.message) == (code.value, reported.message)
    if code is ErrorCode.INTERNAL:  # the cause is logged under the trace, never sent
        assert "secret detail" not in reported.message
        trace = reported.message.split("trace ")[1].rstrip(")")
        assert any(trace in r.getMessage() and r.exc_info for r in caplog.records)


def test_a_home_no_companion_serves_reports_a_damaged_audit_database(tmp_path: Path) -> None:
    """In-process, `audit --verify` still answers when the audit database is not one."""
    (tmp_path / "audit.db").write_bytes(b"not a database at all" * 100)
    report = trio.run(perform_here, tmp_path, AuditOp(verify=True))
    assert report.model_dump()["verified"] is False
    assert "unreadable" in report.model_dump()["problem"]
