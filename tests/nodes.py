"""Names the tests use for real `hearth-node serve` processes and paired phones: the
starting, pairing and ready-file waiting are `hearth.companion.swarmkit`'s (shared with
bench/ and `hearth demo`); the protocol-level phone and the polling wait are the tests'."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hearth.companion.swarmkit import (
    BIN,
    RunningNode,
    init_phone,
    last_json,
    pair,
    pair_in_process,
    start_companion,
    start_node,
    wait_ready,
)
from hearth.companion.swarmkit import run as cli
from hearth.protocol.transport.host import HearthHost, host_for_home
from hearth.protocol.transport.keys import load_identity
from hearth.protocol.wire.identity import peer_id_of

__all__ = [
    "BIN",
    "Phone",
    "RunningNode",
    "cli",
    "init_phone",
    "last_json",
    "pair",
    "pair_phone",
    "paired_phone",
    "start_companion",
    "start_node",
    "wait_ready",
    "wait_until",
]

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], what: str, timeout: float = 30.0) -> T:
    """The first truthy value of `predicate()`, polled for at most `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Phone:
    """A paired phone, built on protocol/ alone."""

    home: Path

    @property
    def key(self) -> Ed25519PrivateKey:
        return load_identity(self.home)

    @property
    def peer_id(self) -> str:
        return peer_id_of(self.key)

    def host(self) -> HearthHost:
        return host_for_home(self.home).host


def paired_phone(processes: Any, root: Path, models: tuple[Path, Path]) -> Path:
    """A phone home at `root`/phone with the tiny Q4 model `models[1]` (text values capped:
    random weights), paired with a real node at `root`/node serving the tiny bf16."""
    node = start_node(processes, root / "node", "--model", str(models[0]))
    home = root / "phone"
    init_phone(home, models[1], noise=True)
    pair(home, node.invite())
    return home


def pair_phone(home: Path, uri: str, name: str = "phone") -> Phone:
    pair_in_process(home, uri, name)
    return Phone(home)
