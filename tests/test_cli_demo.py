"""`hearth demo` shows what it runs and what came back, honestly labelled."""

from __future__ import annotations

import subprocess

from .nodes import BIN


def test_the_demo_shows_its_commands_and_labels_noise() -> None:
    result = subprocess.run(
        [str(BIN / "hearth"), "demo"], capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout + result.stderr
    shown = " ".join(result.stdout.split())  # rich wraps long lines
    for expected in (
        "$ hearth-node init",
        "$ hearth pair - --json --home $PHONE",
        "$ hearth ask --yes --json --home $PHONE --route remote",
        "'Note that we need milk and remind me tomorrow at 9'",
        "answer (noise from a random-weight model)",
        "hearth demo --model PATH",
        "hash chain intact",
    ):
        assert expected in shown, expected
    assert "['" not in shown and "{'" not in shown  # no Python reprs


def test_the_demo_refuses_a_model_that_is_not_there(tmp_path) -> None:
    result = subprocess.run(
        [str(BIN / "hearth"), "demo", "--model", str(tmp_path / "none.gguf")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 9 and "no model file" in result.stderr
