"""The command line's contract for scripts and people, driven through the real commands
(DESIGN.md "Command line"): usage errors, `--version`, `hearth config`, plain text."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import pytest

from hearth.companion.audit import AuditLog, AuditRecord

from .nodes import BIN, cli
from .terminal import on_terminal


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return cli(*args, stdin=stdin, check=False)


def one_json(out: str) -> dict:
    lines = out.strip().splitlines()
    assert len(lines) == 1, out  # nothing but the one object reaches stdout
    return json.loads(lines[0])


@pytest.mark.parametrize(
    "args",
    [
        ("hearth", "ask", "--json", "--bogus", "x"),
        ("hearth", "ask", "--json"),
        ("hearth", "ask", "--json", "--route", "sideways", "hi"),
        ("hearth", "search", "--json", "--hops", "7", "q"),
        ("hearth-node", "invite", "--json", "--role", "stranger"),
        ("hearth-node", "status", "--json", "--nope"),
    ],
)
def test_a_usage_error_under_json_is_one_usage_object_and_exit_2(args: tuple[str, ...]) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert one_json(result.stdout)["error"]["code"] == "usage"
    assert "Traceback" not in result.stderr


def test_a_usage_error_for_a_person_names_the_problem_without_json() -> None:
    result = run("hearth", "ask", "--route", "sideways", "hi")
    assert result.returncode == 2 and result.stdout == ""
    assert "sideways" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["hearth", "hearth-node"])
def test_both_commands_tell_their_version(command: str) -> None:
    result = run(command, "--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"{command} 0.1.0"


def test_config_set_changes_validated_settings_and_keeps_the_rest(tmp_path, tiny_models) -> None:
    home = tmp_path / "phone"
    run("hearth", "init", "--json", "--home", str(home))
    config = home / "config.toml"
    config.write_text(
        config.read_text() + '# my servers\n[[mcp]]\nname = "t"\ncommand = ["true"]\n'
    )
    _, q4 = tiny_models
    ok = run("hearth", "config", "set", "model", str(q4), "--json", "--home", str(home))
    assert ok.returncode == 0 and one_json(ok.stdout)["value"] == str(q4.resolve())
    steps = run("hearth", "config", "set", "limits.max_steps", "6", "--home", str(home))
    assert steps.returncode == 0
    shown = one_json(run("hearth", "config", "get", "--json", "--home", str(home)).stdout)
    assert shown["limits.max_steps"] == 6 and shown["api_port"] == 7733
    assert "# my servers" in config.read_text() and 'name = "t"' in config.read_text()
    assert config.stat().st_mode & 0o077 == 0
    for key, value, problem in [
        ("model", str(config), "not a GGUF"),
        ("model", str(tmp_path / "missing.gguf"), "no file"),
        ("api_port", "99999", "api_port"),
        ("limits.max_steps", "many", "max_steps"),
        ("colour", "blue", "unknown setting"),
    ]:
        bad = run("hearth", "config", "set", key, value, "--json", "--home", str(home))
        assert bad.returncode == 9, (key, value)
        assert problem in one_json(bad.stdout)["error"]["message"]
    port = run("hearth", "config", "get", "api_port", "--json", "--home", str(home))
    assert one_json(port.stdout)["value"] == 7733


def test_no_local_model_points_to_config_set_which_then_works(tmp_path, tiny_models) -> None:
    home = tmp_path / "phone"
    run("hearth", "init", "--json", "--home", str(home))
    ask = ("hearth", "ask", "--route", "local", "--json", "--home", str(home), "hello")
    missing = run(*ask)
    assert missing.returncode == 7
    message = one_json(missing.stdout)["error"]["message"]
    assert "hearth config set model PATH" in message
    assert run("hearth", "config", "set", "model", str(tiny_models[1]), "--home", str(home))
    answered = run(*ask)
    assert answered.returncode == 0, answered.stdout + answered.stderr
    out = one_json(answered.stdout)
    assert out["route"] == "local" and out["reason"] == "local route requested"
    assert "n_ctx_seq" not in answered.stderr  # llama.cpp's own warnings stay out of sight


def test_status_with_nothing_paired_says_so(tmp_path) -> None:
    home = tmp_path / "phone"
    run("hearth", "init", "--json", "--home", str(home))
    result = run("hearth", "status", "--home", str(home))
    assert result.returncode == 0
    assert "not paired" in result.stdout and "hearth pair -" in result.stdout


def test_pair_from_stdin_prompts_on_a_terminal(tmp_path) -> None:
    home = tmp_path / "phone"
    run("hearth", "init", "--json", "--home", str(home))
    term = on_terminal(str(BIN / "hearth"), "pair", "-", "--home", str(home))
    term.expect("Paste the hearth://pair URI")
    term.type("hearth://pair?v=1&node=nope")
    assert term.finish() == 9
    assert "error (invalid_input)" in term.text()


def test_audit_shows_reasons_as_plain_text(tmp_path) -> None:
    home = tmp_path / "phone"
    run("hearth", "init", "--json", "--home", str(home))
    log = AuditLog(home)
    for reason in ("array[i] = x[j]", "closing [/] and [bold]markup[/bold]", "esc \x1b[2J"):
        log.append(AuditRecord("p1", "peer", "s1", "", "refused", reason, "refused"))
    result = run("hearth", "audit", "--verify", "--home", str(home))
    assert result.returncode == 0, result.stderr
    flat = " ".join(result.stdout.split())  # the table may wrap a long reason
    for shown in ("array[i] = x[j]", "[/]", "[bold]markup[/bold]", "\\x1b[2J"):
        assert shown in flat
    assert "\x1b" not in result.stdout


def test_audit_verify_tells_tampering_from_an_internal_error(tmp_path) -> None:
    home = tmp_path / "phone"
    run("hearth", "init", "--json", "--home", str(home))
    AuditLog(home).append(AuditRecord("p1", "peer", "s1", "", "run", "fine", "ok"))
    intact = run("hearth", "audit", "--verify", "--json", "--home", str(home))
    assert intact.returncode == 0 and one_json(intact.stdout)["verified"] is True
    with sqlite3.connect(home / "audit.db") as db:
        db.execute("UPDATE audit SET reason = 'nothing to see' WHERE seq = 1")
    tampered = run("hearth", "audit", "--verify", "--json", "--home", str(home))
    assert tampered.returncode == 11  # 1 is `internal`, a bug: never tampering
    out = one_json(tampered.stdout)
    assert out["verified"] is False and "edited" in out["problem"]
    (home / "audit.db").write_bytes(b"not a database at all" * 100)
    garbage = run("hearth", "audit", "--verify", "--json", "--home", str(home))
    assert garbage.returncode == 11 and one_json(garbage.stdout)["verified"] is False


def test_search_index_names_documents_without_the_exits_paths(tmp_path) -> None:
    node = tmp_path / "node"
    run("hearth-node", "init", "--json", "--home", str(node))
    notes = tmp_path / "private" / "notes"
    notes.mkdir(parents=True)
    (notes / "bread.md").write_text("# Sourdough\nfeed the starter daily\n")
    added = run("hearth-node", "index", "add", str(notes), "--json", "--home", str(node))
    assert added.returncode == 0, added.stderr
    from hearth.search.index import INDEX_FILE, FtsIndex

    [hit] = FtsIndex(node / INDEX_FILE).query("starter", 5)
    assert hit.url == "notes/bread.md"
    assert str(tmp_path) not in hit.url and "file:" not in hit.url


def test_help_names_config_and_demo_model() -> None:
    assert "config" in run("hearth", "--help").stdout
    demo = run("hearth", "demo", "--help")
    assert "--model" in demo.stdout
