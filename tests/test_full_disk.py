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

import pytest

from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.wire.messages import PlanStep

from .hostile.script import Round, Script
from .nodes import cli, init_phone, last_json, pair, start_companion, start_node, wait_ready

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


def databases_hold(home: Path) -> None:
    for db in sorted(home.glob("*.db")):
        con = sqlite3.connect(db)
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",), db
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
        con.close()


def scripted_home(processes, root: Path, node_home: Path) -> list[str]:  # type: ignore[no-untyped-def]
    """The scripted home of tests/hostile/ on the paired node's identity: its addresses."""
    (root / "script.json").write_text(SCRIPT.model_dump_json())
    ready = root / "hostile-ready.json"
    hostile = processes.spawn(
        sys.executable, "-m", "tests.hostile.node", str(node_home), "--script",
        str(root / "script.json"), "--log", str(root / "heard.jsonl"), "--ready-file", str(ready),
        cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    return [str(addr) for addr in wait_ready(hostile, ready)["addrs"]]


@pytest.mark.timeout(900)
def test_a_full_phone_home_answers_typed_errors_and_recovers(processes, tmp_path) -> None:
    with small_disk(tmp_path / "disk", "8m") as disk:
        node = start_node(processes, tmp_path / "node")
        phone = disk / "phone"
        init_phone(phone)
        pair(phone, node.invite())
        node.proc.terminate()
        node.proc.wait(timeout=30)
        addrs = scripted_home(processes, tmp_path, node.home)
        AddressBook(phone).remember(node.peer_id, addrs)
        companion = start_companion(processes, phone)
        assert ask(phone, "note it and then text it").get("answer", "").startswith("Done"), "warm"

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
