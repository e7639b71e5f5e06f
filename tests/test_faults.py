"""Faults an owner meets: a home on a read-only or full disk, a node restarting
under its phones, a member that sends slower than it should."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from hearth.protocol.transport.plans import PLAN_PROTOCOL
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.frames import encode

from .nodes import cli, pair_phone, start_node
from .test_companion import hearth
from .test_node import plan, request

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")


@contextmanager
def small_disk(path: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of `size` at `path` (made and removed by the test)."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@needs_root
def test_a_read_only_home_is_a_clear_error_and_loses_nothing(tmp_path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        phone, node = disk / "phone", disk / "node"
        assert hearth("init", "--json", "--home", str(phone))[0] == 0
        cli("hearth-node", "init", "--home", str(node))
        docs = tmp_path / "docs"
        docs.mkdir()
        (docs / "a.md").write_text("# a\nhello")
        before = sorted(p.name for p in phone.rglob("*"))
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        code, out = hearth("ask", "hello", "--route", "local", "--json", "--home", str(phone))
        assert code == 9 and out["error"]["code"] == "invalid_input"
        assert "read-only" in out["error"]["message"]
        result = cli(
            "hearth-node", "index", "add", str(docs), "--json", "--home", str(node), check=False
        )
        assert result.returncode == 9, result.stdout
        assert "cannot be written" in json.loads(result.stdout)["error"]["message"]
        assert sorted(p.name for p in phone.rglob("*")) == before  # nothing lost or half-made


@needs_root
def test_a_full_disk_is_a_clear_error(tmp_path) -> None:
    with small_disk(tmp_path / "disk", "256k") as disk:
        filler = disk / "filler"
        with filler.open("wb") as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        result = cli("hearth-node", "init", "--json", "--home", str(disk / "node"), check=False)
        assert result.returncode == 9, result.stdout + result.stderr
        assert "full disk" in json.loads(result.stdout)["error"]["message"]


def test_phones_reconnect_by_themselves_after_a_node_restart(
    processes, tmp_path, tiny_models
) -> None:
    import socket

    with socket.socket() as s:  # a port for the node to keep across the restart
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    listen = f"/ip4/127.0.0.1/tcp/{port}"
    home = tmp_path / "node"
    node = start_node(processes, home, "--model", str(tiny_models[0]), "--listen", listen)
    phone = tmp_path / "phone"
    assert hearth("init", "--json", "--home", str(phone))[0] == 0
    assert hearth("pair", "-", "--json", "--home", str(phone), stdin=node.invite() + "\n")[0] == 0
    assert hearth("ask", "hi", "--route", "remote", "--json", "--home", str(phone))[0] == 0
    node.proc.kill()
    node.proc.wait(timeout=30)
    code, out = hearth("ask", "hi", "--route", "remote", "--json", "--home", str(phone))
    assert code == 3 and out["error"]["code"] == "unreachable"  # down: said so, at once
    start_node(processes, home, "--model", str(tiny_models[0]), "--listen", listen)
    code, out = hearth("ask", "hi", "--route", "remote", "--json", "--home", str(phone))
    assert code == 0 and out["route"] == "remote", out  # back: no re-pairing, no restart


def test_slow_senders_are_cut_off_and_a_well_behaved_phone_is_served(
    processes, tmp_path, tiny_models
) -> None:
    node = start_node(
        processes, tmp_path / "node", "--model", str(tiny_models[0]),
        config="request_timeout_s = 1.5\nmax_sessions = 1\nmax_queue = 0\n",
    )  # fmt: skip
    slow = pair_phone(tmp_path / "slow", node.invite())
    good = pair_phone(tmp_path / "good", node.invite())
    frame = encode(request("slow1"))

    async def trickle() -> list[ErrorCode]:
        host = slow.host()
        codes: list[ErrorCode] = []
        async with host.run([]):

            async def one() -> None:
                stream = await host.open(node.peer_id, PLAN_PROTOCOL, node.addrs)
                try:
                    for byte in frame[:40]:  # a byte at a time, never a whole frame
                        await stream.write(bytes([byte]))
                        await trio.sleep(0.1)
                    await stream.receive()
                except HearthError as exc:
                    codes.append(exc.code)

            async with trio.open_nursery() as n:
                for _ in range(4):
                    n.start_soon(one)
        return codes

    assert trio.run(trickle) == [ErrorCode.TIMED_OUT] * 4  # each cut off with a typed error
    assert plan(good, node, request("good1")).final is not None  # the slot was never held
