"""A node listening on 0.0.0.0 tells others the addresses of its interfaces (in a
network namespace the test makes), not whatever its host name resolves to."""

from __future__ import annotations

from .netns import linked_namespaces, requires_netns
from .nodes import start_node


@requires_netns
def test_a_wildcard_listener_reports_its_interface_addresses(tmp_path, processes) -> None:
    home = tmp_path / "node"
    with linked_namespaces(subnet=237) as link:
        listen = ("/ip4/0.0.0.0/tcp/4001",)
        addrs = start_node(processes, home, prefix=link.exec_in(link.a), listen=listen).addrs
    assert addrs[0].startswith(f"/ip4/{link.addr_a}/tcp/4001/p2p/"), addrs
    assert all("0.0.0.0" not in a for a in addrs)
