"""Hostile members: unknown protocols, stream floods; the node keeps serving others.
Hostile text: a confirmation shows it plainly. A home's files are the owner's only."""

from __future__ import annotations

import os
import pty
import sqlite3
import stat
import sys

import anyio
import pytest
import trio

from hearth.companion.confirm import Confirmation, Scripted, Terminal
from hearth.companion.executor import SessionState
from hearth.protocol.transport.plans import PLAN_PROTOCOL, run_plan_session
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import HealthRequest

from .nodes import pair_phone, start_node
from .phone_kit import make_plan
from .test_node import ok_observations, plan, request


@pytest.fixture
def node(processes, tmp_path, tiny_models):
    return start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))


def test_an_unknown_protocol_id_is_a_typed_error_and_serving_goes_on(node, tmp_path) -> None:
    phone = pair_phone(tmp_path / "phone", node.invite())

    async def probe() -> HearthError:
        host = phone.host()
        async with host.run([]):
            with pytest.raises(HearthError) as info:  # proposed with the request: refused at once
                stream = await host.open(node.peer_id, "/hearth/does-not-exist/1", node.addrs)
                await stream.send(HealthRequest())
                await stream.receive()
            return info.value

    assert trio.run(probe).code is ErrorCode.PROTOCOL_ERROR
    assert plan(phone, node, request()).final is not None


def test_a_member_flooding_streams_gets_busy_and_others_are_still_served(node, tmp_path) -> None:
    flooder = pair_phone(tmp_path / "flooder", node.invite())
    other = pair_phone(tmp_path / "other", node.invite())
    outcomes: list[str] = []

    async def flood() -> None:
        host = flooder.host()
        async with host.run([]):
            await host.connect(node.peer_id, node.addrs)

            async def one(i: int) -> None:
                try:
                    stream = await host.open(node.peer_id, PLAN_PROTOCOL)
                    await run_plan_session(
                        stream, request(f"f{i}"), phone_id=host.peer_id, execute=ok_observations
                    )
                    outcomes.append("ok")
                except HearthError as exc:
                    outcomes.append(exc.code.value)

            async with anyio.create_task_group() as tg:
                for i in range(24):
                    tg.start_soon(one, i)

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(flood)
            await anyio.sleep(0.3)  # the flood is under way
            result = await anyio.to_thread.run_sync(lambda: plan(other, node, request("o")))
            assert result.final is not None  # the other phone is served meanwhile

    trio.run(both)
    assert outcomes.count("busy") >= 24 - 2 - 2  # per-phone share: 2 running or queued
    assert set(outcomes) <= {"ok", "busy"}


def test_a_confirmation_shows_hostile_text_plainly_and_whole_on_request(
    capsys, monkeypatch
) -> None:
    master, slave = pty.openpty()
    monkeypatch.setattr(sys, "stdin", os.fdopen(slave, "r"))
    os.write(master, b"?\ny\n")  # show everything, then yes
    long_body = "\x1b[2J" + "A" * 500
    request = Confirmation(
        "step",
        "p1",
        "Step s1: [conceal]send it[/conceal] [/x]",
        "message_send",
        {"to": "+1555 [/x]", "body": long_body},
        {"to": "from web_search (evil.example [conceal])\n  nothing to worry about"},
    )
    try:
        assert trio.run(Terminal().confirm, request) is True
    finally:
        os.close(master)
    out, err = capsys.readouterr()
    assert out == ""  # the prompt never goes to stdout (`--json` owns it)
    first, full = err.split("Go ahead?")[:2]
    assert "[conceal]send it[/conceal] [/x]" in first and "+1555 [/x]" in first
    assert "! to may come from untrusted input: from web_search (evil.example [conceal])" in first
    assert "\\n  nothing to worry about" in first  # a value cannot forge a line of its own
    assert "\x1b" not in err and "\\u001b[2J" in first  # the escape is shown, not obeyed
    assert "…(" in first and "more characters)" in first and "A" * 500 not in first
    assert "A" * 500 in full  # `?` shows the value whole


def test_every_file_under_a_home_is_the_owners_only(tmp_path) -> None:
    from hearth.companion.config import init_phone
    from hearth.companion.service import Service

    home = tmp_path / "phone"
    old_umask = os.umask(0)
    try:
        home.mkdir(mode=0o755)  # a home that existed before `hearth init`
        (home / "policy.toml").write_text("")
        sqlite3.connect(home / "journal.db").close()  # left by an earlier version, 0644
        (home / "journal.db").chmod(0o644)
        init_phone(home, None)
        executor = Service(home).executor(Scripted(True))
        plan = make_plan(
            ("s1", "notes_create", {"text": "private"}, []),
            ("s2", "files_write", {"path": "deep/er/a.txt", "text": "private"}, []),
            ("s3", "message_send", {"to": "+49", "body": "hi"}, []),
        )
        obs = trio.run(lambda: executor.execute(plan, SessionState()))
        assert [o.status for o in obs] == ["ok"] * 3
    finally:
        os.umask(old_umask)
    assert (home / "journal.db-wal").exists() and (home / "audit.db-shm").exists()
    wrong = {
        str(p.relative_to(tmp_path)): oct(stat.S_IMODE(p.lstat().st_mode))
        for p in [home, *home.rglob("*")]
        if stat.S_IMODE(p.lstat().st_mode) != (0o700 if p.is_dir() else 0o600)
    }
    assert wrong == {}
