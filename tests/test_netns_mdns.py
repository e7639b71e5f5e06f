"""mDNS advertisement of a real node, browsed from another process, inside a network
namespace the test creates (multicast stays off the host's own interfaces)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

from hearth.protocol.transport.discovery import SERVICE_TYPE, day_tag
from hearth.protocol.transport.keys import SwarmKeys

from .netns import linked_namespaces, requires_netns, sh
from .nodes import BIN, start_node

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
    with linked_namespaces(subnet=232) as link:
        sh("ip", "netns", "exec", link.a, "ip", "link", "set", link.dev_a, "multicast", "on")
        sh("ip", "netns", "exec", link.b, "ip", "link", "set", link.dev_b, "multicast", "on")
        listen = (f"/ip4/{link.addr_a}/tcp/4001",)
        node = start_node(processes, home, prefix=link.exec_in(link.a), listen=listen, mdns=True)
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
    assert node.peer_id not in service["name"]


@requires_netns
def test_a_phone_finds_its_node_on_mdns_when_the_address_book_is_stale(
    tmp_path, processes, tiny_models
) -> None:
    import os

    from hearth.protocol.transport.addressbook import AddressBook

    home, phone = tmp_path / "node", tmp_path / "phone"
    env = {k: v for k, v in os.environ.items() if k != "HEARTH_NO_MDNS"}
    with linked_namespaces(subnet=234) as link:
        for ns, dev in ((link.a, link.dev_a), (link.b, link.dev_b)):
            sh("ip", "netns", "exec", ns, "ip", "link", "set", dev, "multicast", "on")
        node = start_node(
            processes, home, "--model", str(tiny_models[0]), prefix=link.exec_in(link.a),
            listen=(f"/ip4/{link.addr_a}/tcp/4001",), mdns=True,
        )  # fmt: skip
        run = [*link.exec_in(link.b), str(BIN / "hearth")]
        subprocess.run(
            [*run, "init", "--home", str(phone)],
            check=True,
            capture_output=True,
            env=env,
            timeout=60,
        )
        subprocess.run(
            [*run, "pair", "-", "--home", str(phone)],
            check=True,
            input=node.invite() + "\n",
            text=True,
            capture_output=True,
            env=env,
            timeout=60,
        )
        node_id = node.peer_id
        book = AddressBook(phone)
        book.entries[node_id] = []  # only a stale address is left
        book.remember(node_id, [f"/ip4/{link.addr_a}/tcp/4999/p2p/{node_id}"])
        asked = subprocess.run(
            [*run, "ask", "hello", "--route", "remote", "--json", "--home", str(phone)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    out = json.loads(asked.stdout.strip().splitlines()[-1])
    assert asked.returncode == 0 and out["route"] == "remote", out  # found through mDNS
    assert AddressBook(phone).get(node_id)[0].endswith(f"/tcp/4001/p2p/{node_id}")
