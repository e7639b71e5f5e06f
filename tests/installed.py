"""What `.ci/run` installs, and what a test does without it: where a developer may lack
it the test is skipped with the reason; under `CI=true` (the set-up ran, so it broke)
the same skip is a failure. Parts of a test that could not run here (a chaos run's
event kinds that need root) are kept in `NOT_RUN` and listed in the suite's closing
lines with the skips (`conftest.pytest_terminal_summary`)."""

from __future__ import annotations

import os

PREFIX = "not installed: "  # a skip reason that names something .ci/run installs
NOT_RUN: list[str] = []  # "what did not run: why", from tests that ran the rest


def missing(what: str) -> str:
    """The skip reason for `what` (.ci/run installs it) being missing."""
    return PREFIX + what


def in_ci() -> bool:
    """Whether the suite runs in CI, after `.ci/run` installed everything."""
    return os.environ.get("CI") == "true"
