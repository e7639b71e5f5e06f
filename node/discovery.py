"""mDNS advertisement on the LAN (zeroconf), as DESIGN.md "Transport" says.

Nodes advertise `_hearth._udp.local.` with a TXT tag HMAC(swarm key, date) that
changes every day and no static identifier, so a device is not trackable across
networks; only swarm members can recognise the tag. Phones only browse.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
import socket

import anyio

SERVICE_TYPE = "_hearth._udp.local."


def day_tag(swarm_key: bytes, day: dt.date) -> str:
    """The tag members compute for `day`."""
    return hmac.new(
        swarm_key, f"hearth/mdns/v1\0{day.isoformat()}".encode(), hashlib.sha256
    ).hexdigest()[:32]


def _today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


async def advertise(swarm_key: bytes, port: int, addresses: list[str]) -> None:
    """Advertise until cancelled, re-registering with a new name and tag each day.

    zeroconf runs its own thread; its blocking calls go to worker threads here.
    """
    from zeroconf import IPVersion, ServiceInfo, Zeroconf

    interfaces = [a for a in addresses if a != "0.0.0.0"] or None
    zc = await anyio.to_thread.run_sync(
        lambda: Zeroconf(interfaces=interfaces or ["0.0.0.0"], ip_version=IPVersion.V4Only)
    )
    info = None
    try:
        while True:
            day = _today()
            info = ServiceInfo(
                SERVICE_TYPE,
                f"{secrets.token_hex(6)}.{SERVICE_TYPE}",
                addresses=[socket.inet_aton(a) for a in interfaces or []],
                port=port,
                properties={"tag": day_tag(swarm_key, day)},
            )
            await anyio.to_thread.run_sync(zc.register_service, info)
            while _today() == day:
                await anyio.sleep(60)
            await anyio.to_thread.run_sync(zc.unregister_service, info)
            info = None
    finally:
        with anyio.CancelScope(shield=True):
            if info is not None:
                await anyio.to_thread.run_sync(zc.unregister_service, info)
            await anyio.to_thread.run_sync(zc.close)
