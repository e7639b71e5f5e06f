"""Format versions of what a home keeps (the phone's or the node's), and how an older one
is brought up to date.

Every SQLite database carries its version in `PRAGMA user_version`: the number of its
migration steps (a list per database, kept by the package that owns the database).
The home's other files (JSON, TOML, keys, the signed roster) share one version,
`version` in `format.json` at the home's root. Version 0 is a home made before versions
existed. Opening an older database migrates it in place, after a backup copy beside it
(`NAME.v<old>.bak`, 0600); a newer database or home is refused with `invalid_input`
naming both versions, never misread.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

from hearth.protocol.wire.errors import ErrorCode, HearthError

Migration = Callable[[sqlite3.Connection], None]
HOME_FORMAT = "format.json"


def add_column(table: str, column: str, declaration: str) -> Migration:
    """A step adding `column` (`declaration`: its type, constraints and default); a column
    already there (added by a build that had it before it became a step) is left."""

    def step(db: sqlite3.Connection) -> None:
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if column not in columns:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")

    return step


def stamped(db: sqlite3.Connection) -> None:
    """The first step of a database whose tables are as they were at version 0."""


def newer(what: Path, found: int, known: int) -> HearthError:
    return HearthError(
        ErrorCode.INVALID_INPUT,
        f"{what} is format version {found}, newer than this Hearth reads ({known}): "
        "upgrade Hearth, or restore the backup made before the upgrade",
    )


def migrate(db: sqlite3.Connection, path: Path, schema: str, steps: Sequence[Migration]) -> None:
    """Bring the database at `path` (open as `db`) to version `len(steps)`: `schema` (its
    version-0 tables, `CREATE … IF NOT EXISTS`) and then the steps it lacks, in one
    transaction with the new `user_version`, after a backup."""
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


def check_home(home: Path, kind: str, version: int, write: Callable[[Path, str], None]) -> None:
    """The home's file format (`kind`, say `hearth-phone-home`): stamped with `version`
    (by `write`, atomically) when older, as no file needs migrating up to it; refused when
    newer. A home that cannot be written is read as it is."""
    path = home / HOME_FORMAT
    try:
        found = json.loads(path.read_text()).get("version", 0)
    except FileNotFoundError:
        found = 0
    except (ValueError, AttributeError) as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, f"{path} is not a format file") from exc
    if not isinstance(found, int):
        raise HearthError(ErrorCode.INVALID_INPUT, f"{path}: version is not a number")
    if found > version:
        raise newer(home, found, version)
    if found < version and home.is_dir():
        with contextlib.suppress(OSError):
            write(path, json.dumps({"format": kind, "version": version}))
