"""Roster sync on `/hearth/roster/1`, both ends.

A member pulls on connect (`RosterPull` with the version it holds); the founder
answers with the newer signed roster, and with the current swarm key (so a member
that was offline during a revocation catches up while the previous key is still
accepted). The founder pushes the same after every change. A roster that is older,
unsigned or signed by anyone but the pinned founder is refused (`refused`) and
changes nothing.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import RosterPull, RosterUpdate, SwarmKeyRotation

from .keys import SwarmKeys
from .membership import RosterHolder
from .streams import FrameStream

log = logging.getLogger("hearth.roster")
ROSTER_PROTOCOL = "/hearth/roster/1"


def rotation_frame(keys: SwarmKeys, roster_version: int) -> SwarmKeyRotation:
    return SwarmKeyRotation(
        key=keys.current,
        key_id=keys.key_id,
        previous_valid_until=keys.previous_valid_until,
        roster_version=roster_version,
    )


async def send_state(stream: FrameStream, roster: RosterHolder, keys: SwarmKeys) -> None:
    """What a member needs: the signed roster and the current swarm key."""
    await stream.send(RosterUpdate(roster=roster.signed))
    await stream.send(rotation_frame(keys, roster.roster.version))


def adopt(
    home: Path,
    roster: RosterHolder,
    keys: SwarmKeys,
    update: RosterUpdate,
    rotation: SwarmKeyRotation | None,
) -> bool:
    """Take a received roster (if newer) and swarm key (if newer); True if anything changed.
    A stale roster is ignored; a forged one raises `refused`."""
    changed = False
    try:
        roster.update(update.roster)
        changed = True
        log.info("roster now at version %d", roster.roster.version)
    except HearthError as exc:
        if "stale" not in exc.message:
            raise
    if rotation is not None and rotation.key_id > keys.key_id:
        keys.rotate(
            rotation.key,
            now=time.time(),
            grace=max(0.0, rotation.previous_valid_until - time.time()),
            key_id=rotation.key_id,
        )
        keys.save(home)
        changed = True
        log.info("swarm key rotated to key %d", rotation.key_id)
    return changed


async def pull(stream: FrameStream, home: Path, roster: RosterHolder, keys: SwarmKeys) -> bool:
    """Ask the founder for the newest roster and key; adopt them."""
    await stream.send(RosterPull(have=roster.roster.version))
    update = await stream.receive()
    if not isinstance(update, RosterUpdate):
        raise HearthError(ErrorCode.PROTOCOL_ERROR, "expected a roster")
    rotation = await stream.receive()
    if not isinstance(rotation, SwarmKeyRotation):
        raise HearthError(ErrorCode.PROTOCOL_ERROR, "expected the swarm key")
    return adopt(home, roster, keys, update, rotation)
