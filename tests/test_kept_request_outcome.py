"""A request kept for the home node ends as kept (`deferred`), even when the phone cannot
answer it meanwhile: it is never reported failed and then answered by the home later
(the chaos run's `failed: model_not_loaded` requests that the home answered after)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import trio

from hearth.companion.ask import ask
from hearth.companion.confirm import Scripted
from hearth.companion.events import AskRequest, discard
from hearth.companion.service import Service

from .nodes import pair_phone, start_node


@pytest.mark.timeout(240)
def test_a_kept_request_the_phone_cannot_answer_meanwhile_is_deferred_not_failed(
    processes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    node = start_node(processes, tmp_path / "node")
    phone = pair_phone(tmp_path / "phone", node.invite())  # no local model
    os.kill(node.proc.pid, signal.SIGKILL)
    node.proc.wait(timeout=30)

    async def main() -> None:
        async with Service.open(phone.home) as service:
            request = AskRequest(text="compare the prices and then book", confirm="no")
            with trio.fail_after(120):
                kept = await ask(service, request, discard, Scripted(False), trio.Event())
            assert kept.deferred and kept.route == "local", kept
            assert "kept for the home node" in kept.reason and "no local model" in kept.reason
            assert kept.answer and kept.plans == []
            [waiting] = service.inbox.view().waiting
            assert waiting.request_id == kept.request_id
            [turn] = service.conversations.detail(kept.conversation_id or "").turns
            assert (turn.request_id, turn.route, turn.error) == (kept.request_id, "local", None)

    trio.run(main)
