"""The resident companion's link to its home node: kept up, reconnected after the node
restarts, and roster and key changes made meanwhile adopted live."""

from __future__ import annotations

import json
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from hearth.companion.ask import ask
from hearth.companion.confirm import Scripted
from hearth.companion.events import AskRequest, discard
from hearth.companion.reports import node_status
from hearth.companion.service import Service
from hearth.companion.settings import set_setting
from hearth.protocol.transport.keys import SwarmKeys

from .nodes import cli, pair_phone, start_node

WAIT_S = 40.0  # for the link to notice a change (keepalive 3 s, dial 3 s, backoff <= 5 s)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def until(predicate: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(WAIT_S):
        while not predicate():
            await trio.sleep(0.1)
        return
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.timeout(240)
def test_the_link_adopts_a_revocation_live_and_reconnects_after_the_node_restarts(
    processes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    listen = (f"/ip4/127.0.0.1/tcp/{free_port()}",)  # the same address after the restart
    node = start_node(processes, tmp_path / "node", listen=listen)
    phone = pair_phone(tmp_path / "phone", node.invite())
    other = pair_phone(tmp_path / "other", node.invite())

    async def main() -> None:
        async with Service.open(phone.home, resident=True) as service:
            link = service.link
            assert link is not None
            await until(lambda: link.connected, "the first connection")
            version = link.roster.roster.version
            # a roster change while the phone is connected: pushed to it at once
            reply = await trio.to_thread.run_sync(
                lambda: json.loads(
                    cli(
                        "hearth-node", "revoke", other.peer_id, "--json", "--home", str(node.home)
                    ).stdout
                )
            )
            assert phone.peer_id in reply["pushed_to"]
            await until(lambda: link.keys.key_id == reply["key_id"], "the rotated key")
            assert link.roster.roster.version > version
            assert other.peer_id not in {m.peer_id for m in link.roster.roster.members}
            assert SwarmKeys.load(phone.home).key_id == reply["key_id"]  # kept on disk too

            os.kill(node.proc.pid, signal.SIGKILL)
            await trio.to_thread.run_sync(node.proc.wait)
            await until(lambda: not link.reachable, "the link to notice the node is gone")
            assert link.reason
            status = await node_status(service)
            assert status.nodes[0].reachable is False and status.nodes[0].reason

            await trio.to_thread.run_sync(lambda: start_node(processes, node.home, listen=listen))
            await until(lambda: link.connected, "the link to come back")
            assert link.latency_ms is not None
            status = await node_status(service)
            assert status.nodes[0].reachable is True

    trio.run(main)


@pytest.mark.timeout(300)
def test_a_request_kept_while_the_home_is_away_is_sent_when_the_link_comes_back(
    processes, tmp_path: Path, tiny_models, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    listen = (f"/ip4/127.0.0.1/tcp/{free_port()}",)
    model = ("--model", str(tiny_models[0]))
    node = start_node(processes, tmp_path / "node", *model, listen=listen)
    phone = pair_phone(tmp_path / "phone", node.invite())
    set_setting(phone.home, "model", str(tiny_models[1]))
    set_setting(phone.home, "limits.max_value_chars", "40")  # random weights: bound values

    async def main() -> None:
        async with Service.open(phone.home, resident=True) as service:
            link = service.link
            assert link is not None
            await until(lambda: link.connected, "the first connection")
            os.kill(node.proc.pid, signal.SIGKILL)
            await trio.to_thread.run_sync(node.proc.wait)
            await until(lambda: not link.reachable, "the link to notice the node is gone")
            request = AskRequest(text="compare the prices and then book", confirm="no")
            with trio.fail_after(120):
                local = await ask(service, request, discard, Scripted(False), trio.Event())
            assert local.route == "local" and local.deferred, local
            assert "kept for the home node" in local.reason
            [waiting] = service.inbox.view().waiting
            assert waiting.request_id == local.request_id

            await trio.to_thread.run_sync(
                lambda: start_node(processes, node.home, *model, listen=listen)
            )
            answered = lambda: service.inbox.view().answered  # noqa: E731
            await until(lambda: bool(answered()), "the kept request to be answered")
            [home] = answered()
            assert home.request_id == local.request_id and home.route == "remote"
            assert service.inbox.view().waiting == []
            turns = service.conversations.detail(local.conversation_id or "").turns
            assert [(t.request_id, t.route) for t in turns] == [
                (local.request_id, "local"),
                (local.request_id, "remote"),  # the home's answer joins the conversation
            ]

    trio.run(main)
