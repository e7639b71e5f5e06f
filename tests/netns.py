"""Network namespaces made by the tests themselves, joined by veth pairs.

Only the addresses of these namespaces are ever used; everything is deleted at the end.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest


def skip_reason() -> str | None:
    """Why netns tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root for ip netns"
    if shutil.which("ip") is None:
        return "needs iproute2 (ip)"
    probe = f"hearth-probe-{secrets.token_hex(3)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.decode().strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


requires_netns = pytest.mark.skipif((reason := skip_reason()) is not None, reason=reason or "")


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)


@dataclass
class Link:
    """Two namespaces `a` and `b` joined by one veth pair, with addresses."""

    a: str
    b: str
    dev_a: str
    dev_b: str
    addr_a: str
    addr_b: str

    def exec_in(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    def cut_silently(self) -> None:
        """Take the link down on a's side: b's packets vanish, nobody sends a RST."""
        sh("ip", "netns", "exec", self.a, "ip", "link", "set", self.dev_a, "down")


@contextmanager
def linked_namespaces(subnet: int = 231) -> Iterator[Link]:
    tag = secrets.token_hex(3)
    link = Link(
        a=f"hearth-a-{tag}",
        b=f"hearth-b-{tag}",
        dev_a=f"ha{tag}",
        dev_b=f"hb{tag}",
        addr_a=f"10.{subnet}.0.1",
        addr_b=f"10.{subnet}.0.2",
    )
    with namespaces(link.a, link.b):
        veth((link.a, link.dev_a, link.addr_a), (link.b, link.dev_b, link.addr_b), prefix=30)
        yield link


@dataclass
class Chain:
    """Three namespaces in a row, phone — friend — home: the friend reaches both, and
    phone and home reach each other only while `route_through_friend` is in force."""

    phone: str
    friend: str
    home: str
    phone_addr: str  # on the phone-friend link
    friend_phone_side: str
    friend_home_side: str
    home_addr: str  # on the friend-home link

    def exec_in(self, ns: str) -> list[str]:
        return ["ip", "netns", "exec", ns]

    @contextmanager
    def route_through_friend(self) -> Iterator[None]:
        """A routed path phone ↔ home through the friend (as on a home LAN), removed after."""
        sh(*self.exec_in(self.friend), "sysctl", "-qw", "net.ipv4.ip_forward=1")
        routes = (
            (self.phone, self.home_addr, self.friend_phone_side),
            (self.home, self.phone_addr, self.friend_home_side),
        )
        for ns, dest, via in routes:
            sh(*self.exec_in(ns), "ip", "route", "add", f"{dest}/32", "via", via)
        try:
            yield
        finally:
            for ns, dest, _via in routes:
                subprocess.run([*self.exec_in(ns), "ip", "route", "del", f"{dest}/32"], timeout=30)
            sh(*self.exec_in(self.friend), "sysctl", "-qw", "net.ipv4.ip_forward=0")


@contextmanager
def chained_namespaces(subnet: int = 236) -> Iterator[Chain]:
    tag = secrets.token_hex(3)
    chain = Chain(
        phone=f"hearth-p-{tag}",
        friend=f"hearth-f-{tag}",
        home=f"hearth-h-{tag}",
        phone_addr=f"10.{subnet}.1.1",
        friend_phone_side=f"10.{subnet}.1.2",
        friend_home_side=f"10.{subnet}.2.1",
        home_addr=f"10.{subnet}.2.2",
    )
    links = (
        (chain.phone, chain.phone_addr, chain.friend, chain.friend_phone_side),
        (chain.friend, chain.friend_home_side, chain.home, chain.home_addr),
    )
    with namespaces(chain.phone, chain.friend, chain.home):
        sh("ip", "netns", "exec", chain.friend, "sysctl", "-qw", "net.ipv4.ip_forward=0")
        for i, (ns_a, addr_a, ns_b, addr_b) in enumerate(links):
            veth((ns_a, f"c{i}a{tag}", addr_a), (ns_b, f"c{i}b{tag}", addr_b), prefix=24)
        yield chain


@contextmanager
def namespaces(*names: str) -> Iterator[None]:
    """Network namespaces with loopback up, deleted (with their veths) at the end."""
    try:
        for ns in names:
            sh("ip", "netns", "add", ns)
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield
    finally:
        for ns in names:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)


def veth(a: tuple[str, str, str], b: tuple[str, str, str], prefix: int) -> None:
    """A veth pair between two namespaces: each end (namespace, device, address) up."""
    sh("ip", "link", "add", a[1], "netns", a[0], "type", "veth", "peer", "name", b[1],
       "netns", b[0])  # fmt: skip
    for ns, dev, addr in (a, b):
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{addr}/{prefix}", "dev", dev)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", dev, "up")
