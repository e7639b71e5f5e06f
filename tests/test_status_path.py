"""`hearth status` says how the home is reached: directly, or through a relay friend
(named as the roster names it). Real hosts on loopback: the home, a friend holding
`relay` with the home's slot reserved on it, and the phone's own `Service`."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from hearth.companion.reports import node_status
from hearth.companion.service import Service
from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.transport.membership import RosterHolder

from .test_relay_connect import relayed_home

pytestmark = pytest.mark.timeout(120)


def test_a_home_reached_through_a_relay_is_said_to_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    trio.run(through_relay, tmp_path)


async def through_relay(tmp_path: Path) -> None:
    async with relayed_home(tmp_path) as (homes, _relay, circuit):
        home_id = RosterHolder(homes["phone"]).roster.founder
        AddressBook(homes["phone"]).remember(home_id, [circuit])  # no direct address known
        async with Service.open(homes["phone"], resident=False) as service:
            status = await node_status(service)
    [home] = status.nodes
    assert home.reachable and home.relay == "relay", home
