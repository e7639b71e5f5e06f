"""MCP servers mounted as phone tools: tiers from annotations, untrusted results."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import trio

from hearth.companion.executor import SessionState
from hearth.companion.tools.mcp import McpServer, mounted

from .nodes import BIN
from .phone_kit import make_executor, make_plan

ROOT = Path(__file__).resolve().parents[1]
SERVER = McpServer(
    name="demo",
    command=sys.executable,
    args=["-m", "tests.mcp_server"],
    env={"PYTHONPATH": str(ROOT)},
)


def test_hearth_tools_lists_mcp_tools_with_tiers_from_their_annotations(tmp_path) -> None:
    (tmp_path / "config.toml").write_text(
        f'[[mcp]]\nname = "demo"\ncommand = "{sys.executable}"\n'
        f'args = ["-m", "tests.mcp_server"]\nenv = {{ PYTHONPATH = "{ROOT}" }}\n'
    )
    out = subprocess.run(
        [str(BIN / "hearth"), "tools", "--json", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    tools = {t["name"]: t for t in json.loads(out.stdout)["tools"]}
    assert tools["demo.lookup"]["tier"] == "read-only"
    assert tools["demo.lookup"]["source"] == "mcp:demo"
    unannotated = tools["demo.post_message"]
    assert unannotated["tier"] == "irreversible"
    assert unannotated["annotations"]["destructiveHint"] is True
    assert unannotated["annotations"]["openWorldHint"] is True
    assert unannotated["control_args"] == ["to"]


def test_an_mcp_result_is_untrusted_and_cannot_choose_a_recipient(tmp_path) -> None:
    executor, asked, _ = make_executor(tmp_path, answer=True)  # --yes
    plan = make_plan(
        ("s1", "demo.lookup", {"city": "Oslo"}, []),
        ("s2", "demo.post_message", {"to": {"$ref": "s1.result.content.0"}, "text": "hi"}, ["s1"]),
        ("s3", "demo.post_message", {"to": "friend@example.org", "text": "hi"}, []),
    )

    async def go():
        async with mounted([SERVER], executor.registry):
            return await executor.execute(plan, SessionState())

    first, second, third = trio.run(go)
    assert first.status == "ok" and first.untrusted and first.source == "mcp:demo"
    assert second.status == "refused"  # --yes never covers a tainted control argument
    assert third.status == "refused"  # a planner literal after untrusted input is tainted too
    assert all("mcp:demo" in q.tainted["to"] for q in asked.asked)
