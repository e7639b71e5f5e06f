"""What operating Hearth shows: a mistyped `--home` is refused and creates nothing, a
log or a script gets each answer once (tokens stream only to a terminal), `hearth serve`
and `hearth-node serve` log one line per request to stderr and to a rotating file under
their home (0600, no prompt, no token), and the systemd units pass `systemd-analyze
verify` once installed as their comments say."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from .nodes import BIN, cli, init_phone, pair, start_companion, start_node, wait_until

pytestmark = pytest.mark.timeout(300)
DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
SECRET_PROMPT = "my bank PIN is 4321"

PHONE_COMMANDS = [
    ["status"],
    ["tools"],
    ["audit", "--verify"],
    ["conversations"],
    ["inbox"],
    ["ask", "hello"],
    ["search", "weather"],
    ["config", "get"],
    ["config", "set", "api_port", "7800"],
    ["serve"],
    ["chat"],
    ["pair", "hearth://pair?v=1"],
]
NODE_COMMANDS = [
    ["status"],
    ["roster"],
    ["invite"],
    ["serve"],
    ["revoke", "12D3KooWJQyu8Z7kL49KmT648wpFFfqhaaJaUrVrunvY7oiVvA2x"],
]


@pytest.mark.parametrize(
    "command",
    [["hearth", *c] for c in PHONE_COMMANDS] + [["hearth-node", *c] for c in NODE_COMMANDS],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_home_that_does_not_exist_is_invalid_input_and_nothing_is_created(
    tmp_path: Path, command: list[str]
) -> None:
    typo = tmp_path / "no" / "such-home"
    result = cli(*command, "--home", str(typo), check=False, stdin="")
    assert result.returncode == 9, result.stdout + result.stderr
    assert "invalid_input" in result.stderr and str(typo) in result.stderr
    assert not typo.exists() and not typo.parent.exists()


@pytest.fixture(scope="module")
def phone(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> Path:
    """A phone with the tiny local model (random weights: answers are capped)."""
    home = tmp_path_factory.mktemp("ops") / "phone"
    init_phone(home, tiny_models[1], noise=True)
    return home


def ask(phone: Path, *args: str, merged: bool) -> subprocess.CompletedProcess[str]:
    """`hearth ask --route local` as a script runs it: stderr is no terminal (`merged`:
    it goes where stdout goes, as `2>&1` sends it)."""
    return subprocess.run(
        [str(BIN / "hearth"), "ask", "--route", "local", "--tool-choice", "none",
         "--home", str(phone), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merged else subprocess.PIPE,
        text=True,
        timeout=180,
    )  # fmt: skip


def test_json_with_stderr_merged_is_one_object(phone: Path) -> None:
    result = ask(phone, "--json", "tell me a story", merged=True)
    assert result.returncode == 0, result.stdout
    out = json.loads(result.stdout)  # the whole output: one object, no token lines
    assert isinstance(out["answer"], str) and out["usage"]["completion_tokens"] > 0, out


def test_a_log_gets_the_answer_once(phone: Path) -> None:
    result = ask(phone, "tell me another story", merged=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip()  # the route, then the answer
    assert result.stderr == ""  # nothing streamed into the log first


def log_lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if "hearth.requests" in line]


def test_hearth_serve_logs_one_line_per_request_to_stderr_and_a_private_file(
    processes, phone: Path, tmp_path: Path
) -> None:
    err = tmp_path / "serve.err"
    with err.open("w") as stderr:
        running = start_companion(processes, phone, stderr=stderr)
    token = (phone / "api.token").read_text().strip()
    with httpx.Client(base_url=str(running.ready["api"]), timeout=60) as http:
        assert http.get("/api/status").status_code == 401
        bearer = {"Authorization": f"Bearer {token}"}
        assert http.get("/api/conversations", headers=bearer).status_code == 200
    asked = cli("hearth", "ask", "--route", "local", "--tool-choice", "none", "--json",
                "--home", str(phone), SECRET_PROMPT)  # fmt: skip
    request_id = json.loads(asked.stdout)["request_id"]
    log = phone / "logs" / "serve.log"
    wait_until(lambda: any("socket ask" in line for line in log_lines(log)), "the ask's line")
    running.stop()
    lines = log_lines(log)
    assert any("GET /api/status: 401" in line for line in lines), lines
    assert any("GET /api/conversations: 200" in line for line in lines), lines
    [ask_line] = [line for line in lines if "socket ask" in line]
    assert f"request {request_id} socket ask, local: ok in" in ask_line, ask_line
    assert log.stat().st_mode & 0o777 == 0o600 and log.parent.stat().st_mode & 0o777 == 0o700
    text = log.read_text() + err.read_text()
    assert SECRET_PROMPT not in text and token not in text
    assert "GET /api/conversations: 200" in err.read_text()  # stderr too


def test_hearth_node_serve_logs_each_plan_request_and_status_says_direct(
    processes, tmp_path: Path, tiny_models
) -> None:
    node = start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))
    phone = tmp_path / "phone"
    init_phone(phone)
    pair(phone, node.invite())
    asked = cli("hearth", "ask", "--route", "remote", "--tool-choice", "none", "--json",
                "--home", str(phone), SECRET_PROMPT)  # fmt: skip
    request_id = json.loads(asked.stdout)["request_id"]
    log = tmp_path / "node" / "logs" / "node.log"
    wait_until(lambda: any(request_id in line for line in log_lines(log)), "the plan's line")
    [line] = [line for line in log_lines(log) if request_id in line]
    assert "/hearth/plan/1 for a phone: ok in" in line, line
    assert SECRET_PROMPT not in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o600
    [home] = json.loads(cli("hearth", "status", "--json", "--home", str(phone)).stdout)["nodes"]
    assert home["reachable"] and home["relay"] is None  # reached directly


def systemd_verify(
    unit: Path, *, user: bool, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["systemd-analyze", "verify", *(["--user"] if user else []), str(unit)],
        capture_output=True, text=True, timeout=60, env={**os.environ, **env},
    )  # fmt: skip


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_the_user_unit_verifies_once_hearth_is_in_local_bin(tmp_path: Path) -> None:
    """The unit's comment: `ln -sf "$PWD/.venv/bin/hearth" ~/.local/bin/hearth` (or pipx)."""
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "hearth").symlink_to(BIN / "hearth")
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    unit = DEPLOY / "systemd" / "hearth.service"
    assert 'ln -sf "$PWD/.venv/bin/hearth" ~/.local/bin/hearth' in unit.read_text()
    result = systemd_verify(
        unit, user=True, env={"HOME": str(home), "XDG_RUNTIME_DIR": str(runtime)}
    )
    assert result.returncode == 0 and "hearth.service" not in result.stderr, result.stderr


OPT = Path("/opt/hearth")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
@pytest.mark.skipif(os.geteuid() != 0 or OPT.exists(), reason="needs root and no /opt/hearth")
def test_the_node_unit_verifies_once_installed_into_opt_hearth() -> None:
    """The unit's comment installs a virtualenv at /opt/hearth; here that install is
    stood in for by a link to this venv's command, removed afterwards."""
    unit = DEPLOY / "systemd" / "hearth-node.service"
    assert "sudo python3 -m venv /opt/hearth" in unit.read_text()
    (OPT / "bin").mkdir(parents=True)
    try:
        (OPT / "bin" / "hearth-node").symlink_to(BIN / "hearth-node")
        result = systemd_verify(unit, user=False, env={})
    finally:
        shutil.rmtree(OPT)
    assert result.returncode == 0 and "hearth-node.service" not in result.stderr, result.stderr
