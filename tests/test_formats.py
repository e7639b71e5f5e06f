"""Homes survive upgrades (issue 33): the fixture home made by the code of fd2a4b6
(`tests/data/home-v0`, every database at version 0) and the node home made by 610baa0
(`tests/data/node-home-v0`) opened by today's code, their contents checked; every
database then carries its format version, a backup (0600) of each one migrated; a newer
database or home is refused, naming the versions."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from hearth.companion.formats import HOME_FORMAT, HOME_VERSION, MIGRATIONS
from hearth.node.formats import NODE_HOME_VERSION
from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.search.index import INDEX_FILE, FtsIndex
from hearth.search.index import MIGRATIONS as INDEX_MIGRATIONS

from .nodes import cli, last_json, start_companion, start_node

FIXTURE = Path(__file__).parent / "data" / "home-v0"
KEPT = "compare my notes and then summarise them"


def fixture_copy(root: Path) -> tuple[Path, Path]:
    """The fixture's phone and node homes, copied (and made private, as git does not)."""
    shutil.copytree(FIXTURE, root / "home-v0")
    for path in (root / "home-v0").rglob("*"):
        path.chmod(0o700 if path.is_dir() else 0o600)
    (root / "home-v0").chmod(0o700)
    return root / "home-v0" / "phone", root / "home-v0" / "node"


