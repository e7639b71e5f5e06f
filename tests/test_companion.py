"""The phone half: pairing, routing, remote plans run by the executor, local fallback."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hearth.companion.policy import OwnerPolicy, load_policy
from hearth.companion.routeplan import RouteInput, decide
from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.messages import DeviceContext

from .nodes import BIN, cli, init_phone, last_json, pair, start_node
from .test_node_script import MILK, MILK_ANSWER, MILK_NOTE, MILK_PLAN, start_scripted_node


def hearth(*args: str, stdin: str | None = None) -> tuple[int, dict]:
    result = cli("hearth", *args, stdin=stdin, check=False)
    return result.returncode, last_json(result)


@pytest.fixture
def paired(processes, tmp_path, tiny_models):
    node = start_node(processes, tmp_path / "node", "--model", str(tiny_models[0]))
    phone = tmp_path / "phone"
    init_phone(phone, tiny_models[1], noise=True)
    assert pair(phone, node.invite())["roles"] == ["phone"]
    return node, phone


@pytest.fixture
def scripted_pair(processes, tmp_path):
    """A real node playing the exact plan for `MILK` (the scripted backend) and a phone
    paired with it through the command line."""
    node = start_scripted_node(processes, tmp_path, [MILK_PLAN])
    phone = tmp_path / "phone"
    init_phone(phone)
    assert pair(phone, node.invite())["roles"] == ["phone"]
    return node, phone


def test_remote_ask_returns_a_plan_signed_by_the_node_and_executed_on_the_phone(
    scripted_pair,
) -> None:
    node, phone = scripted_pair
    code, out = hearth(
        "ask",
        MILK,
        "--route",
        "remote",
        "--tool-choice",
        "required",
        "--yes",
        "--json",
        "--home",
        str(phone),
    )
    assert code == 0, out
    assert set(out) >= {
        "request_id",
        "route",
        "escalated",
        "reason",
        "node",
        "plans",
        "plan",
        "answer",
        "timings",
    }
    assert out["route"] == "remote" and out["node"] == node.peer_id
    plan = out["plan"]
    assert plan["signer"] == node.peer_id and plan["round"] == 1
    [step] = plan["steps"]
    assert (step["tool"], step["status"], step["error"]) == ("notes_create", "ok", None), step
    [note] = json.loads((phone / "data" / "notes.json").read_text())  # on the phone's disk
    assert note["text"] == MILK_NOTE and step["result"] == note
    assert out["answer"] == MILK_ANSWER  # the node's answer once it saw the step's result
    code, audit = hearth("audit", "--verify", "--json", "--home", str(phone))
    assert code == 0 and audit["verified"] is True
    ran = [r for r in audit["records"] if r["plan_id"] == plan["plan_id"] and r["step"] == "s1"]
    assert ran and ran[-1]["signer"] == node.peer_id and ran[-1]["outcome"] == "ok", ran


def test_with_the_node_killed_auto_falls_back_to_local_with_the_reason(paired) -> None:
    node, phone = paired
    os.kill(node.proc.pid, signal.SIGKILL)
    node.proc.wait()
    code, out = hearth(
        "ask", "note bread", "--route", "auto", "--yes", "--json", "--home", str(phone)
    )
    assert code == 0
    assert out["route"] == "local" and "unreachable" in out["reason"]
    code, out = hearth("ask", "note bread", "--route", "remote", "--json", "--home", str(phone))
    assert code == 3 and out["error"]["code"] == "unreachable"
    code, status = hearth("status", "--json", "--home", str(phone))
    assert status["nodes"][0]["reachable"] is False and status["nodes"][0]["reason"]


def test_status_reports_the_node_model_and_latency(paired) -> None:
    node, phone = paired
    code, status = hearth("status", "--json", "--home", str(phone))
    assert code == 0
    (entry,) = status["nodes"]
    assert entry["peer_id"] == node.peer_id and entry["reachable"] is True
    assert entry["model"]["backend"] == "llama-cpp" and entry["latency_ms"] > 0


def test_tools_json_lists_the_manifest(tmp_path) -> None:
    code, out = hearth("tools", "--json", "--home", str(tmp_path))
    assert code == 0
    tools = {t["name"]: t for t in out["tools"]}
    assert tools["message_send"]["tier"] == "irreversible"
    assert tools["message_send"]["control_args"] == ["to"]
    assert tools["notes_search"]["annotations"]["readOnlyHint"] is True


@given(
    text=st.text(max_size=600),
    tools=st.integers(0, 30),
    reachable=st.booleans(),
    metered=st.none() | st.booleans(),
    battery=st.none() | st.integers(0, 100),
    remote_tool=st.booleans(),
    asked=st.sampled_from(["auto", "local", "remote"]),
)
def test_every_input_gets_a_decision_with_a_reason_and_offline_is_never_remote(
    text, tools, reachable, metered, battery, remote_tool, asked
) -> None:
    decision = decide(
        RouteInput(
            text=text,
            candidate_tools=tools,
            node_reachable=reachable,
            needs_remote_tool=remote_tool,
            device=DeviceContext(metered=metered, battery=battery),
        ),
        OwnerPolicy(),
        asked,
    )
    assert decision.route in ("local", "remote") and decision.reason
    if not reachable:
        assert decision.route == "local"


def test_an_invalid_policy_names_the_line(tmp_path) -> None:
    (tmp_path / "policy.toml").write_text("private_to_home = false\nconfidence_threshold = 7\n")
    with pytest.raises(HearthError, match="line 2: confidence_threshold"):
        load_policy(tmp_path)
    (tmp_path / "policy.toml").write_text("never_remote_tools = [\n")
    with pytest.raises(HearthError, match=r"policy\.toml"):
        load_policy(tmp_path)


@pytest.mark.parametrize(("threshold", "route"), [(0.9, "remote"), (0.0, "local")])
def test_a_local_answer_below_the_confidence_threshold_escalates(paired, threshold, route) -> None:
    _node, phone = paired
    (phone / "policy.toml").write_text(f"confidence_threshold = {threshold}\n")
    code, out = hearth(
        "ask", "hi there", "--route", "auto", "--yes", "--json", "--home", str(phone)
    )
    assert code == 0 and out["route"] == route
    assert out["escalated"] is (route == "remote")
    if route == "remote":
        assert "confidence" in out["reason"] and "below the policy's 0.90" in out["reason"]
    else:
        assert 0 < out["confidence"] < 1


def test_ctrl_c_mid_stream_cancels_the_session_on_the_node(paired) -> None:
    node, phone = paired
    proc = subprocess.Popen(
        [
            str(BIN / "hearth"),
            "ask",
            "note milk and remind me and write files",
            "--route",
            "remote",
            "--tool-choice",
            "required",
            "--no",
            "--json",
            "--home",
            str(phone),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(1200):  # until the node plans it (bounded): the session is open
            if node.status()["sessions"] > 0 or proc.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"], check=True)
        if proc.poll() is not None:
            pytest.skip("the ask ended before its session was seen on the node")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert json.loads(out.decode().strip().splitlines()[-1])["error"]["code"] == "cancelled"
    for _ in range(100):  # the node lets go of the session (bounded wait)
        if node.status()["sessions"] == 0:
            break
        subprocess.run(["sleep", "0.05"], check=True)
    assert node.status()["sessions"] == 0


def test_a_local_call_breaking_a_bound_the_grammar_cannot_hold_escalates(paired) -> None:
    import sys
    from pathlib import Path

    _node, phone = paired
    root = Path(__file__).resolve().parents[1]
    config = (phone / "config.toml").read_text()
    (phone / "config.toml").write_text(
        config + f'[[mcp]]\nname = "demo"\ncommand = "{sys.executable}"\n'
        f'args = ["-m", "tests.mcp_server"]\nenv = {{ PYTHONPATH = "{root}" }}\n'
    )
    (phone / "policy.toml").write_text("confidence_threshold = 0.0\n")
    code, out = hearth(
        "ask",
        "speaker volume",
        "--route",
        "auto",
        "--tool-choice",
        "required",
        "--yes",
        "--json",
        "--home",
        str(phone),
    )
    # the random-weight node breaks the same bound, and rejects its own plan (never sends
    # it): what matters here is that the phone escalated, with the reason, and says so
    assert code in (0, 8), out
    _, audit = hearth("audit", "--json", "--home", str(phone))
    routes = [r["reason"] for r in audit["records"] if r["decision"] == "route"]
    assert routes and routes[-1].startswith("remote: escalated: demo.set_volume: level")
    assert "maximum of 1001" in routes[-1] or "minimum of 1000" in routes[-1]
