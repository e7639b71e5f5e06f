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


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_unit_verifies_and_is_hardened(tmp_path) -> None:
    unit = (DEPLOY / "systemd/hearth-node.service").read_text()
    for setting in (
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "Restart=on-failure",
        "User=hearth",
        "CapabilityBoundingSet=",
        "UMask=0077",
    ):
        assert setting in unit
    local = tmp_path / "hearth-node.service"
    local.write_text(
        unit.replace("/usr/local/bin/hearth-node", str(Path(sys.executable).parent / "hearth-node"))
    )
    result = subprocess.run(
        ["systemd-analyze", "verify", str(local)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert [line for line in result.stderr.splitlines() if "hearth-node.service" in line] == []


def test_termux_script_parses_and_container_copies_what_exists() -> None:
    subprocess.run(["bash", "-n", str(DEPLOY / "termux/setup.sh")], check=True)
    root = DEPLOY.parent
    for line in (DEPLOY / "container/Containerfile").read_text().splitlines():
        if line.startswith("COPY "):
            for source in line.split()[1:-1]:
                assert (root / source).exists(), source
