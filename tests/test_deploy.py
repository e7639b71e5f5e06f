"""The deployment files: checked as far as this machine can check them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hearth.companion.policy import OwnerPolicy
from hearth.companion.settings import PhoneSettings
from hearth.companion.tools.mcp import McpServer
from hearth.node.config import NodeConfig

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def test_sample_configs_are_valid_for_their_loaders() -> None:
    NodeConfig.model_validate(tomllib.loads((DEPLOY / "config/node-config.toml").read_text()))
    OwnerPolicy.model_validate(tomllib.loads((DEPLOY / "config/phone-policy.toml").read_text()))
    phone = tomllib.loads((DEPLOY / "config/phone-config.toml").read_text())
    assert [McpServer.model_validate(m).name for m in phone["mcp"]] == ["weather"]
    PhoneSettings.model_validate(phone)


def verified_unit(tmp_path: Path, name: str, program: str) -> str:
    """The text of deploy/systemd/`name`, after checking that with `program` pointed at
    this venv's copy it passes `systemd-analyze verify` with nothing said about it."""
    unit = (DEPLOY / "systemd" / name).read_text()
    local = tmp_path / name
    local.write_text(unit.replace(program, str(Path(sys.executable).parent / Path(program).name)))
    result = subprocess.run(
        ["systemd-analyze", "verify", str(local)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if name in line] == []
    return unit


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_unit_verifies_and_is_hardened(tmp_path) -> None:
    unit = verified_unit(tmp_path, "hearth-node.service", "/opt/hearth/bin/hearth-node")
    for setting in (
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "Restart=on-failure",
        "User=hearth",
        "CapabilityBoundingSet=",
        "UMask=0077",
    ):
        assert setting in unit


def test_termux_script_parses_and_container_copies_what_exists() -> None:
    subprocess.run(["bash", "-n", str(DEPLOY / "termux/setup.sh")], check=True)
    root = DEPLOY.parent
    for line in (DEPLOY / "container/Containerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (root / source).exists(), source


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_companion_user_unit_verifies(tmp_path) -> None:
    unit = verified_unit(tmp_path, "hearth.service", "%h/.local/bin/hearth")
    for setting in ("ExecStart=%h/.local/bin/hearth serve", "KillSignal=SIGTERM", "UMask=0077"):
        assert setting in unit
    assert "WantedBy=default.target" in unit  # a user unit: no User=, started per login
    assert "User=" not in unit


def test_termux_service_runs_the_companion_under_runit() -> None:
    service = DEPLOY / "termux/service/hearth"
    for script in (service / "run", service / "log/run"):
        subprocess.run(["sh", "-n", str(script)], check=True)
        assert script.stat().st_mode & 0o111, f"{script} is not executable"
    run = (service / "run").read_text().splitlines()
    assert run[0] == "#!/data/data/com.termux/files/usr/bin/sh"
    assert run[-1].startswith("exec ") and run[-1].endswith("/.hearth-venv/bin/hearth serve")
    assert "svlogd" in (service / "log/run").read_text()
    setup = (DEPLOY / "termux/setup.sh").read_text()
    assert "termux-services" in setup and "deploy/termux/service/hearth" in setup
