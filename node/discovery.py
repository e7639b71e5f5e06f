"""mDNS advertisement on the LAN (zeroconf), as DESIGN.md "Transport" says.

Nodes advertise `_hearth._udp.local.` with a TXT tag HMAC(swarm key, date) that
changes every day and no static identifier, so a device is not trackable across
networks; only swarm members can recognise the tag. Phones only browse.
"""

from __future__ import annotations

import secrets
import socket

import anyio

from hearth.protocol.transport.discovery import SERVICE_TYPE, day_tag, today


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
            day = today()
            info = ServiceInfo(
                SERVICE_TYPE,
                f"{secrets.token_hex(6)}.{SERVICE_TYPE}",
                addresses=[socket.inet_aton(a) for a in interfaces or []],
                port=port,
                properties={"tag": day_tag(swarm_key, day)},
            )
            await anyio.to_thread.run_sync(zc.register_service, info)
            while today() == day:
                await anyio.sleep(60)
            await anyio.to_thread.run_sync(zc.unregister_service, info)
            info = None
    finally:
        with anyio.CancelScope(shield=True):
            if info is not None:
                await anyio.to_thread.run_sync(zc.unregister_service, info)
            await anyio.to_thread.run_sync(zc.close)
