"""`hearth demo` does what it says: each step's outcome is checked (the note and the
reminder on the phone's disk, answers in words, the fallback with its reason), and a
step that does not do it makes the demo exit non-zero."""

from __future__ import annotations

import subprocess

import pytest

from .nodes import BIN


@pytest.mark.timeout(900)
@pytest.mark.xfail(
    strict=True,
    reason="the micro-planner (38% exact on held-out requests) does not yet copy what it "
    "never saw: step 1 wrote the note 'we need milkolk' and a reminder for today 11:00, so "
    "the demo says NOT DONE and exits 1; issue 40 stays open",
)
def test_every_step_of_the_demo_does_what_it_says() -> None:
    result = subprocess.run(
        [str(BIN / "hearth"), "demo"], capture_output=True, text=True, timeout=840
    )
    assert result.returncode == 0, result.stdout + result.stderr
    shown = " ".join(result.stdout.split())  # rich wraps long lines
    for expected in (
        "$ hearth-node init",
        "$ hearth pair - --json --home $PHONE",
        "$ hearth ask --yes --json --home $PHONE --route remote",
        "'Note that we need milk and remind me tomorrow at 9'",
        "micro-model trained on synthetic requests for the built-in tools",
        "hearth models pull botpsy-0.8b",
        '1. done planned at home, run on the phone: the note "we need milk" is in its notes',
        "is set for tomorrow, ",
        ", 09:00",
        "2. done the phone's own model answered in words:",
        "3. done the phone answered alone (",
        'the note "buy bread" is in its notes',
        "Every step did what it says.",
        "hash chain intact",
    ):
        assert expected in shown, expected
    assert "NOT DONE" not in shown
    assert "['" not in shown and "{'" not in shown  # no Python reprs


@pytest.mark.timeout(900)
def test_a_step_that_does_not_do_what_it_says_fails_the_demo(tiny_models) -> None:
    """A random-weight model plans noise: the demo says which steps failed, exits 1."""
    result = subprocess.run(
        [str(BIN / "hearth"), "demo", "--model", str(tiny_models[1])],
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "NOT DONE" in result.stdout
    assert "did not do what it says" in result.stderr


def test_the_demo_refuses_a_model_that_is_not_there(tmp_path) -> None:
    result = subprocess.run(
        [str(BIN / "hearth"), "demo", "--model", str(tmp_path / "none.gguf")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 9 and "no model file" in result.stderr
