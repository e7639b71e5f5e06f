"""A node listening on 0.0.0.0 tells others the addresses of its interfaces (in a
network namespace the test makes), not whatever its host name resolves to."""

from __future__ import annotations

import subprocess

from .netns import linked_namespaces, requires_netns
from .nodes import BIN, cli, wait_ready


@requires_netns
def test_a_wildcard_listener_reports_its_interface_addresses(tmp_path, processes) -> None:
    home = tmp_path / "node"
    cli("hearth-node", "init", "--home", str(home))
    with linked_namespaces(subnet=237) as link:
        ready = home / "ready.json"
        node = processes.spawn(
            *link.exec_in(link.a), str(BIN / "hearth-node"), "serve", "--home", str(home),
            "--listen", "/ip4/0.0.0.0/tcp/4001", "--no-mdns", "--ready-file", str(ready),
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        addrs = wait_ready(node, ready)["addrs"]
    assert addrs[0].startswith(f"/ip4/{link.addr_a}/tcp/4001/p2p/"), addrs
    assert all("0.0.0.0" not in a for a in addrs)
