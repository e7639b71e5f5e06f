"""The command-line contract of DESIGN.md, and how the packages are installed (the layout's
import rules: test_layout.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    return subprocess.run(
        args, capture_output=True, text=True, timeout=120, cwd=cwd, env={**os.environ, **env}
    )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("hearth", ["init", "models", "demo", "config", "ask"]),
        ("hearth-node", ["init", "roster", "join", "invite"]),
    ],
)
def test_help_lists_the_commands(command: str, expected: list[str]) -> None:
    result = run(str(BIN / command), "--help")
    assert result.returncode == 0
    for name in expected:
        assert name in result.stdout


def test_help_loads_neither_libp2p_nor_llama_cpp(tmp_path) -> None:
    code = (
        "import sys\nfrom hearth.companion.cli import app\n"
        "try:\n    app(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('libp2p', 'llama_cpp')))"
    )
    result = run(sys.executable, "-c", code, cwd=tmp_path)
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("name", ["protocol", "node", "search", "companion"])
def test_nothing_is_importable_under_a_bare_name(name: str, tmp_path) -> None:
    result = run(sys.executable, "-c", f"import {name}", cwd=tmp_path)
    assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr


def test_node_init_json_and_exit_statuses(tmp_path) -> None:
    home = tmp_path / "node"
    first = run(str(BIN / "hearth-node"), "init", "--name", "home", "--json", "--home", str(home))
    assert first.returncode == 0
    created = json.loads(first.stdout)
    assert created["peer_id"].startswith("12D3KooW") and created["roster_version"] == 1
    again = run(str(BIN / "hearth-node"), "init", "--json", "--home", str(home))
    assert again.returncode == 9
    assert json.loads(again.stdout)["error"]["code"] == "invalid_input"
    roster = json.loads(
        run(str(BIN / "hearth-node"), "roster", "--json", "--home", str(home)).stdout
    )
    assert roster["version"] == 1 and roster["founder"] == created["peer_id"]
    assert roster["members"][0]["roles"] == ["home", "planner", "relay"]
    for secret in ("identity.key", "swarm.key", "roster.signed"):
        assert (home / secret).stat().st_mode & 0o077 == 0


def test_home_comes_from_the_environment(tmp_path) -> None:
    result = run(str(BIN / "hearth"), "init", "--json", HEARTH_HOME=str(tmp_path / "phone"))
    assert result.returncode == 0
    assert json.loads(result.stdout)["home"] == str(tmp_path / "phone")
    assert (tmp_path / "phone" / "identity.key").exists()


def test_make_tiny_cli_writes_two_files(tmp_path) -> None:
    result = run(str(BIN / "hearth"), "models", "make-tiny", str(tmp_path), "--json")
    assert result.returncode == 0
    paths = json.loads(result.stdout)
    assert Path(paths["bf16"]).is_file() and Path(paths["q4_k_m"]).is_file()


def test_pull_offline_is_unreachable_with_exit_3(tmp_path) -> None:
    result = run(
        str(BIN / "hearth"),
        "models",
        "pull",
        "botpsy-0.8b",
        "--json",
        "--home",
        str(tmp_path),
        HF_ENDPOINT="https://hub.invalid",
    )
    assert result.returncode == 3
    assert json.loads(result.stdout)["error"]["code"] == "unreachable"


def test_pull_of_an_unknown_model_is_invalid_input(tmp_path) -> None:
    result = run(str(BIN / "hearth"), "models", "pull", "nope", "--json", "--home", str(tmp_path))
    assert result.returncode == 9


def test_every_source_package_is_installed() -> None:
    """A folder with an `__init__.py` that pyproject.toml does not list would be missing
    from a wheel (an editable install hides that)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    found = set()
    for prefix, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((prefix, *parts)))
    assert found - listed == set()
