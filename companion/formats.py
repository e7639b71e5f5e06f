"""Format versions of what a phone home keeps, and the migrations between them.

Every SQLite database carries its version in `PRAGMA user_version`; the home's other
files (JSON, TOML, iCalendar, vCard, keys) share one version, `version` in
`format.json` at the home's root. Version 0 is a home made before versions existed
(up to commit fd2a4b6; `tests/data/home-v0` is one). Opening an older database or
home migrates it in place, after a backup copy beside it (`NAME.v<old>.bak`, 0600); a
newer one is refused with `invalid_input` naming both versions, never misread.

A database's version is the number of its migration steps: to change a schema,
append one step to its list in `MIGRATIONS`, e.g. a column for `conversations.db`:

    add_column("turns", "source", "TEXT NOT NULL DEFAULT 'cli'"),

Steps run in order, each once, in one transaction with the new `user_version`. An
`add_column` step finds a column already there (added by a build that had it before
it became a step) and leaves it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .labels import UNLABELLED

Migration = Callable[[sqlite3.Connection], None]
HOME_FORMAT = "format.json"
HOME_VERSION = 1  # 1: format.json exists


def add_column(table: str, column: str, declaration: str) -> Migration:
    """A step adding `column` (`declaration`: its type, constraints and default)."""

    def step(db: sqlite3.Connection) -> None:
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in columns:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

    return step


def stamped(db: sqlite3.Connection) -> None:
    """The first step of a database whose tables are as they were at version 0."""


MIGRATIONS: dict[str, list[Migration]] = {
    "journal.db": [
        add_column("plans", "session", "TEXT NOT NULL DEFAULT '{}'"),
        add_column("steps", "labels", f"TEXT NOT NULL DEFAULT '{UNLABELLED.model_dump_json()}'"),
    ],
    "conversations.db": [
        add_column("turns", "state", "TEXT NOT NULL DEFAULT 'answered'"),
        add_column("turns", "error", "TEXT"),
        # who started it: the user, or an app over the API (kept apart from the user's)
        add_column("conversations", "source", "TEXT NOT NULL DEFAULT 'user'"),
        add_column("turns", "labels", "TEXT"),  # NULL: kept before labels (the strictest)
    ],
    "inbox.db": [stamped],
    "audit.db": [stamped],
}


def newer(what: Path, found: int, known: int) -> HearthError:
    return HearthError(
        ErrorCode.INVALID_INPUT,
        f"{what} is format version {found}, newer than this Hearth reads ({known}): "
        "upgrade Hearth, or restore the backup made before the upgrade",
    )


def migrate(db: sqlite3.Connection, path: Path, schema: str) -> None:
    """Bring the database at `path` (open as `db`) to the version this code writes:
    `schema` (its version-0 tables, `CREATE … IF NOT EXISTS`) and then its steps."""
    steps = MIGRATIONS[path.name]
    found = db.execute("PRAGMA user_version").fetchone()[0]
    if found > len(steps):
        raise newer(path, found, len(steps))
    if found < len(steps) and db.execute("SELECT 1 FROM sqlite_master").fetchone():
        backup(db, path.with_name(f"{path.name}.v{found}.bak"))
    db.executescript(schema)
    if found == len(steps):
        return
    with db:
        db.execute("BEGIN IMMEDIATE")
        found = db.execute("PRAGMA user_version").fetchone()[0]  # another process may have
        for step in steps[found:]:
            step(db)
        db.execute(f"PRAGMA user_version = {max(found, len(steps))}")


def backup(db: sqlite3.Connection, to: Path) -> None:
    """A consistent copy of `db` at `to` (0600); an existing backup is kept as it is."""
    try:
        os.close(os.open(to, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        return
    copy = sqlite3.connect(to)
    try:
        db.backup(copy)
    finally:
        copy.close()


def check_home(home: Path) -> None:
    """The home's file format: stamped when older (no migration of files is needed up to
    version 1), refused when newer."""
    path = home / HOME_FORMAT
    try:
        found = json.loads(path.read_text()).get("version", 0)
    except FileNotFoundError:
        found = 0
    except (ValueError, AttributeError) as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, f"{path} is not a format file") from exc
    if not isinstance(found, int):
        raise HearthError(ErrorCode.INVALID_INPUT, f"{path}: version is not a number")
    if found > HOME_VERSION:
        raise newer(home, found, HOME_VERSION)
    if found < HOME_VERSION:
        from .tools.storage import write_atomic

        with contextlib.suppress(OSError):  # a read-only home is read as it is
            write_atomic(path, json.dumps({"format": "hearth-phone-home", "version": HOME_VERSION}))
