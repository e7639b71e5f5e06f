"""mDNS advertisement of a real node, browsed from another process, inside a network
namespace the test creates (multicast stays off the host's own interfaces)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time

from hearth.node.discovery import SERVICE_TYPE, day_tag
from hearth.protocol.transport.keys import SwarmKeys

from .netns import linked_namespaces, requires_netns, sh
from .nodes import BIN, cli

BROWSE = """
import json, sys, time
from zeroconf import ServiceBrowser, Zeroconf
found = []
class Listener:
    def add_service(self, zc, type_, name):
        info = zc.get_service_info(type_, name, timeout=3000)
        if info:
            found.append({"name": name, "port": info.port,
                          "tag": info.properties.get(b"tag", b"").decode(),
                          "props": sorted(k.decode() for k in info.properties)})
    update_service = remove_service = lambda *a: None
zc = Zeroconf(interfaces=[sys.argv[1]])
ServiceBrowser(zc, sys.argv[2], Listener())
deadline = time.time() + 15
while not found and time.time() < deadline:
    time.sleep(0.1)
zc.close()
print(json.dumps(found))
"""


@requires_netns
def test_node_advertises_a_day_tag_and_nothing_static(tmp_path, processes) -> None:
    home = tmp_path / "node"
    cli("hearth-node", "init", "--home", str(home))
    with linked_namespaces(subnet=232) as link:
        sh("ip", "netns", "exec", link.a, "ip", "link", "set", link.dev_a, "multicast", "on")
        sh("ip", "netns", "exec", link.b, "ip", "link", "set", link.dev_b, "multicast", "on")
        node = processes.spawn(
            *link.exec_in(link.a),
            str(BIN / "hearth-node"),
            "serve",
            "--home",
            str(home),
            "--listen",
            f"/ip4/{link.addr_a}/tcp/4001",
            "--ready-file",
            str(home / "ready.json"),
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while not (home / "ready.json").exists():
            assert node.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        browse = subprocess.run(
            [*link.exec_in(link.b), sys.executable, "-c", BROWSE, link.addr_b, SERVICE_TYPE],
            capture_output=True,
            text=True,
            timeout=60,
        )
        found = json.loads(browse.stdout.strip().splitlines()[-1])
    assert len(found) == 1
    service = found[0]
    assert service["port"] == 4001
    today = dt.datetime.now(dt.UTC).date()
    assert service["tag"] == day_tag(SwarmKeys.load(home).current, today)
    assert service["props"] == ["tag"]  # no peer id, no name: nothing to track
    peer_id = json.loads((home / "ready.json").read_text())["peer_id"]
    assert peer_id not in service["name"]
