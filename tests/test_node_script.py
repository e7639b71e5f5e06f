"""The daemon's scripted backend: a real `hearth-node serve --script FILE` plays the exact
plans of a JSON file, so an end-to-end test gets one exact plan from a real node and a
real paired phone runs it. Also the helpers other end-to-end tests use to start one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from hearth.node.backends import Conversation, GenerationSettings
from hearth.node.backends.scripted import PlanScript, ScriptedBackend, ScriptFile
from hearth.protocol.model.grammar import ToolGrammar, json_grammar
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage

from .conftest import Processes
from .nodes import RunningNode, cli, init_phone, last_json, pair, start_node

pytestmark = pytest.mark.timeout(300)

MILK = "Note that we need milk"  # what the phone asks...
MILK_NOTE = "we need milk"  # ...the note the plan writes...
MILK_ANSWER = "Noted: we need milk."  # ...and what the node answers once it ran


def tool_call(name: str, **arguments: Any) -> str:
    """One call in Qwen3.5's XML form, as the model writes it (a string value as it is,
    any other value as JSON)."""
    params = "".join(
        f"<parameter={key}>\n{value if isinstance(value, str) else json.dumps(value)}\n"
        "</parameter>\n"
        for key, value in arguments.items()
    )
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


MILK_PLAN = {
    "request": MILK,
    "repeat": True,
    "rounds": [tool_call("notes_create", text=MILK_NOTE), MILK_ANSWER],
}


def start_scripted_node(
    processes: Processes, root: Path, plans: list[dict[str, Any]], *extra: str
) -> RunningNode:
    """`hearth-node serve --script` for a node home at `root`/node, playing `plans` (each a
    `ScriptedPlan` as JSON) from `root`/script.json."""
    script = root / "script.json"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(json.dumps({"plans": plans}))
    return start_node(processes, root / "node", "--script", str(script), *extra)


def hearth(*args: str) -> tuple[int, dict[str, Any]]:
    result = cli("hearth", *args, check=False)
    return result.returncode, last_json(result)


def notes(phone: Path) -> list[dict[str, Any]]:
    """The notes on the phone's disk."""
    path = phone / "data" / "notes.json"
    return json.loads(path.read_text()) if path.exists() else []


BUSY = "the scripted model is busy"
PLANS = [
    MILK_PLAN,
    {"request": "Once only", "rounds": ["Said once."]},
    {"request": "Fail", "repeat": True, "rounds": [{"error": {"code": "busy", "message": BUSY}}]},
]


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningNode, Path]]:
    """A scripted node playing `PLANS` and a phone (no model of its own) paired with it
    through the `hearth` command line."""
    processes = Processes()
    root = tmp_path_factory.mktemp("scripted")
    try:
        node = start_scripted_node(processes, root, PLANS)
        phone = root / "phone"
        init_phone(phone)
        assert pair(phone, node.invite())["roles"] == ["phone"]
        yield node, phone
    finally:
        processes.cleanup()


def test_a_scripted_node_plays_its_exact_plan_and_the_phone_runs_it(
    scripted: tuple[RunningNode, Path],
) -> None:
    node, phone = scripted
    code, out = hearth("ask", MILK, "--route", "remote", "--yes", "--json", "--home", str(phone))
    assert code == 0, out
    assert out["route"] == "remote" and out["node"] == out["planner"] == node.peer_id
    [plan] = out["plans"]
    assert plan["signer"] == node.peer_id and plan["round"] == 1
    [step] = plan["steps"]
    assert (step["tool"], step["arguments"], step["status"]) == (
        "notes_create",
        {"text": MILK_NOTE},
        "ok",
    )
    assert out["answer"] == MILK_ANSWER
    assert MILK_NOTE in [n["text"] for n in notes(phone)]  # on the phone's disk


def test_the_node_and_the_phone_say_the_backend_is_scripted(
    scripted: tuple[RunningNode, Path],
) -> None:
    node, phone = scripted
    assert node.status()["model"]["backend"] == "scripted"
    code, status = hearth("status", "--json", "--home", str(phone))
    assert code == 0, status
    [entry] = status["nodes"]
    assert entry["reachable"] is True and entry["model"]["backend"] == "scripted"


def test_a_plan_is_played_once_unless_it_repeats(scripted: tuple[RunningNode, Path]) -> None:
    _, phone = scripted
    ask = ("--route", "remote", "--json", "--home", str(phone))
    code, out = hearth("ask", "Once only", *ask)
    assert (code, out.get("answer")) == (0, "Said once."), out
    code, out = hearth("ask", "Once only", *ask)
    assert code == 1 and out["error"]["code"] == "internal", out
    assert "no plan for 'Once only'" in out["error"]["message"]


def test_a_scripted_error_reaches_the_phone_with_its_code(
    scripted: tuple[RunningNode, Path],
) -> None:
    _, phone = scripted
    for _ in range(2):  # `repeat`: every session asking it
        code, out = hearth("ask", "Fail", "--route", "remote", "--json", "--home", str(phone))
        assert code == ErrorCode.BUSY.exit_status and out["error"]["code"] == "busy", out
        assert BUSY in out["error"]["message"]


# -- a bad script, or a script beside another backend, is refused at start --------------