def version(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


def ask_json(home: Path, *args: str) -> dict:
    return last_json(cli("hearth", *args, "--json", "--home", str(home), check=False))


def test_the_fixture_home_of_fd2a4b6_opens_with_its_contents_and_is_migrated(
    tmp_path, processes
) -> None:
    phone, node_home = fixture_copy(tmp_path)
    assert {db.name: version(db) for db in phone.glob("*.db")} == dict.fromkeys(MIGRATIONS, 0)

    [summary] = ask_json(phone, "conversations")["conversations"]
    turns = ask_json(phone, "conversations", summary["id"])["turns"]
    assert [(t["text"], t["answer"], t["state"]) for t in turns] == [
        ("write a note and then text Sam", "Done.", "answered"),
        ("book the dentist and then remind me", "Done.", "answered"),
    ]
    assert [s["tool"] for s in turns[0]["plans"][0]["steps"]] == ["notes_create", "message_send"]
    inbox = ask_json(phone, "inbox")
    assert [w["text"] for w in inbox["waiting"]] == [KEPT]
    assert ask_json(phone, "audit", "--verify")["verified"] is True

    # the home node's home, from the same commit, serves; the phone's roster names it
    node = start_node(processes, node_home)
    AddressBook(phone).remember(node.peer_id, node.addrs)
    [paired] = ask_json(phone, "status")["nodes"]
    assert paired["peer_id"] == node.peer_id and paired["reachable"] is True

    # the plan killed mid-run: resumed once by the companion; it expired long ago, so its
    # interrupted step and the one after it are skipped, the step done before stays done
    start_companion(processes, phone).stop()
    notes = json.loads((phone / "data" / "notes.json").read_text())
    assert [n["text"] for n in notes] == ["milk", "written before the crash"]
    journal = sqlite3.connect(phone / "journal.db")
    assert journal.execute("SELECT count(*) FROM plans WHERE state='accepted'").fetchone() == (0,)
    states = journal.execute(
        "SELECT step_id, state FROM steps WHERE plan_id="
        "(SELECT plan_id FROM plans ORDER BY accepted_at DESC LIMIT 1) ORDER BY step_id"
    ).fetchall()
    journal.close()
    assert states == [("s1", "ok"), ("s2", "skipped"), ("s3", "skipped")]

    for name, steps in MIGRATIONS.items():
        assert version(phone / name) == len(steps) > 0, name
        backup = phone / f"{name}.v0.bak"
        assert backup.stat().st_mode & 0o777 == 0o600
        assert version(backup) == 0
    assert json.loads((phone / HOME_FORMAT).read_text())["version"] == HOME_VERSION
    assert ask_json(phone, "audit", "--verify")["verified"] is True  # after all of it


@pytest.mark.parametrize("name", sorted(MIGRATIONS))
def test_a_database_newer_than_this_code_is_refused_naming_both_versions(tmp_path, name) -> None:
    phone, _ = fixture_copy(tmp_path)
    newer = len(MIGRATIONS[name]) + 1
    con = sqlite3.connect(phone / name)
    con.execute(f"PRAGMA user_version = {newer}")
    con.close()
    answer = ask_json(phone, "conversations")
    assert answer["error"]["code"] == "invalid_input"
    assert (
        f"format version {newer}, newer than this Hearth reads ({newer - 1})"
        in (answer["error"]["message"])
    )
    assert version(phone / name) == newer  # untouched


def test_a_home_newer_than_this_code_is_refused(tmp_path) -> None:
    phone, _ = fixture_copy(tmp_path)
    (phone / HOME_FORMAT).write_text(json.dumps({"version": HOME_VERSION + 1}))
    answer = ask_json(phone, "conversations")
    assert answer["error"]["code"] == "invalid_input"
    assert f"format version {HOME_VERSION + 1}" in answer["error"]["message"]


NODE_FIXTURE = Path(__file__).parent / "data" / "node-home-v0"


def node_fixture_copy(root: Path) -> Path:
    home = root / "node-home-v0"
    shutil.copytree(NODE_FIXTURE, home)
    for path in [home, *home.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    (home / "expected.json").unlink()
    return home


def test_the_node_home_of_610baa0_opens_with_its_contents_and_is_migrated(
    tmp_path, processes
) -> None:
    home = node_fixture_copy(tmp_path)
    expected = json.loads((NODE_FIXTURE / "expected.json").read_text())["roster"]
    assert version(home / INDEX_FILE) == 0 and not (home / HOME_FORMAT).exists()

    node = start_node(processes, home)
    assert node.peer_id == expected["founder"]
    shown = last_json(cli("hearth-node", "roster", "--json", "--home", str(home)))
    assert {(m["name"], tuple(m["roles"])) for m in shown["members"]} == {
        (m["name"], tuple(m["roles"])) for m in expected["members"]
    }
    status = last_json(cli("hearth-node", "status", "--json", "--home", str(home)))
    assert status["peer_id"] == expected["founder"]
    assert [r.url for r in FtsIndex(home / INDEX_FILE).query("sourdough", 5)] == ["docs/bread.md"]
    assert FtsIndex(home / INDEX_FILE).count() == 2
    node.proc.terminate()
    node.proc.wait(timeout=30)

    assert json.loads((home / HOME_FORMAT).read_text()) == {
        "format": "hearth-node-home",
        "version": NODE_HOME_VERSION,
    }
    assert (home / HOME_FORMAT).stat().st_mode & 0o777 == 0o600
    assert version(home / INDEX_FILE) == len(INDEX_MIGRATIONS)
    backup = home / f"{INDEX_FILE}.v0.bak"
    assert backup.stat().st_mode & 0o777 == 0o600 and version(backup) == 0


def test_a_node_home_or_index_newer_than_this_code_is_refused(tmp_path) -> None:
    home = node_fixture_copy(tmp_path)
    (home / HOME_FORMAT).write_text(json.dumps({"version": NODE_HOME_VERSION + 1}))
    answer = last_json(cli("hearth-node", "status", "--json", "--home", str(home), check=False))
    assert answer["error"]["code"] == "invalid_input"
    assert (
        f"format version {NODE_HOME_VERSION + 1}, newer than this Hearth reads"
        in (answer["error"]["message"])
    )

    newer = len(INDEX_MIGRATIONS) + 1
    con = sqlite3.connect(home / INDEX_FILE)
    con.execute(f"PRAGMA user_version = {newer}")
    con.close()
    with pytest.raises(HearthError) as refused:
        FtsIndex(home / INDEX_FILE).count()
    assert refused.value.code == ErrorCode.INVALID_INPUT
    assert f"format version {newer}" in str(refused.value)
    assert version(home / INDEX_FILE) == newer  # untouched
