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


def wait_ready(proc: subprocess.Popen[str], ready: Path, timeout: float = 60.0) -> dict:
    """What a starting process wrote to its ready file, once it is there; the process
    must stay up meanwhile."""
    deadline = time.monotonic() + timeout
    while not ready.exists():
        assert proc.poll() is None, f"{proc.args} exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"{proc.args} did not become ready"
        time.sleep(0.05)
    return json.loads(ready.read_text())


def wait_until(predicate, what: str, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    """The first truthy value of `predicate()`, polled for at most `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


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


def start_node(
    processes,
    home: Path,
    *extra: str,
    config: str = "",
    prefix: tuple[str, ...] = (),
    listen: tuple[str, ...] = ("/ip4/127.0.0.1/tcp/0",),
) -> RunningNode:
    """`hearth-node serve` for `home` (made if new), started under `prefix` (say, `ip
    netns exec NS`), listening on `listen` plus whatever `extra` adds."""
    if not (home / "identity.key").exists():
        cli("hearth-node", "init", "--home", str(home), "--name", "home")
    if config:
        (home / "config.toml").write_text(config)
    ready = home / "ready.json"
    ready.unlink(missing_ok=True)
    proc = processes.spawn(
        *prefix,
        str(BIN / "hearth-node"),
        "serve",
        "--home",
        str(home),
        *(arg for addr in listen for arg in ("--listen", addr)),
        "--no-mdns",
        "--ready-file",
        str(ready),
        *extra,
        stderr=subprocess.DEVNULL,
    )
    info = wait_ready(proc, ready)
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
