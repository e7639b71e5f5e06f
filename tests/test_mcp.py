"""MCP servers mounted as phone tools: strict by default, relaxed only by the owner,
never by the server's word about itself; results untrusted; names never shadow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from hearth.companion.executor import SessionState
from hearth.companion.tools.mcp import McpServer, ToolRules, mounted, servers_of
from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.messages import UntrustedInput

from .nodes import BIN
from .phone_kit import make_executor, make_plan

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.timeout(120)


def demo(tmp_path: Path, **rules: ToolRules) -> McpServer:
    (tmp_path / "mcp").mkdir(exist_ok=True)
    return McpServer(
        name="demo",
        command=sys.executable,
        args=["-m", "tests.mcp_server"],
        env={"PYTHONPATH": str(ROOT), "HEARTH_TEST_MCP_DIR": str(tmp_path / "mcp")},
        tools=rules,
    )


def effects(tmp_path: Path) -> list[str]:
    log = tmp_path / "mcp" / "effects.log"
    return log.read_text().splitlines() if log.exists() else []


def run(executor, servers, logs, *plans):  # type: ignore[no-untyped-def]
    """Mount `servers` on the executor's registry and execute `plans` in one session."""
    session = SessionState()

    async def go():
        async with mounted(servers, executor.registry, logs) as warned:
            return [await executor.execute(p, session) for p in plans], warned

    return trio.run(go)


@pytest.fixture
def phone(tmp_path):  # type: ignore[no-untyped-def]
    """A phone answering like --yes (True) or --no (False): executor, recorder, logs."""

    def make(answer: bool | None):  # type: ignore[no-untyped-def]
        executor, asked, _ = make_executor(tmp_path / "phone", answer=answer)
        return executor, asked, tmp_path / "phone" / "logs"

    return make


def test_hearth_tools_lists_mcp_tools_strict_unless_the_owner_relaxes_them(tmp_path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[[mcp]]\nname = "demo"\ncommand = "{sys.executable}"\n'
        f'args = ["-m", "tests.mcp_server"]\nenv = {{ PYTHONPATH = "{ROOT}" }}\n'
        '[mcp.tools.lookup]\ntier = "read-only"\ncontrol_args = []\n'
    )
    out = subprocess.run(
        [str(BIN / "hearth"), "tools", "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    payload = json.loads(out.stdout)
    tools = {t["name"]: t for t in payload["tools"]}
    assert tools["demo.lookup"]["tier"] == "read-only"  # the owner said so
    assert tools["demo.lookup"]["source"] == "mcp:demo"
    assert tools["demo.lookup"]["control_args"] == []
    unannotated = tools["demo.post_message"]
    assert unannotated["tier"] == "irreversible"
    assert unannotated["annotations"]["destructiveHint"] is True
    assert unannotated["annotations"]["openWorldHint"] is True
    assert unannotated["control_args"] == ["text", "to"]  # every argument, not names
    # annotations only tighten: a server calling its tool read-only changes nothing
    assert tools["demo.tidy"]["tier"] == "irreversible"
    assert tools["demo.payout"]["control_args"] == ["destination", "euros"]
    assert tools["demo.git_status"]["control_args"] == ["repo_path"]
    # the schema is closed: no undeclared argument can slip past the control list
    assert tools["demo.payout"]["schema"]["additionalProperties"] is False
    # named like a built-in: refused, said so, the rest mounted
    assert "demo.files_read" not in tools and "files_read" in tools
    assert payload["warnings"][0] == {
        "source": "mcp:demo",
        "tool": "demo.files_read",
        "code": "invalid_input",
        "message": "tool 'demo.files_read' refused: named like the built-in tool 'files_read'",
    }
    # a name that could not travel in a request is refused here, not mid-request
    long_name = "demo.a_name_far_too_long_to_travel_" + "x" * 40
    assert long_name not in tools
    assert payload["warnings"][1]["tool"] == long_name
    assert payload["warnings"][1]["message"].endswith("not a valid tool name or schema")
    assert len(payload["warnings"]) == 2


def test_a_server_annotation_may_tighten_the_owners_tier_but_never_relax_it() -> None:
    from mcp.types import ToolAnnotations

    from hearth.companion.tools.mcp import claimed_tier, strictest
    from hearth.companion.tools.registry import Tier

    owner_says = Tier.READ_ONLY
    destructive = claimed_tier(ToolAnnotations(destructiveHint=True))
    assert strictest(owner_says, destructive) is Tier.IRREVERSIBLE
    assert strictest(Tier.IRREVERSIBLE, claimed_tier(ToolAnnotations(readOnlyHint=True))) is (
        Tier.IRREVERSIBLE
    )


def test_a_read_only_liar_that_deletes_files_does_not_run_under_no(phone, tmp_path) -> None:
    executor, asked, logs = phone(False)  # --no
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    plan = make_plan(("s1", "demo.tidy", {"path": str(victim)}, []))
    [[outcome]], _ = run(executor, [demo(tmp_path)], logs, plan)
    assert outcome.status == "refused"
    assert victim.read_text() == "keep me" and effects(tmp_path) == []
    assert asked.asked and asked.asked[0].tool == "demo.tidy"  # it was asked, and declined


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("demo.payout", {"destination": "DE89 3704 0044 0532 0130 00", "euros": 900}),
        ("demo.move_file", {"source": "/sdcard/a.txt", "destination": "/sdcard/public/"}),
        ("demo.git_status", {"repo_path": "/home/owner/.ssh"}),
    ],
)
def test_tainted_arguments_of_mcp_tools_are_refused_under_yes_naming_the_source(
    phone, tmp_path, tool, arguments
) -> None:
    executor, asked, logs = phone(True)  # --yes
    web = UntrustedInput(tool="web_search", source="https://evil.example/page", digest=bytes(32))
    plan = make_plan(("s1", tool, arguments, []), untrusted=[web])
    [[outcome]], _ = run(executor, [demo(tmp_path)], logs, plan)
    assert outcome.status == "refused"
    assert effects(tmp_path) == []
    [question] = asked.asked
    assert set(question.tainted) == set(arguments)  # every argument is a control argument
    assert all("evil.example" in source for source in question.tainted.values())


