"""A silent link loss (no FIN, no RST) is noticed within the keepalive bound."""

from __future__ import annotations

import json
import sys
import time

import pytest

from hearth.protocol.transport.probe import lay_out_homes

from .netns import linked_namespaces, requires_netns
from .nodes import wait_ready


@requires_netns
@pytest.mark.timing
def test_silent_link_loss_is_noticed_within_the_keepalive_bound(tmp_path, processes) -> None:
    homes = lay_out_homes(tmp_path)
    with linked_namespaces() as link:
        probe = [sys.executable, "-m", "hearth.protocol.transport.probe"]
        server = processes.spawn(
            *link.exec_in(link.a),
            *probe,
            "serve",
            str(homes["node"]),
            "--listen",
            f"/ip4/{link.addr_a}/tcp/4001",
            "--ready-file",
            str(tmp_path / "ready.json"),
        )
        peer_id = wait_ready(server, tmp_path / "ready.json", 30)["peer_id"]
        watcher = processes.spawn(
            *link.exec_in(link.b),
            *probe,
            "watch",
            str(homes["phone"]),
            peer_id,
            f"/ip4/{link.addr_a}/tcp/4001",
            "--bound",
            "3",
        )
        assert json.loads(watcher.stdout.readline())["event"] == "watching"
        time.sleep(1.0)  # a few keepalive rounds on a healthy link first
        assert watcher.poll() is None, "a healthy link was declared dead"
        link.cut_silently()
        dead = json.loads(watcher.stdout.readline())
        assert dead["event"] == "dead"
        assert dead["quiet_s"] <= 3.0
        assert server.poll() is None  # the node never died: only the link did
