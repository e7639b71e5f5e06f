"""The exit's FTS5 index: searches over one kept read-only connection on a worker thread,
seeing what `index add` commits later; real SQLite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

from hearth.search import index as index_module
from hearth.search.index import INDEX_FILE, FtsIndex


def notes(folder: Path, *words: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for word in words:
        (folder / f"{word}.md").write_text(f"# {word}\nabout {word} and sourdough\n")
    return folder


def test_searches_share_one_read_only_connection_and_see_later_additions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, every query opened a connection and ran the schema script (~0.2 ms of
    CPU a query on the exit, on each 2-hop search)."""
    writer = FtsIndex(tmp_path / INDEX_FILE)
    writer.add([notes(tmp_path / "a", "bread", "kettle")])
    opened: list[str] = []
    connect = sqlite3.connect

    def counted(database: str, *args: object, **kwargs: object) -> sqlite3.Connection:
        opened.append(str(database))
        return connect(database, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(index_module.sqlite3, "connect", counted)
    searched = FtsIndex(tmp_path / INDEX_FILE)

    async def main() -> list[list[str]]:
        found = [[r.url for r in await searched.search("sourdough", 10)] for _ in range(20)]
        writer.add([notes(tmp_path / "b", "garden")])  # as `hearth-node index add` does
        found.append([r.url for r in await searched.search("garden", 10)])
        async with trio.open_nursery() as nursery:  # at once: one query at a time on it
            for _ in range(8):
                nursery.start_soon(searched.search, "kettle", 10)
        return found

    found = trio.run(main)
    assert all(sorted(urls) == ["a/bread.md", "a/kettle.md"] for urls in found[:20])
    assert found[20] == ["b/garden.md"]
    reads = [name for name in opened if "mode=ro" in name]
    assert len(reads) == 1 and len(opened) == 2  # the kept reader, and the writer's add
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        searched._read_only().execute("DELETE FROM docs")


def test_a_search_before_anything_is_indexed_finds_nothing(tmp_path: Path) -> None:
    assert trio.run(FtsIndex(tmp_path / INDEX_FILE).search, "bread", 10) == []


class Passes(trio.abc.Instrument):
    """Scheduler passes: a hand-over to a worker thread and back takes at least two."""

    def __init__(self) -> None:
        self.count = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.count += 1


def test_a_quick_query_is_answered_without_a_worker_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small index answers well within `INLINE_S`: no hand-over to a worker thread and
    back (it cost more than the query on the exit of a 2-hop search). A query that
    outruns the budget is interrupted and answered on the worker thread, the same."""
    index = FtsIndex(tmp_path / INDEX_FILE)
    index.add([notes(tmp_path / "a", "bread", "kettle", "garden")])
    passes = Passes()

    async def main() -> tuple[list[str], int, list[str], int]:
        trio.lowlevel.add_instrument(passes)
        quick = [r.url for r in await index.search("sourdough", 10)]
        inline = passes.count
        monkeypatch.setattr(index_module, "INLINE_S", 0.0, raising=False)  # all outrun it
        monkeypatch.setattr(index_module, "PROGRESS_STEPS", 1, raising=False)
        before = passes.count
        moved = [r.url for r in await index.search("sourdough", 10)]
        return quick, inline, moved, passes.count - before

    quick, inline_passes, moved, moved_passes = trio.run(main)
    assert sorted(quick) == ["a/bread.md", "a/garden.md", "a/kettle.md"]
    assert inline_passes == 0
    assert sorted(moved) == sorted(quick) and moved_passes >= 2
