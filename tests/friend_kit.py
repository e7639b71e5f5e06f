"""A phone paired with a running home that has a friend joined and granted the planner
role (real `hearth-node` processes), for the tests of a friend planning with history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hearth.companion.swarmkit import RunningNode

from .nodes import Phone, cli, init_phone, pair, start_node
from .test_friend_planner import sync_roster
from .test_swarm import subprocess_join


def home_with_friend(
    processes: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[RunningNode, Path, str]:
    """The home (running, at `root`/home), the phone's home (`root`/phone, paired, its
    roster synced: it knows the friend plans for it) and the friend's peer id (its home
    at `root`/friend, joined, not running). mDNS is off: the phone dials what it knows."""
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    home = start_node(processes, root / "home")
    phone = root / "phone"
    init_phone(phone)
    pair(phone, home.invite())
    invite = home.invite("--role", "friend", "--grant", "relay")
    friend_id = str(json.loads(subprocess_join(root / "friend", invite))["peer_id"])
    cli("hearth-node", "roster", "grant", friend_id, "planner", "--json", "--home", str(home.home))
    sync_roster(Phone(phone), home)
    return home, phone, friend_id
