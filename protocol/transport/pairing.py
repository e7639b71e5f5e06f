"""Redeeming a pairing invite: the phone's `hearth pair` and a friend's `hearth-node join`.

The redeemer dials the invite's pairing listener with the private-network key
derived from the token, sends the token, and receives the swarm key, the signed
roster, the founder (which it pins) and the node's main-listener addresses.
"""

from __future__ import annotations

import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.invite import Invite
from hearth.protocol.wire.messages import PairRequest, PairResult
from hearth.protocol.wire.roster import Roster, open_roster

from .addressbook import AddressBook
from .host import HearthHost
from .keys import SwarmKeys, pairing_key, read_secret
from .membership import FOUNDER_FILE, save_roster

PAIR_PROTOCOL = "/hearth/pair/1"


async def redeem(
    invite: Invite, identity: Ed25519PrivateKey, name: str, device: str, timeout: float = 10.0
) -> tuple[PairResult, Roster]:
    """Redeem `invite`; the roster comes back verified against the founder it names."""
    if invite.expired(time.time()):
        raise HearthError(ErrorCode.UNREACHABLE, "the invite has expired: ask for a new one")
    key = pairing_key(invite.token)
    host = HearthHost(identity, lambda: [key], lambda peer: peer == invite.node)
    async with host.run([]):
        try:
            await host.connect(invite.node, list(invite.addrs), timeout)
            stream = await host.open(invite.node, PAIR_PROTOCOL)
            await stream.send(PairRequest(token=invite.token, name=name, device=device))
            result = await stream.receive()
        except HearthError as exc:
            if exc.code is ErrorCode.UNREACHABLE:
                raise HearthError(
                    ErrorCode.UNREACHABLE,
                    f"{exc.message} (the invite may have expired, or the node is not running)",
                ) from exc
            if exc.code is ErrorCode.REFUSED:
                raise HearthError(
                    ErrorCode.REFUSED,
                    "the node did not accept this pairing token (wrong, already used or expired)",
                ) from exc
            raise
        finally:
            await host.disconnect(invite.node)
    if not isinstance(result, PairResult) or result.node != invite.node:
        raise HearthError(ErrorCode.PROTOCOL_ERROR, "unexpected answer to the pairing request")
    roster = open_roster(result.roster, result.founder)
    if roster.member(result.member) is None or roster.member(result.node) is None:
        raise HearthError(ErrorCode.PROTOCOL_ERROR, "the roster does not list this device")
    return result, roster


def store_pairing(home: Path, result: PairResult) -> None:
    """Keep what pairing handed over: swarm key, roster + pinned founder, addresses."""
    SwarmKeys(current=result.swarm_key).save(home)
    save_roster(home, result.roster, result.founder)
    AddressBook(home).remember(result.node, result.addrs)


def pair_home(
    home: Path, uri: str, identity: Ed25519PrivateKey, name: str, device: str
) -> tuple[PairResult, Roster]:
    """`hearth pair` and `hearth-node join`: redeem the URI (`-`: one line of stdin) and
    keep what it brings. A home belongs to one swarm: pairing again with the same
    founder (after a missed key rotation) is fine, with another one is refused, unless
    the home founded a swarm of its own that nobody has joined yet (a friend who ran
    `hearth-node init` first): that empty swarm is left for the invite's."""
    import sys

    import trio

    from hearth.protocol.wire.identity import peer_id_of
    from hearth.protocol.wire.invite import parse_invite

    from .membership import load_roster

    invite = parse_invite(sys.stdin.readline() if uri == "-" else uri)
    if (home / FOUNDER_FILE).exists():
        founder = read_secret(home / FOUNDER_FILE).decode().strip()
        own, _ = load_roster(home)
        alone = founder == peer_id_of(identity) and [m.peer_id for m in own.members] == [founder]
        if founder != invite.node and not alone:
            raise HearthError(
                ErrorCode.INVALID_INPUT,
                f"{home} already belongs to the swarm founded by {founder}: use another --home",
            )
    result, roster = trio.run(redeem, invite, identity, name, device)
    store_pairing(home, result)
    return result, roster
