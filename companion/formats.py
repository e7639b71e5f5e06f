"""Format versions of what a phone home keeps, and the migrations between them (the
mechanism, shared with the node: `hearth.protocol.kit.formats`).

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

import sqlite3
from pathlib import Path

from hearth.protocol.kit import formats
from hearth.protocol.kit.formats import HOME_FORMAT, Migration, add_column, stamped

from .labels import UNLABELLED

__all__ = ["HOME_FORMAT", "HOME_VERSION", "MIGRATIONS", "check_home", "migrate"]
HOME_VERSION = 1  # 1: format.json exists

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


def migrate(db: sqlite3.Connection, path: Path, schema: str) -> None:
    """Bring the phone's database at `path` (open as `db`) to the version this code
    writes: `schema` (its version-0 tables, `CREATE … IF NOT EXISTS`) and then its steps."""
    formats.migrate(db, path, schema, MIGRATIONS[path.name])


def check_home(home: Path) -> None:
    """The phone home's file format: stamped when older (no migration of files is needed
    up to version 1), refused when newer."""
    from .tools.storage import write_atomic

    formats.check_home(home, "hearth-phone-home", HOME_VERSION, write_atomic)
