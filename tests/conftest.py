"""Shared fixtures: one tiny-model build per session, processes cleaned up by PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hearth.protocol.model.tiny import make_tiny

# phones browse mDNS only inside the network namespaces a test makes for it
os.environ["HEARTH_NO_MDNS"] = "1"


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """`tiny-bf16.gguf` and `tiny-q4_k_m.gguf`, built once per test session."""
    return make_tiny(tmp_path_factory.mktemp("models"))


class Processes:
    """Starts processes and kills every one it started, by PID, at teardown."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def probe(self, *args: str) -> subprocess.Popen[str]:
        return self.spawn(sys.executable, "-m", "hearth.protocol.transport.probe", *args)

    def spawn(self, *cmd: str, **kw) -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **kw.pop("env", {})}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, **kw)
        self.started.append(proc)
        return proc

    def cleanup(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            if proc.stdout:
                proc.stdout.close()


@pytest.fixture
def processes() -> Iterator[Processes]:
    procs = Processes()
    try:
        yield procs
    finally:
        procs.cleanup()


def last_json(out: str) -> dict:
    """The last JSON line a probe printed."""
    return json.loads(out.strip().splitlines()[-1])
