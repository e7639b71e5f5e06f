"""mDNS on the LAN: the day-rotating tag nodes advertise, and the phone's browsing.

Nodes advertise `_hearth._udp.local.` with a TXT tag HMAC(swarm key, date): it changes
every day, carries no static identifier, and only members can recognise it. Answers
are hints: the phone dials them only after its address book failed, and remembers
the one that worked.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import time

SERVICE_TYPE = "_hearth._udp.local."


def day_tag(swarm_key: bytes, day: dt.date) -> str:
    """The tag members compute for `day`."""
    return hmac.new(
        swarm_key, f"hearth/mdns/v1\0{day.isoformat()}".encode(), hashlib.sha256
    ).hexdigest()[:32]


def today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def browse(keys: list[bytes], timeout: float = 2.0) -> list[tuple[str, int]]:
    """(ip, port) of nodes advertising today's or yesterday's tag of one of `keys`.
    Blocking (zeroconf runs its own thread): call it from a worker thread."""
    from zeroconf import IPVersion, ServiceBrowser, ServiceListener, Zeroconf

    day = today()
    tags = {day_tag(k, d) for k in keys for d in (day, day - dt.timedelta(days=1))}
    found: list[tuple[str, int]] = []

    class Listener(ServiceListener):
        def add_service(self, zc: Zeroconf, type_: str, name: str) -> None:
            info = zc.get_service_info(type_, name, timeout=1000)
            if info is None:
                return
            if ((info.properties or {}).get(b"tag") or b"").decode() in tags:
                found.extend((ip, info.port or 0) for ip in info.parsed_addresses())

        def update_service(self, zc: Zeroconf, type_: str, name: str) -> None:
            return None

        def remove_service(self, zc: Zeroconf, type_: str, name: str) -> None:
            return None

    zc = Zeroconf(ip_version=IPVersion.V4Only)
    try:
        ServiceBrowser(zc, SERVICE_TYPE, Listener())
        deadline = time.monotonic() + timeout
        while not found and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        zc.close()
    return found
