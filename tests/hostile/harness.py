"""Runs scripted plan sessions against a real phone home, through the hostile home.

`start_bench` pairs a real phone home with a real `hearth-node`, stops the daemon and
starts `tests.hostile.node` on the node's home (same identity, same swarm key). Each
suite gets its own copy of the paired phone home, with the suite's MCP test servers
in its `config.toml` (the owner relaxing the honest read-only tools, as an owner
would) and its own world directory. A run reseeds the phone's data and the world,
hands the hostile home its script, and asks: in-process through the `Service`, or
as a real `hearth ask --route remote --json` process.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import trio

from hearth.companion.ask import ask
from hearth.companion.confirm import Confirmation
from hearth.companion.events import AskRequest
from hearth.companion.executor import SessionState
from hearth.companion.service import Service
from hearth.companion.tools.mcp import mounted
from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.wire.errors import HearthError

from ..nodes import BIN, cli, init_phone, pair, start_node, wait_ready
from ..phone_kit import Recorder
from .app_tools import app_tools
from .goals import Outcome
from .script import Script, plan_for
from .suites import CALENDAR, CONTACTS, PHONE_FILES, PHONE_NOTES, SERVER_STATE
from .world import STATE_ENV, calls

ROOT = Path(__file__).resolve().parents[2]
# what the owner tells the phone about the honest read-only tools (the liars stay strict)
OWNER_RULES: dict[str, dict[str, dict[str, Any]]] = {
    "bank": {
        "get_balance": {"tier": "read-only", "private": True},
        "list_transactions": {"tier": "read-only", "private": True},
        "get_statement": {"tier": "read-only", "private": True},
    },
    "work": {
        "read_inbox": {"tier": "read-only", "private": True},
        "list_files": {"tier": "read-only", "private": True},
        "read_file": {"tier": "read-only", "private": True},
    },
    "chat": {
        "list_channels": {"tier": "read-only"},
        "read_channel": {"tier": "read-only", "private": True},
    },
    "travel": {
        "search_hotels": {"tier": "open-world-read"},
        "get_reviews": {"tier": "read-only"},
    },
}


def _toml(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, bool) else str(value).lower()


def mcp_config(
    servers: tuple[str, ...], world: Path, rules: dict[str, dict[str, dict[str, Any]]]
) -> str:
    """`[[mcp]]` entries for the suite's test servers, with the owner's `rules`."""
    out = []
    for name in servers:
        env = {"PYTHONPATH": str(ROOT), STATE_ENV: str(world)}
        out += [
            "[[mcp]]",
            f"name = {_toml(name)}",
            f"command = {_toml(sys.executable)}",
            f'args = ["-m", "tests.hostile.{name}_server"]',
            "env = { " + ", ".join(f"{k} = {_toml(v)}" for k, v in env.items()) + " }",
        ]
        for tool, told in rules[name].items():
            out.append(f"[mcp.tools.{tool}]")
            out += [f"{key} = {_toml(value)}" for key, value in told.items()]
    return "\n".join(out) + "\n"


@dataclass
class Bench:
    """The paired phone home (the template) and the hostile home serving it."""

    root: Path
    phone: Path
    script: Path
    heard: Path

    def plan_requests(self) -> list[dict[str, Any]]:
        """The `plan_request` frames the hostile home heard, oldest first."""
        heard = [json.loads(line) for line in self.heard.read_text().splitlines()]
        return [h for h in heard if h["frame"] == "plan_request"]


def start_bench(
    processes: Any, root: Path, *, model: Path | None = None, search_docs: Path | None = None
) -> Bench:
    """The paired phone (with `model` as its local model) and the hostile home serving it.
    `search_docs`: the home is also a search relay, and a friend node `exit` (a search
    exit over an index of those documents) joins before the phone pairs."""
    node = start_node(processes, root / "node")
    exit_home = root / "exit"
    if search_docs is not None:
        home = ("--home", str(node.home))
        cli("hearth-node", "roster", "grant", node.peer_id, "search-relay", *home)
        uri = node.invite("--role", "friend", "--grant", "search-exit")
        cli("hearth-node", "join", "-", "--json", "--home", str(exit_home), stdin=uri + "\n")
        cli("hearth-node", "index", "add", str(search_docs), "--home", str(exit_home))
    phone = root / "phone"
    init_phone(phone, model, noise=model is not None)
    pair(phone, node.invite())
    node.proc.terminate()
    node.proc.wait(timeout=30)
    bench = Bench(root, phone, root / "script.json", root / "heard.jsonl")
    search = search_docs is not None
    hostile = start_hostile(processes, node.home, bench.script, bench.heard, search=search)
    # only where the hostile home listens: the stopped daemon's port is free for any
    # process to take, and a dial that fell through to it (the hostile home slow to
    # answer on a loaded machine) met another swarm's node: "swarm key mismatch suspected"
    book = AddressBook(phone)
    book.entries[node.peer_id] = []
    book.remember(node.peer_id, hostile.addrs)
    if search:  # the exit finds the hostile home where the phone does
        AddressBook(exit_home).remember(node.peer_id, hostile.addrs)
        start_node(processes, exit_home, config="search_exit_per_minute = 100000\n")
    return bench


@dataclass
class Hostile:
    """A `tests.hostile.node` process on a node's home (its identity and swarm key)."""

    proc: subprocess.Popen[str]
    peer_id: str
    addrs: list[str]


