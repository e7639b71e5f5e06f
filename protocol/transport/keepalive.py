"""Keepalive: notice a dead peer within a bound, even when no packet says so.

Any inbound bytes count as life (the pnet layer stamps every read). When a peer
has been quiet for a third of the bound, a ping goes out on `/ipfs/ping/1.0.0`
(which every libp2p host answers); when it has been quiet for the bound (less a
small margin for scheduling jitter) it is declared dead and its connections are
closed, so every stream blocked on it fails at once instead of at TCP timeout.
"""

from __future__ import annotations

import contextlib
import os

import trio
from libp2p.custom_types import TProtocol
from libp2p.peer.id import ID

from .host import HearthHost

PING_PROTOCOL = TProtocol("/ipfs/ping/1.0.0")
DEFAULT_BOUND = 3.0
PING_SIZE = 32
_POLL = 0.1
MARGIN = 0.25  # declared dead this much before the bound, so scheduling jitter stays inside it


async def watch(host: HearthHost, peer_id: str, bound: float = DEFAULT_BOUND) -> float:
    """Return once `peer_id` is dead (quiet for `bound` s, or its connection is gone);
    its connections are closed by then. The result is how long it had been quiet."""
    interval = bound / 3
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pinger, host, peer_id, interval)
        while True:
            await trio.sleep(_POLL)
            quiet = host.quiet_for(peer_id)
            if quiet is None or quiet >= bound - MARGIN or not host.connected(peer_id):
                nursery.cancel_scope.cancel()
                break
    await host.disconnect(peer_id)
    return quiet if quiet is not None else bound


async def _pinger(host: HearthHost, peer_id: str, interval: float) -> None:
    stream = None
    try:
        stream = await host.host.new_stream(ID.from_base58(peer_id), [PING_PROTOCOL])
        while True:
            quiet = host.quiet_for(peer_id) or 0.0
            if quiet >= interval:
                payload = os.urandom(PING_SIZE)
                await stream.write(payload)
                with trio.move_on_after(interval):
                    received = 0
                    while received < PING_SIZE:
                        chunk = await stream.read(PING_SIZE - received)
                        if not chunk:
                            return
                        received += len(chunk)
            await trio.sleep(max(_POLL, interval - (host.quiet_for(peer_id) or 0.0)))
    except Exception:
        return  # the stream or connection broke: the watcher's bound decides
    finally:
        if stream is not None:
            with (
                trio.CancelScope(shield=True),
                trio.move_on_after(0.5),
                contextlib.suppress(Exception),
            ):
                await stream.reset()
