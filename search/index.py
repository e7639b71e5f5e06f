"""The local full-text index (SQLite FTS5, bm25 ranking, snippets), filled by
`hearth-node index add PATH…` from text, Markdown and HTML files."""

from __future__ import annotations

import contextlib
import html.parser
import re
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import anyio

from hearth.protocol.kit.formats import Migration, migrate, stamped
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .packets import Result

INDEX_FILE = "search.sqlite"
SUFFIXES = {".txt", ".md", ".markdown", ".html", ".htm"}
MAX_FILE_BYTES = 8 * 1024 * 1024
INLINE_S = 0.002  # how long a query may take in the calling thread (the event loop)
PROGRESS_STEPS = 200  # SQLite VM steps between checks of that budget
# the index's format version is the number of its steps (hearth.protocol.kit.formats)
MIGRATIONS: list[Migration] = [stamped]
_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (path TEXT PRIMARY KEY, title TEXT, mtime REAL);
CREATE VIRTUAL TABLE IF NOT EXISTS text USING fts5(path UNINDEXED, title, body,
    tokenize = 'porter unicode61');
"""


class _HtmlText(html.parser.HTMLParser):
    """The visible text and the <title> of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self._skip += tag in ("script", "style")
        self._in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        self._skip -= tag in ("script", "style") and self._skip > 0
        self._in_title = False

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data.strip()
        elif not self._skip:
            self.parts.append(data)


def extract(path: Path) -> tuple[str, str]:
    """(title, text) of one document."""
    raw = path.read_bytes()[:MAX_FILE_BYTES].decode("utf-8", errors="replace")
    if path.suffix.lower() in (".html", ".htm"):
        parser = _HtmlText()
        parser.feed(raw)
        text = re.sub(r"\s+", " ", " ".join(parser.parts)).strip()
        return parser.title or path.stem, text
    first = next((line for line in raw.splitlines() if line.strip()), path.stem)
    return first.lstrip("# ").strip()[:200], raw


def documents(paths: list[Path]) -> Iterator[tuple[Path, str]]:
    """Each document under `paths` and the name it is indexed (and found) under: its path
    from the folder given (`notes/bread.md` for `index add ~/notes`), never an absolute
    path, which would show every searcher how this node's disk is laid out."""
    for path in paths:
        root = path.resolve()
        if root.is_dir():
            for doc in sorted(root.rglob("*")):
                if doc.suffix.lower() in SUFFIXES:
                    yield doc, doc.relative_to(root.parent).as_posix()
        elif root.is_file():
            yield root, root.name
        else:
            raise HearthError(ErrorCode.INVALID_INPUT, f"no file or directory at {path}")


class FtsIndex:
    """The node's local index, at `<home>/search.sqlite`."""

    name = "index"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reader: sqlite3.Connection | None = None
        self._reading = anyio.CapacityLimiter(1)  # one query at a time on the kept reader

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """A connection for one use: committed (rolled back on an error), then closed
        (`sqlite3.Connection` as a context manager only commits)."""
        db = sqlite3.connect(self.path)
        try:
            with db:
                migrate(db, self.path, _SCHEMA, MIGRATIONS)
                yield db
        finally:
            db.close()

    def add(self, paths: list[Path]) -> int:
        """Index (or re-index) the documents under `paths`; returns how many."""
        count = 0
        with self._connect() as db:
            for path, key in documents(paths):
                title, body = extract(path)
                db.execute("DELETE FROM text WHERE path = ?", (key,))
                db.execute(
                    "INSERT INTO text (path, title, body) VALUES (?, ?, ?)", (key, title, body)
                )
                db.execute(
                    "INSERT OR REPLACE INTO docs VALUES (?, ?, ?)",
                    (key, title, path.stat().st_mtime),
                )
                count += 1
        return count

    def _read_only(self) -> sqlite3.Connection:
        """The kept read-only connection, opened on first use (the index created empty
        first if it is not there yet). Each query is its own read transaction, so it
        sees what `index add` committed since, from whatever process."""
        if self._reader is None:
            if not self.path.exists():
                with self._connect():
                    pass
            uri = f"{self.path.resolve().as_uri()}?mode=ro"
            self._reader = sqlite3.connect(uri, uri=True, check_same_thread=False)
        return self._reader

    def count(self) -> int:
        with self._connect() as db:
            return int(db.execute("SELECT count(*) FROM docs").fetchone()[0])

    def query(self, query: str, limit: int) -> list[Result]:
        """bm25-ranked matches with snippets; the query's words are matched as terms
        (FTS5 syntax in the query is quoted away, so no query is an error). Not to be
        called from two threads at once (`search` makes sure of it)."""
        terms = " ".join('"' + t.replace('"', '""') + '"' for t in query.split())
        if not terms:
            return []
        rows = (
            self._read_only()
            .execute(
                "SELECT path, title, snippet(text, 2, '', '', ' … ', 24) FROM text "
                "WHERE text MATCH ? ORDER BY bm25(text) LIMIT ?",
                (terms, max(1, min(limit, 50))),
            )
            .fetchall()
        )
        return [  # an index made before names were relative may hold absolute paths
            Result(title, Path(name).name if Path(name).is_absolute() else name, snippet, "index")
            for name, title, snippet in rows
        ]

    async def search(self, query: str, limit: int) -> list[Result]:
        """`query` over the kept read-only connection (not a connection opened and its
        schema checked per query): in the calling thread while it takes at most
        `INLINE_S` (a small index answers well within it, and within what handing it
        to a worker thread and back costs), else interrupted there and run again on a
        worker thread, so a long query never holds the event loop past that."""
        if not self._reading.borrowed_tokens:  # no query on a worker thread holds it now
            try:
                return self._query_within(query, limit, INLINE_S)
            except _Overran:
                pass
        return await anyio.to_thread.run_sync(self.query, query, limit, limiter=self._reading)

    def _query_within(self, query: str, limit: int, budget_s: float) -> list[Result]:
        db = self._read_only()
        deadline = time.perf_counter() + budget_s
        db.set_progress_handler(lambda: time.perf_counter() > deadline, PROGRESS_STEPS)
        try:
            return self.query(query, limit)
        except sqlite3.OperationalError as exc:
            if str(exc) == "interrupted":
                raise _Overran from exc
            raise
        finally:
            db.set_progress_handler(None, 0)


class _Overran(Exception):
    """A query took longer than its budget in the calling thread."""
