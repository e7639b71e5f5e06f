"""A home node and its phones on this machine, as real processes: the one way the
tests, the benchmarks and `hearth demo` start `hearth-node serve`, wait for its ready
file, pair phones and run `hearth` / `hearth-node` commands.

It drives the two CLIs from this interpreter's `bin/` and never imports `node/`;
libp2p is imported only by `pair_in_process`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

BIN = Path(sys.executable).parent
LOOPBACK = ("/ip4/127.0.0.1/tcp/0",)
READY_TIMEOUT_S = 120.0  # a node loading a model on a loaded machine
COMMAND_TIMEOUT_S = 300.0

JsonObject = dict[str, Any]
Announce = Callable[[Sequence[str]], None]  # shown a command before it starts


class KitError(RuntimeError):
    """A command failed or a process did not become ready; the message says which."""


class Processes:
    """Starts processes and kills every one still running, by PID, at `cleanup`."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[str]] = []

    def spawn(
        self,
        *cmd: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        stdin: int | IO[Any] | None = None,
        stdout: int | IO[Any] | None = subprocess.PIPE,
        stderr: int | IO[Any] | None = None,
    ) -> subprocess.Popen[str]:
        """`cmd` started with this environment plus `env` (output unbuffered)."""
        proc = subprocess.Popen(
            cmd,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            cwd=cwd,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            text=True,
        )
        self.started.append(proc)
        return proc

    def cleanup(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()
        self.started.clear()

    def __enter__(self) -> Processes:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.cleanup()


def run(
    *args: str,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    timeout: float = COMMAND_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """`hearth …` or `hearth-node …` (args[0] names which) run to its end; with `check`,
    a non-zero exit status is a `KitError` carrying both outputs."""
    result = subprocess.run(
        [str(BIN / args[0]), *args[1:]],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )
    if check and result.returncode != 0:
        raise KitError(f"{args}: exit {result.returncode}\n{result.stdout}\n{result.stderr}")
    return result


def _json_object(text: str, source: object) -> JsonObject:
    try:
        out = json.loads(text)
    except ValueError:
        out = None
    if not isinstance(out, dict):
        raise KitError(f"{source}: not a JSON object: {text[:200]!r}")
    return out


def last_json(result: subprocess.CompletedProcess[str]) -> JsonObject:
    """The JSON object on the last line a `--json` command printed (an error object too)."""
    lines = result.stdout.strip().splitlines()
    if not lines:
        raise KitError(f"{result.args}: printed nothing\n{result.stderr.strip()[-2000:]}")
    return _json_object(lines[-1], result.args)


def wait_ready(
    proc: subprocess.Popen[Any], ready: Path, timeout: float = READY_TIMEOUT_S
) -> JsonObject:
    """The JSON object a starting process wrote to its ready file, once it is there; the
    process must stay up meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        if ready.exists():
            return _json_object(ready.read_text(), ready)  # written atomically
        if proc.poll() is not None:
            raise KitError(f"{proc.args!r} exited with {proc.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise KitError(f"{proc.args!r} was not ready within {timeout:.0f} s")
        time.sleep(0.05)


@dataclass
class RunningNode:
    """A `hearth-node serve` process and what its ready file said."""

    home: Path
    proc: subprocess.Popen[str]
    ready: JsonObject  # `peer_id`, `addrs` (full multiaddrs), ...

    @property
    def peer_id(self) -> str:
        return str(self.ready["peer_id"])

    @property
    def addrs(self) -> list[str]:
        return [str(addr) for addr in self.ready["addrs"]]

    def invite(self, *args: str) -> str:
        """A one-time invite URI (`hearth-node invite`, for a phone unless `args` say)."""
        uri = last_json(run("hearth-node", "invite", "--json", "--home", str(self.home), *args))
        return str(uri["uri"])

    def status(self) -> JsonObject:
        return last_json(run("hearth-node", "status", "--json", "--home", str(self.home)))


def start_node(
    processes: Processes,
    home: Path,
    *extra: str,
    config: str = "",
    name: str = "home",
    prefix: Sequence[str] = (),
    listen: Sequence[str] = LOOPBACK,
    mdns: bool = False,
    announce: Announce | None = None,
    stderr: int | IO[Any] = subprocess.DEVNULL,
    timeout: float = READY_TIMEOUT_S,
) -> RunningNode:
    """`hearth-node serve` for `home` (`hearth-node init` first if it is new), started
    under `prefix` (say, `ip netns exec NS`), listening on `listen` plus whatever `extra`
    adds, advertising on mDNS only with `mdns`; `config` replaces config.toml when given;
    its log goes to `stderr`."""
    if not (home / "identity.key").exists():
        run("hearth-node", "init", "--home", str(home), "--name", name)
    if config:
        (home / "config.toml").write_text(config)
    ready = home / "ready.json"
    ready.unlink(missing_ok=True)
    args = (
        "hearth-node", "serve", "--home", str(home),
        *(arg for addr in listen for arg in ("--listen", addr)),
        *(() if mdns else ("--no-mdns",)), "--ready-file", str(ready), *extra,
    )  # fmt: skip
    if announce is not None:
        announce(args)
    proc = processes.spawn(
        *prefix, str(BIN / args[0]), *args[1:], stdout=subprocess.DEVNULL, stderr=stderr
    )
    info = wait_ready(proc, ready, timeout)
    if not isinstance(info.get("peer_id"), str) or not isinstance(info.get("addrs"), list):
        raise KitError(f"{ready}: no peer_id and addrs in {info}")
    return RunningNode(home, proc, info)


@dataclass
class RunningCompanion:
    """A `hearth serve` process and what its ready file said."""

    home: Path
    proc: subprocess.Popen[str]
    ready: JsonObject  # `peer_id`, `api` (its URL, or None), `socket`

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 10.0) -> int:
        """Signal it and wait for its exit status."""
        os.kill(self.proc.pid, signum)
        return self.proc.wait(timeout=timeout)


def start_companion(
    processes: Processes,
    home: Path,
    *extra: str,
    api_port: int = 0,
    prefix: Sequence[str] = (),
    stderr: int | IO[Any] = subprocess.DEVNULL,
    timeout: float = READY_TIMEOUT_S,
) -> RunningCompanion:
    """`hearth serve` for the phone `home` (already made), its API on `api_port` (0: a
    free port), started under `prefix` (as `start_node`'s), once it is ready."""
    ready = home / "serve-ready.json"
    ready.unlink(missing_ok=True)
    proc = processes.spawn(
        *prefix, str(BIN / "hearth"), "serve", "--home", str(home), "--api-port", str(api_port),
        "--ready-file", str(ready), *extra, stdout=subprocess.DEVNULL, stderr=stderr,
    )  # fmt: skip
    return RunningCompanion(home, proc, wait_ready(proc, ready, timeout))


def init_phone(home: Path, model: Path | None = None, *, noise: bool = False) -> JsonObject:
    """`hearth init` for `home` (with `model` as its local model). `noise`: the model has
    random weights, which never end a text value on their own, so values are capped."""
    with_model = ("--model", str(model)) if model else ()
    out = last_json(run("hearth", "init", *with_model, "--json", "--home", str(home)))
    if noise:
        run("hearth", "config", "set", "limits.max_value_chars", "40", "--home", str(home))
    return out


def pair(home: Path, uri: str) -> JsonObject:
    """`hearth pair -` with the invite `uri` on standard input; its `--json` answer."""
    return last_json(run("hearth", "pair", "-", "--json", "--home", str(home), stdin=uri + "\n"))


def pair_in_process(home: Path, uri: str, name: str = "phone") -> str:
    """Pair `home` as a phone from this process (protocol/ only, no `hearth` CLI): makes
    its identity, redeems `uri` and stores the pairing; the phone's peer id."""
    from hearth.protocol.transport.keys import create_identity
    from hearth.protocol.transport.pairing import pair_home
    from hearth.protocol.wire.identity import peer_id_of

    key = create_identity(home)
    pair_home(home, uri, key, name, "phone")
    return peer_id_of(key)
