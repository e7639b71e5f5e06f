"""Shared fixtures: one tiny-model build per session, processes cleaned up by PID."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hearth.companion import swarmkit
from hearth.protocol.model.tiny import make_tiny

from .installed import NOT_RUN, PREFIX, in_ci

pytest_plugins = ["tests.hostile.fixtures"]  # `hostile_bench`

# phones browse mDNS only inside the network namespaces a test makes for it
os.environ["HEARTH_NO_MDNS"] = "1"


def _installed_or_failed(report: Any) -> None:
    """Under CI=true a skip for something .ci/run installs is a failure."""
    if report.skipped and in_ci():
        reason = str(report.longrepr[2] if isinstance(report.longrepr, tuple) else "")
        if reason.removeprefix("Skipped: ").startswith(PREFIX):
            report.outcome = "failed"
            report.longrepr = f"CI=true, yet {reason.removeprefix('Skipped: ')}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    _installed_or_failed(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    report = yield
    _installed_or_failed(report)
    return report


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The closing lines say what did not run here, and why, grouped."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = str(longrepr[2] if isinstance(longrepr, tuple) else longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons and not NOT_RUN:
        terminalreporter.write_line("everything ran: nothing skipped")
        return
    terminalreporter.section("what did not run here")
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        terminalreporter.write_line(f"{count} skipped: {reason}")
    for part in NOT_RUN:
        terminalreporter.write_line(f"not run: {part}")


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """`tiny-bf16.gguf` and `tiny-q4_k_m.gguf`, built once per test session."""
    return make_tiny(tmp_path_factory.mktemp("models"))


class Processes(swarmkit.Processes):
    """Starts processes and kills every one it started, by PID, at teardown."""

    def probe(self, *args: str) -> subprocess.Popen[str]:
        return self.spawn(sys.executable, "-m", "hearth.protocol.transport.probe", *args)


@pytest.fixture
def processes() -> Iterator[Processes]:
    procs = Processes()
    try:
        yield procs
    finally:
        procs.cleanup()


@pytest.fixture
def bench(processes: Processes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A phone paired with the scripted hostile home (a `tests.hostile.harness.Bench`),
    found without mDNS (a module may override it with one bench for all its tests)."""
    from .hostile.harness import start_bench

    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    return start_bench(processes, tmp_path)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Debian Chromium (a Playwright `Browser`) for a module of browser tests."""
    from .pages import chromium  # Playwright is loaded only by the tests that drive a page

    with chromium() as launched:
        yield launched


def last_json(out: str) -> dict:
    """The last JSON line a probe printed."""
    return json.loads(out.strip().splitlines()[-1])