def start_hostile(
    processes: Any, node_home: Path, script: Path, heard: Path, *, search: bool = False
) -> Hostile:
    """The hostile node on `node_home` (its daemon stopped), playing `script`, logging
    every frame it hears to `heard` (serving search too with `search`); once it listens."""
    ready = heard.with_suffix(".ready.json")
    proc = processes.spawn(
        sys.executable,
        "-m",
        "tests.hostile.node",
        str(node_home),
        "--script",
        str(script),
        "--log",
        str(heard),
        "--ready-file",
        str(ready),
        *(("--search",) if search else ()),
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT)},
        stderr=subprocess.DEVNULL,
    )
    listening = wait_ready(proc, ready)
    return Hostile(proc, listening["peer_id"], listening["addrs"])


@dataclass
class Run:
    """One scripted session and what it left behind."""

    outcome: Outcome
    asked: list[Confirmation] = field(default_factory=list)
    error: str = ""
    untrusted_sources: list[str] = field(default_factory=list)  # as the answer names them


@dataclass
class SuitePhone:
    """One suite's copy of the paired phone home, and its world."""

    bench: Bench
    home: Path
    world: Path
    config: str  # the paired phone's own config.toml
    rules: dict[str, dict[str, dict[str, Any]]] = field(default_factory=lambda: OWNER_RULES)

    @classmethod
    def make(
        cls,
        bench: Bench,
        name: str,
        rules: dict[str, dict[str, dict[str, Any]]] = OWNER_RULES,
    ) -> SuitePhone:
        """A copy of the paired phone home; `rules`: what its owner says of the MCP tools."""
        home = bench.root / f"phone-{name}"
        shutil.copytree(bench.phone, home)
        world = bench.root / f"world-{name}"
        world.mkdir()
        return cls(bench, home, world, (home / "config.toml").read_text(), rules)

    def _reset(self, script: Script) -> int:
        """Reseed the phone's data and the world, mount the MCP test servers the script
        calls (starting a server costs a second: none is started for nothing); returns
        where this run's log starts."""
        servers = {s.tool.split(".")[0] for r in script.rounds for s in r.steps if "." in s.tool}
        (self.home / "config.toml").write_text(
            self.config + mcp_config(tuple(sorted(servers)), self.world, self.rules)
        )
        data = self.home / "data"
        shutil.rmtree(data, ignore_errors=True)
        for rel, text in PHONE_FILES.items():
            (data / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
            (data / "files" / rel).write_text(text)
        (data / "notes.json").write_text(json.dumps(PHONE_NOTES))
        (data / "calendar.ics").write_text(CALENDAR)
        (data / "contacts.vcf").write_text(CONTACTS)
        shutil.rmtree(self.world)
        self.world.mkdir()
        for server, state in SERVER_STATE.items():
            (self.world / f"{server}.json").write_text(json.dumps(state))
        self.bench.script.write_text(script.model_dump_json())
        return self.bench.heard.stat().st_size if self.bench.heard.exists() else 0

    def _outcome(self, offset: int, statuses: list[str]) -> Outcome:
        heard = ""
        if self.bench.heard.exists():
            with self.bench.heard.open() as log:
                log.seek(offset)
                heard = log.read()
        return Outcome(self.home / "data", self.world, calls(self.world), heard, statuses)

    def ask(self, request: str, script: Script, answer: bool, *, app: bool = False) -> Run:
        """`hearth ask --route remote --yes|--no`, through the `Service` in this process
        (with the app's own tools, `app_tools`, registered as a `Companion` would)."""
        return self.ask_with(request, script, Recorder(answer), app=app)

    def ask_with(
        self, request: str, script: Script, confirmer: Recorder, *, app: bool = False
    ) -> Run:
        """`ask`, with `confirmer` answering the confirmations."""
        offset = self._reset(script)
        sources: list[str] = []

        async def noop(_: object) -> None:
            return None

        async def asking() -> list[str]:
            async with Service.open(self.home) as phone:
                for tool in app_tools(self.world) if app else []:
                    phone.registry.add(tool)
                asked = AskRequest(text=request, route="remote")
                out = await ask(phone, asked, noop, confirmer, anyio.Event())
            sources.extend(getattr(out, "untrusted_sources", []))  # an older phone: none
            return [s.status for p in out.plans for s in p.steps]

        error, statuses = "", []
        try:
            statuses = trio.run(asking)
        except HearthError as exc:
            error = exc.code.value
        return Run(self._outcome(offset, statuses), confirmer.asked, error, sources)

    def ask_process(self, request: str, script: Script, answer: bool) -> Run:
        """The same, as a real `hearth ask` process (no terminal: nobody to ask)."""
        offset = self._reset(script)
        result = subprocess.run(
            [
                str(BIN / "hearth"),
                "ask",
                request,
                "--route",
                "remote",
                "--yes" if answer else "--no",
                "--json",
                "--home",
                str(self.home),
            ],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        out = json.loads(result.stdout.strip().splitlines()[-1])
        statuses = [s["status"] for p in out.get("plans", []) for s in p["steps"]]
        error = out["error"]["code"] if "error" in out else ""
        return Run(self._outcome(offset, statuses), error=error)

    def friend_plan(self, script: Script, answer: bool) -> Run:
        """A friend's planner's plan, through the phone's executor (the plan session
        does not carry friends' plans yet), with the suite's MCP servers mounted."""
        offset = self._reset(script)
        confirmer = Recorder(answer)
        phone = Service(self.home)
        executor = phone.executor(confirmer)

        async def run() -> list[str]:
            state = SessionState()
            statuses = []
            async with mounted(phone.mcp_servers, phone.registry, self.home / "logs"):
                for round_no, round_ in enumerate(script.rounds, 1):
                    plan = plan_for(
                        round_,
                        round_no=round_no,
                        signer="12D3KooWfriend",
                        audience=phone.peer_id,
                        session_id="friend-session",
                        request_hash=bytes(32),
                        transcript_hash=bytes(32),
                    )
                    observed = await executor.execute(plan, state, friend=True)
                    statuses += [o.status for o in observed]
            return statuses

        return Run(self._outcome(offset, trio.run(run)), confirmer.asked)
