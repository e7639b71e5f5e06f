"""A full disk (issue 33): the phone's home on a small tmpfs the test mounts (root only),
filled while the resident companion serves and at several depths of a plan: every answer
is an answer or a typed `invalid_input`/`busy`, the companion keeps serving, no database
is corrupt, every database opens once the disk is freed and the next ask works. The same
for the home node's home: filled, the node keeps serving plans."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
import trio

from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.wire.messages import PlanStep

from .chaos.run import free_port
from .hostile.script import Round, Script
from .nodes import (
    cli,
    init_phone,
    last_json,
    pair,
    start_companion,
    start_node,
    wait_ready,
    wait_until,
)

ROOT = Path(__file__).resolve().parents[1]
TYPED = {"invalid_input", "busy"}
SCRIPT = Script(
    rounds=[
        Round(
            steps=[
                PlanStep(id="s1", tool="notes_create", arguments={"text": "{request_id}:a"}),
                PlanStep(id="s2", tool="message_send", arguments={"to": "+49", "body": "hi"}),
            ]
        ),
        Round(steps=[PlanStep(id="s1", tool="notes_create", arguments={"text": "{request_id}:b"})]),
    ],
    answer="Done {request_id}.",
)
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount a small tmpfs")


@contextlib.contextmanager
def small_disk(at: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `at` (made), unmounted at the end."""
    at.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(at)],
                   check=True)  # fmt: skip
    try:
        yield at
    finally:
        subprocess.run(["umount", "-l", str(at)], check=False)


@contextlib.contextmanager
def filled(disk: Path, leave: int = 0) -> Iterator[None]:
    """`disk` with at most `leave` bytes free; freed after."""
    filler = disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as out:  # its close fails too
        while True:
            out.write(b"\0" * 4096)
            out.flush()
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    try:
        yield
    finally:
        filler.unlink()


def ask(phone: Path, text: str) -> dict:  # type: ignore[type-arg]
    out = cli("hearth", "ask", text, "--yes", "--json", "--route", "remote", "--home", str(phone),
              check=False)  # fmt: skip
    return last_json(out)


def answered(phone: Path, text: str) -> bool:
    return str(ask(phone, text).get("answer", "")).startswith("Done")


def databases_hold(home: Path) -> None:
    for db in sorted(home.glob("*.db")):
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",), db
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        con.close()


def scripted_home(processes, root: Path, node_home: Path, listen: str) -> subprocess.Popen[str]:  # type: ignore[no-untyped-def]
    """The scripted home of tests/hostile/ on the paired node's identity, at `listen`
    (it serves plans only: a roster sync with it fails, and is audited)."""
    (root / "script.json").write_text(SCRIPT.model_dump_json())
    ready = root / "hostile-ready.json"
    ready.unlink(missing_ok=True)
    hostile = processes.spawn(
        sys.executable, "-m", "tests.hostile.node", str(node_home), "--script",
        str(root / "script.json"), "--log", str(root / "heard.jsonl"), "--ready-file", str(ready),
        "--listen", listen, cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wait_ready(hostile, ready)
    return hostile


def paired_on_small_disk(
    processes, root: Path, disk: Path
) -> tuple[Path, subprocess.Popen[str], str]:  # type: ignore[no-untyped-def]
    """A phone home on `disk` paired with a home, which the scripted home then plays:
    the phone, the scripted home and where it listens."""
    node = start_node(processes, root / "node")
    phone = disk / "phone"
    init_phone(phone)
    pair(phone, node.invite())
    node.proc.terminate()
    node.proc.wait(timeout=30)
    listen = f"/ip4/127.0.0.1/tcp/{free_port()}"
    hostile = scripted_home(processes, root, node.home, listen)
    AddressBook(phone).remember(node.peer_id, [f"{listen}/p2p/{node.peer_id}"])
    return phone, hostile, listen


@pytest.mark.timeout(900)
def test_a_full_phone_home_answers_typed_errors_and_recovers(processes, tmp_path) -> None:
    with small_disk(tmp_path / "disk", "8m") as disk:
        phone, _, _ = paired_on_small_disk(processes, tmp_path, disk)
        companion = start_companion(processes, phone)
        wait_until(lambda: answered(phone, "note it and then text it"), "a first answer", 120)

        outcomes = []
        for leave in (0, 2048, 8192, 32768, 131072):  # full, and at depths of a plan
            with filled(disk, leave):
                answer = ask(phone, f"with {leave} bytes free: note it and then text it")
                status = last_json(cli("hearth", "status", "--json", "--home", str(phone),
                                       check=False))  # fmt: skip
            code = answer["error"]["code"] if "error" in answer else "answered"
            outcomes.append(code)
            assert code in TYPED | {"answered"}, answer
            assert "peer_id" in status or status["error"]["code"] in TYPED, status
            assert companion.proc.poll() is None, "the companion died of a full disk"
            databases_hold(phone)
        assert outcomes[0] in TYPED, outcomes  # nothing at all free: never an answer

        after = ask(phone, "the disk is free again: note it and then text it")
        assert after.get("answer", "").startswith("Done"), after
        assert last_json(cli("hearth", "audit", "--verify", "--json", "--home", str(phone)))[
            "verified"
        ]
        notes = json.loads((phone / "data" / "notes.json").read_text())
        assert len({n["id"] for n in notes}) == len(notes)  # nothing written twice
        companion.stop()
        databases_hold(phone)


@pytest.mark.timeout(900)
def test_a_full_node_home_keeps_the_node_serving(processes, tmp_path, tiny_models) -> None:
    with small_disk(tmp_path / "disk", "4m") as disk:
        node = start_node(processes, disk / "node", "--model", str(tiny_models[1]))
        phone = tmp_path / "phone"
        init_phone(phone)
        pair(phone, node.invite())
        with filled(disk):
            full = ask(phone, "compare the weather and then summarize it")
            assert "answer" in full or full["error"]["code"] in TYPED | {"unreachable"}, full
            assert node.proc.poll() is None, "the node died of a full disk"
        databases_hold(disk / "node")
        after = ask(phone, "compare the weather and then summarize it")
        assert after.get("route") == "remote" and "error" not in after, after
        assert node.proc.poll() is None


def test_a_full_disk_inside_a_task_group_is_survived_by_the_link(tmp_path) -> None:
    """The link's background work (a re-sync runs its roster pull and address lookup in a
    task group) meeting a full disk: logged and tried again, never the companion's end.
    Before, a storage error inside a task group came out as an exception group, which
    the guard let through."""
    from hearth.companion.link import surviving_storage

    with small_disk(tmp_path / "disk", "1m") as disk:
        db = sqlite3.connect(disk / "audit.db")
        db.execute("CREATE TABLE records (body BLOB)")
        db.commit()

        async def sync() -> str:
            async def audit() -> None:
                with db:
                    db.execute("INSERT INTO records VALUES (?)", (os.urandom(65536),))

            async with anyio.create_task_group() as tg:
                tg.start_soon(audit)
                tg.start_soon(anyio.sleep, 0)
            return "synced"

        with filled(disk):
            assert trio.run(surviving_storage, sync, "failed") == "failed"
        assert trio.run(surviving_storage, sync, "failed") == "synced"  # freed: it works
        db.close()
