"""What leaves the phone, read from the frames it writes: private data only where the
owner's policy allows it."""

from __future__ import annotations

import pytest
import trio

from hearth.companion.ask import ask
from hearth.companion.confirm import Scripted
from hearth.companion.events import AskRequest
from hearth.companion.service import Service
from hearth.protocol.transport.streams import FrameStream

from .nodes import pair_phone, start_node

CARD = "BEGIN:VCARD\nVERSION:3.0\nFN:Alice Quartermain\nTEL:+49170555123\nEND:VCARD\n"


@pytest.mark.parametrize("private_to_home", [False, True])
def test_private_contact_details_leave_the_phone_only_when_policy_allows(
    processes, tmp_path, tiny_models, monkeypatch, private_to_home
) -> None:
    node = start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))
    home = tmp_path / "phone"
    pair_phone(home, node.invite())
    (home / "data").mkdir(parents=True)
    (home / "data" / "contacts.vcf").write_text(CARD)
    (home / "policy.toml").write_text(
        f'private_to_home = {str(private_to_home).lower()}\nnever_remote_tools = ["notes_search"]\n'
    )
    sent: list[bytes] = []
    original = FrameStream.write

    async def capture(self, data: bytes) -> None:
        sent.append(bytes(data))
        await original(self, data)

    monkeypatch.setattr(FrameStream, "write", capture)

    async def asked() -> dict:
        async with Service.open(home) as service:
            request = AskRequest(text="contacts alice", route="remote", tool_choice="required")
            result = await ask(service, request, nothing, Scripted(True), trio.Event())
        return result.model_dump(mode="json")

    async def nothing(_event: object) -> None:
        return None

    out = trio.run(asked)
    wire = b"".join(sent)
    assert b"contacts_search" in wire  # the candidate tool's schema went out
    assert b"notes_search" not in wire and b"message_send" not in wire  # nothing else did
    ran = [s for p in out["plans"] for s in p["steps"] if s["tool"] == "contacts_search"]
    assert ran and ran[0]["status"] == "ok"
    # the private tool's result went back as-is only where the policy allows it
    assert (b"private to this phone" in wire) is not private_to_home
    if not private_to_home:
        assert b"+49170555123" not in wire and b"Quartermain" not in wire
