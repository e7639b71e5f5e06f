"""`/hearth/health/1`: ask a member for its capabilities, load, model and addresses."""

from __future__ import annotations

import trio

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Health, HealthRequest

from .host import HearthHost

HEALTH_PROTOCOL = "/hearth/health/1"


async def ask_health(
    host: HearthHost, peer_id: str, addrs: list[str] | None = None, timeout: float = 5.0
) -> Health:
    """One health exchange with `peer_id` (connecting first if needed)."""
    try:
        with trio.fail_after(timeout):
            stream = await host.open(peer_id, HEALTH_PROTOCOL, addrs)
            await stream.send(HealthRequest())
            health = await stream.receive()
            await stream.close()
    except trio.TooSlowError as exc:
        raise HearthError(ErrorCode.TIMED_OUT, f"{peer_id} did not answer health") from exc
    if not isinstance(health, Health):
        raise HearthError(ErrorCode.PROTOCOL_ERROR, f"{peer_id} answered health with {health}")
    return health