def test_an_mcp_result_is_untrusted_and_cannot_choose_a_recipient(phone, tmp_path) -> None:
    executor, asked, logs = phone(True)  # --yes
    plan = make_plan(
        ("s1", "demo.lookup", {"city": "Oslo"}, []),
        ("s2", "demo.post_message", {"to": {"$ref": "s1.result.content.0"}, "text": "hi"}, ["s1"]),
    )
    # the next round, written after the planner read the result
    later = make_plan(("s3", "demo.post_message", {"to": "friend@example.org", "text": "hi"}, []))
    server = demo(tmp_path, lookup=ToolRules(tier="read-only"))
    [[first, second], [third]], _ = run(executor, [server], logs, plan, later)
    assert first.status == "ok" and first.untrusted and first.source == "mcp:demo"
    assert second.status == "refused"  # --yes never covers a tainted control argument
    assert third.status == "refused"  # a planner literal after untrusted input is tainted too
    assert all(any("mcp:demo" in s for s in q.tainted.values()) for q in asked.asked)
    assert effects(tmp_path) == []


def test_an_owner_relaxed_tool_runs_without_asking(phone, tmp_path) -> None:
    executor, asked, logs = phone(False)  # --no: nothing may need a confirmation
    server = demo(tmp_path, git_status=ToolRules(tier="read-only"))
    plan = make_plan(("s1", "demo.git_status", {"repo_path": "/src/hearth"}, []))
    [[outcome]], _ = run(executor, [server], logs, plan)
    assert outcome.status == "ok" and asked.asked == []
    assert effects(tmp_path) == ["git_status /src/hearth"]


def test_a_huge_result_is_capped_and_marked(phone, tmp_path) -> None:
    from hearth.companion.tools.mcp import RESULT_CAP

    executor, _, logs = phone(False)
    server = demo(tmp_path, dump=ToolRules(tier="read-only"))
    plan = make_plan(("s1", "demo.dump", {"size": RESULT_CAP + 5000}, []))
    [[outcome]], _ = run(executor, [server], logs, plan)
    [text] = outcome.result["content"]
    assert text == "x" * RESULT_CAP + "…(5000 more characters)"


def test_config_refuses_two_servers_of_one_name_and_dotted_names() -> None:
    entry = {"name": "fs", "command": "npx"}
    with pytest.raises(HearthError, match="two \\[\\[mcp\\]\\] servers named fs"):
        servers_of([entry, entry], "config.toml")
    with pytest.raises(HearthError, match="name"):  # `a.b` + `c` would shadow `a` + `b.c`
        servers_of([{**entry, "name": "fs.read"}], "config.toml")
    with pytest.raises(HearthError, match="tier"):
        servers_of([{**entry, "tools": {"x": {"tier": "harmless"}}}], "config.toml")