def serve_refused(home: Path, *args: str) -> str:
    """`hearth-node serve` with `args`, which must exit 9 before it serves; its stderr."""
    if not (home / "identity.key").exists():
        cli("hearth-node", "init", "--home", str(home))
    result = cli(
        "hearth-node", "serve", "--home", str(home), "--listen", "/ip4/127.0.0.1/tcp/0",
        "--no-mdns", *args, check=False, timeout=120,
    )  # fmt: skip
    assert result.returncode == 9, (result.returncode, result.stderr[-2000:])
    assert "invalid_input" in result.stderr and "Traceback" not in result.stderr
    return result.stderr


@pytest.mark.parametrize(
    ("text", "named"),
    [
        (None, "no script file at"),
        ('{"plans": [', "Invalid JSON"),
        ('{"plans": []}', "plans: List should have at least 1 item"),
        ('{"plans": [{"rounds": []}]}', "plans.0.rounds: List should have at least 1 item"),
        ('{"plans": [{"rounds": ["x"], "when": 1}]}', "plans.0.when: Extra inputs"),
        (
            '{"plans": [{"rounds": [{"error": {"code": "oops", "message": "m"}}]}]}',
            "plans.0.rounds.0.error.code: Input should be",
        ),
        (
            '{"plans": [{"rounds": [{"text": "t", "error": {"code": "busy", "message": "m"}}]}]}',
            "plans.0.rounds.0: Value error, a round holds an error or text",
        ),
    ],
)
def test_a_bad_script_file_is_invalid_input_naming_the_problem(
    tmp_path: Path, text: str | None, named: str
) -> None:
    script = tmp_path / "script.json"
    if text is not None:
        script.write_text(text)
    stderr = serve_refused(tmp_path / "node", "--script", str(script))
    assert named in stderr and str(script) in stderr, stderr


def test_a_script_beside_a_model_or_an_upstream_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"plans": [MILK_PLAN]}))
    home = tmp_path / "node"
    model = tmp_path / "model.gguf"  # never opened: the flags are refused first
    stderr = serve_refused(home, "--script", str(script), "--model", str(model))
    assert "use --model or --script, not both" in stderr
    stderr = serve_refused(home, "--script", str(script), "--upstream", "http://127.0.0.1:9")
    assert "use --upstream or --script, not both" in stderr
    (home / "config.toml").write_text(f"script = {json.dumps(str(script))}\n")  # the key too
    stderr = serve_refused(home, "--upstream", "http://127.0.0.1:9")
    assert "use --upstream or --script, not both" in stderr


# -- how a script file's plans are chosen (the backend in process) ----------------------


def _round(backend: ScriptedBackend, conv: Conversation, grammar: ToolGrammar | None = None) -> str:
    async def go() -> str:
        result = await backend.generate(
            conv,
            grammar=grammar,
            settings=GenerationSettings(max_tokens=64),
            on_text=_ignore,
            cancel=anyio.Event(),
        )
        conv.messages.append(ChatMessage(role="assistant", content=result.text))
        return result.text

    return anyio.run(go)


async def _ignore(_: str) -> None:
    return None


def _session(text: str, history: tuple[str, ...] = ()) -> Conversation:
    earlier = [ChatMessage(role="user", content=h) for h in history]
    return Conversation(messages=[*earlier, ChatMessage(role="user", content=text)])


def test_each_session_plays_the_plan_for_its_request_else_one_for_any() -> None:
    script = ScriptFile.model_validate(
        {
            "plans": [
                {"request": "b", "rounds": ["b1", "b2"]},
                {"rounds": ["any"]},
                {"request": "b", "rounds": ["again b"]},
            ]
        }
    )
    backend = ScriptedBackend(PlanScript(script))
    first, second, third = _session("b", history=("a",)), _session("b"), _session("c")
    assert _round(backend, first) == "b1"  # the request is the last user message
    assert _round(backend, second) == "again b"  # the first "b" plan is `first`'s, used up
    assert _round(backend, first) == "b2"  # each session goes on with its own plan's rounds
    assert _round(backend, third) == "any"  # no plan for "c": the one for any request
    with pytest.raises(HearthError) as more:
        _round(backend, first)
    assert more.value.code is ErrorCode.INTERNAL and "holds 2 round(s)" in more.value.message
    with pytest.raises(HearthError) as none:
        _round(backend, _session("b"))
    assert none.value.code is ErrorCode.INTERNAL and "no plan for 'b'" in none.value.message


def test_a_json_answer_plays_only_under_a_json_grammar_it_fits() -> None:
    """As a model under the round's grammar: no JSON answer where none was asked for,
    none that breaks the schema asked for."""
    value = {"city": "Lyon", "days": [1, 2]}
    script = ScriptFile.model_validate(
        {"plans": [{"repeat": True, "rounds": [{"json_answer": value}]}]}
    )
    backend = ScriptedBackend(PlanScript(script))
    assert _round(backend, _session("x"), json_grammar(None)) == '{"city":"Lyon","days":[1,2]}'
    with pytest.raises(HearthError) as unasked:
        _round(backend, _session("x"))
    assert "asks for no JSON answer" in unasked.value.message
    with pytest.raises(HearthError) as broken:
        _round(backend, _session("x"), json_grammar({"type": "array"}))
    assert "the JSON answer for round 1 of 'x' breaks its schema" in broken.value.message


def test_a_script_that_never_ends_is_refused_at_its_bound() -> None:
    """A device or a pipe has no size: the file is read bounded, never to the end."""
    from hearth.node.backends.scripted import load_script

    with pytest.raises(HearthError) as refused:
        load_script(Path("/dev/zero"))
    assert refused.value.code is ErrorCode.INVALID_INPUT and "larger than" in refused.value.message
