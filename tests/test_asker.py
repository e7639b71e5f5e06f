"""The asker: a local route touches nothing of the link; the warm model is the one loaded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from hearth.companion.ask import ask
from hearth.companion.config import init_phone
from hearth.companion.confirm import Scripted
from hearth.companion.events import AskRequest
from hearth.companion.service import Service
from hearth.companion.settings import set_setting

from .nodes import BIN
from .phone_kit import Recorded


@pytest.mark.timeout(300)
def test_a_local_route_loads_no_libp2p_and_reads_no_roster(tmp_path: Path, tiny_models) -> None:
    """`hearth ask --route local` on a paired phone whose roster could not even be read:
    it answers, and the process never imported libp2p or the node link."""
    home = tmp_path / "phone"
    init_phone(home, tiny_models[1])
    set_setting(home, "limits.max_tokens", "8")
    (home / "roster.signed").mkdir()  # paired, as far as a look at the file goes; unreadable
    asked = subprocess.run(
        [sys.executable, "-X", "importtime", str(BIN / "hearth"), "ask", "hello", "--route",
         "local", "--tool-choice", "none", "--json", "--home", str(home)],
        capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert asked.returncode == 0, asked.stderr[-2000:]
    out = json.loads(asked.stdout.strip().splitlines()[-1])
    assert (
        out["route"] == "local" and out["reason"] == "local route requested" and out["node"] is None
    )
    imported = [line.split("|")[-1].strip() for line in asked.stderr.splitlines() if "|" in line]
    assert imported and not [m for m in imported if m.startswith("libp2p")]
    assert "hearth.companion.link" not in imported and "hearth.companion.remote" not in imported


@pytest.mark.timeout(300)
def test_the_warm_model_answers_after_its_file_moves_until_it_reloads(
    tmp_path: Path, tiny_models
) -> None:
    """A resident companion keeps the model it loaded: the GGUF moved away (or replaced),
    the next ask still answers with it; a new process then says the file is gone."""
    model = tmp_path / "phone-model.gguf"
    model.write_bytes(tiny_models[1].read_bytes())
    home = tmp_path / "phone"
    init_phone(home, model)
    set_setting(home, "limits.max_tokens", "8")
    request = AskRequest(text="hello there", route="local", tool_choice="none")

    async def resident() -> str:
        async with Service.open(home, resident=True) as service:
            await service.local.runtime()  # warm
            model.rename(tmp_path / "moved.gguf")
            with trio.fail_after(120):
                result = await ask(service, request, Recorded(), Scripted(True), trio.Event())
            return result.route

    assert trio.run(resident) == "local"

    async def cold() -> None:
        async with Service.open(home) as service:
            await ask(service, request, Recorded(), Scripted(True), trio.Event())

    with pytest.raises(Exception, match="no model file"):
        trio.run(cold)


@pytest.mark.timeout(300)
def test_the_link_learns_the_home_models_context_from_its_health_answer(
    processes, tmp_path: Path, tiny_models
) -> None:
    """The budget the prompt builder cuts the tools to: the node's context, as its health
    answer announces it on every connect (one-shot and kept links alike)."""
    from hearth.companion.audit import AuditLog
    from hearth.companion.link import NodeLink

    from .nodes import pair, start_node

    node = start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))
    phone = tmp_path / "phone"
    init_phone(phone, tiny_models[1])
    pair(phone, node.invite())

    async def learn() -> int:
        async with NodeLink.running(phone, AuditLog(phone)) as link:
            assert link.model is None
            assert await link.ensure()
            assert link.model is not None
            return link.model.n_ctx

    assert trio.run(learn) > 0
