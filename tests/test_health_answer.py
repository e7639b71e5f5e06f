"""A node's health answer is built from what it holds in memory: no package metadata
lookup (files opened, directories listed) per answer."""

from __future__ import annotations

import sys
from pathlib import Path

from hearth.node.config import NodeConfig
from hearth.node.daemon import Node
from hearth.protocol.transport.probe import lay_out_homes

FILE_EVENTS = {"open", "os.listdir", "os.scandir"}


def test_health_answers_touch_no_file(tmp_path: Path) -> None:
    node = Node(lay_out_homes(tmp_path)["node"], NodeConfig(), None)
    first = node.health()
    seen: list[str] = []
    counting = True

    def count(event: str, args: tuple[object, ...]) -> None:
        if counting and event in FILE_EVENTS:
            seen.append(event)

    sys.addaudithook(count)  # cannot be removed: it stops counting when the test ends
    try:
        answers = [node.health() for _ in range(20)]
    finally:
        counting = False
    assert seen == []
    assert {a.version for a in answers} == {first.version} and first.version
