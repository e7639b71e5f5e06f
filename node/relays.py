"""A home's reservations on its relay friends.

For every member holding the `relay` role the home keeps a reservation (made at
start, after roster changes, and again whenever the connection to the relay has
dropped or half its lifetime has passed). A relay's address comes from the
address book, or, for a relay that has dialled in, from its health answer. The
circuit addresses that result are handed to phones in the home's health answer;
a relay the home could not reserve on keeps the reason for `status`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import anyio

from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.transport.circuits import is_circuit
from hearth.protocol.transport.health import ask_health
from hearth.protocol.transport.host import HearthHost
from hearth.protocol.transport.membership import RosterHolder
from hearth.protocol.transport.relay import Relaying
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.roster import Role

log = logging.getLogger("hearth.relays")
CHECK_S = 2.0
RENEW_S = 1800.0  # relays grant an hour; renew at half of it


class Reservations:
    """The home's slots on relays, and why a relay has none."""

    def __init__(
        self, home: Path, host: HearthHost, roster: RosterHolder, relaying: Relaying
    ) -> None:
        self.home = home
        self.host = host
        self.roster = roster
        self.relaying = relaying
        self.circuits: dict[str, list[str]] = {}
        self.problems: dict[str, str] = {}
        self._renew_at: dict[str, float] = {}

    def relays(self) -> list[str]:
        """The relays this node should hold a slot on: all of them, if it is a home."""
        if Role.HOME not in self.roster.roles_of(self.host.peer_id):
            return []
        return [
            m.peer_id
            for m in self.roster.roster.members
            if m.peer_id != self.host.peer_id and Role.RELAY in self.roster.roles_of(m.peer_id)
        ]

    def addrs(self) -> list[str]:
        return [a for circuits in self.circuits.values() for a in circuits]

    async def run(self) -> None:
        while True:
            relays = self.relays()
            for gone in set(self.circuits) - set(relays):
                self.circuits.pop(gone)
            for gone in set(self.problems) - set(relays):
                self.problems.pop(gone)
            for relay in relays:
                held = relay in self.circuits and self.host.connected(relay)
                if not held or time.monotonic() >= self._renew_at.get(relay, 0.0):
                    await self._reserve(relay)
            await anyio.sleep(CHECK_S)

    async def _reserve(self, relay: str) -> None:
        book = AddressBook(self.home)
        addrs = [a for a in book.get(relay) if not is_circuit(a)]
        try:
            if not addrs and self.host.connected(relay):
                addrs = [a for a in (await ask_health(self.host, relay)).addrs if not is_circuit(a)]
                book.add(relay, addrs)
            if not addrs:
                raise HearthError(
                    ErrorCode.UNREACHABLE,
                    "relay reservation failed: no known address (the relay has not dialled in)",
                )
            fresh = relay not in self.circuits
            self.circuits[relay] = await self.relaying.reserve(relay, addrs)
            self._renew_at[relay] = time.monotonic() + RENEW_S
            self.problems.pop(relay, None)
            if fresh:
                log.info("reserved on relay %s", relay)
        except HearthError as exc:
            self.circuits.pop(relay, None)
            if self.problems.get(relay) != exc.message:
                log.warning("relay %s: %s", relay, exc.message)
            self.problems[relay] = exc.message
