"""Helpers for tests that run real `hearth-node serve` processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from hearth.protocol.transport.host import HearthHost, host_for_home
from hearth.protocol.transport.keys import create_identity, load_identity
from hearth.protocol.transport.pairing import redeem, store_pairing
from hearth.protocol.wire.invite import parse_invite

BIN = Path(sys.executable).parent


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(BIN / args[0]), *args[1:]], capture_output=True, text=True, timeout=120
    )
    if check and result.returncode != 0:
        raise AssertionError(f"{args}: {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


@dataclass
class RunningNode:
    home: Path
    proc: subprocess.Popen[str]
    peer_id: str
    addrs: list[str]

    def invite(self, *args: str) -> str:
        return json.loads(
            cli("hearth-node", "invite", "--json", "--home", str(self.home), *args).stdout
        )["uri"]

    def status(self) -> dict:
        return json.loads(cli("hearth-node", "status", "--json", "--home", str(self.home)).stdout)


def start_node(processes, home: Path, *extra: str, config: str = "") -> RunningNode:
    if not (home / "identity.key").exists():
        cli("hearth-node", "init", "--home", str(home), "--name", "home")
    if config:
        (home / "config.toml").write_text(config)
    ready = home / "ready.json"
    ready.unlink(missing_ok=True)
    proc = processes.spawn(
        str(BIN / "hearth-node"),
        "serve",
        "--home",
        str(home),
        "--listen",
        "/ip4/127.0.0.1/tcp/0",
        "--no-mdns",
        "--ready-file",
        str(ready),
        *extra,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None, f"hearth-node serve exited with {proc.returncode}"
        assert time.monotonic() < deadline, "hearth-node serve did not become ready"
        time.sleep(0.05)
    info = json.loads(ready.read_text())
    return RunningNode(home, proc, info["peer_id"], info["addrs"])


@dataclass
class Phone:
    """A paired phone, built on protocol/ alone."""

    home: Path

    @property
    def key(self):
        return load_identity(self.home)

    @property
    def peer_id(self) -> str:
        from hearth.protocol.wire.identity import peer_id_of

        return peer_id_of(self.key)

    def host(self) -> HearthHost:
        return host_for_home(self.home).host


def pair_phone(home: Path, uri: str, name: str = "phone") -> Phone:
    key = create_identity(home)

    async def go():
        return await redeem(parse_invite(uri), key, name, "phone")

    result, _ = trio.run(go)
    store_pairing(home, result)
    return Phone(home)
