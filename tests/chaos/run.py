"""Chaos run (issue 33): `python -m tests.chaos.run --seed S --points N [--keep DIR]`.

A phone home paired with a home node (the scripted home of `tests/hostile/`, so the plans
are known: each request's plan reads the notes, writes two notes over two rounds and
sends a message into the outbox, every value naming the request), a resident companion
(`hearth serve`) and a workload of `hearth ask` requests that go to the home, or wait
for it in the inbox while it is away. At each of N points, at a random moment of a
request, the driver does one event: SIGKILL the companion or the node and restart it,
drop the link between them (a veth pair between two network namespaces, down then up:
root only) or fill the phone's home (a small tmpfs: root only) and free it again. A
friend's node (a real `hearth-node`, joined as a friend with `relay`, granted `planner`,
`plan_for_friends = true`, the tiny random-weight model) beside the home plans for the
phone while its home is down (`friend_planners = "when-home-unreachable"`); it is killed
and restarted as the others are.

After every event and at the end: no step ran twice (the notes and the outbox are
ledgers: each value names its request and step), no request vanished (each ended with
an answer or a typed error; each answered or deferred is in its conversation or the
inbox, and every request a note or a message names is: a client told "stopped
mid-request" before the companion recorded its request failed with a code, nothing
ran), no request told it failed (but "stopped mid-request") is kept in the inbox for
the home to answer later, `hearth audit --verify` holds, every database passes
`integrity_check`.
The friend's plans are random (random weights): their notes and messages are checked by
their step's key (a note id, an outbox file), the scripted home's by their values. The
companion's restart-to-serving times are reported, not asserted. Event kinds that cannot
run here are skipped and named. `--keep DIR` runs in DIR and leaves it (the homes, the
companion's log `serve.log`, the phone's home copied out of its tmpfs to `DIR/phone`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hearth.companion.audit import AuditLog
from hearth.companion.swarmkit import (
    BIN,
    Processes,
    init_phone,
    last_json,
    pair,
    run,
    start_node,
    wait_ready,
)
from hearth.protocol.model.tiny import make_tiny
from hearth.protocol.transport.addressbook import AddressBook
from hearth.protocol.wire.messages import PlanStep

from ..hostile.script import Round, Script
from ..netns import linked_namespaces, sh, skip_reason

ROOT = Path(__file__).resolve().parents[2]
EVENTS = ("kill_companion", "kill_node", "kill_friend", "link_down", "disk_full")
SCRIPTED_VALUE = re.compile(r"^[0-9a-f]{32}(:[ab])?$")  # a value naming its request
SCRIPT = Script(
    rounds=[
        Round(
            steps=[
                PlanStep(id="s1", tool="notes_search", arguments={"query": ""}),
                PlanStep(id="s2", tool="notes_create", arguments={"text": "{request_id}:a"}),
                PlanStep(
                    id="s3", tool="message_send", arguments={"to": "+49", "body": "{request_id}"}
                ),
            ]
        ),
        Round(steps=[PlanStep(id="s1", tool="notes_create", arguments={"text": "{request_id}:b"})]),
    ],
    answer="Done {request_id}.",
)


@dataclass
class Totals:
    """What a run counted."""

    seed: int
    points: int
    events: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    skipped: dict[str, str] = field(default_factory=dict)
    restart_s: list[float] = field(default_factory=list)
    restart_after_waiting_s: list[float] = field(default_factory=list)
    twice: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    failed_yet_kept: list[str] = field(default_factory=list)  # told failed, answered later
    broken: list[str] = field(default_factory=list)  # audit or a database

    def report(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "points": self.points,
            "events": dict(self.events),
            "skipped": self.skipped,
            "requests": dict(self.outcomes),
            "steps_run_twice": len(self.twice),
            "requests_lost": len(self.lost),
            "requests_failed_yet_kept": len(self.failed_yet_kept),
            "broken": self.broken,
            "restart_to_serving_s": spread(self.restart_s),
            "restart_after_waiting_for_an_in_process_ask_s": spread(self.restart_after_waiting_s),
            "details": {
                "twice": self.twice,
                "lost": self.lost,
                "failed_yet_kept": self.failed_yet_kept,
            },
        }


def spread(values: list[float]) -> dict[str, float | int | None]:
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "median": None, "max": None}
    return {"n": len(ordered), "median": ordered[len(ordered) // 2], "max": ordered[-1]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class World:
    """The processes of one run and how to kill, cut and fill them."""

    def __init__(self, processes: Processes, root: Path, rng: random.Random) -> None:
        self.processes = processes
        self.root = root
        self.rng = rng
        self.phone = root / "phonefs" / "phone"
        self.script = root / "script.json"
        self.port = free_port()
        self.friend_port = free_port()
        self.friend_home = root / "friend"
        self.friend: subprocess.Popen[str] | None = None
        self.model = root / "models"
        self.link: Any = None
        self.tmpfs = False
        self.node_home = root / "node"
        self.node: subprocess.Popen[str] | None = None
        self.companion: subprocess.Popen[str] | None = None
        self.node_peer = ""
        self.friend_peer = ""

    def prefix(self, side: str) -> list[str]:
        if self.link is None:
            return []
        return ["ip", "netns", "exec", self.link.a if side == "phone" else self.link.b]

    def node_addr(self, port: int | None = None) -> str:
        host = "127.0.0.1" if self.link is None else self.link.addr_b
        return f"/ip4/{host}/tcp/{port or self.port}"

    def setup(self, skipped: dict[str, str]) -> None:
        (self.root / "phonefs").mkdir()
        if os.geteuid() == 0:
            sh("mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(self.phone.parent))
            self.tmpfs = True
        else:
            skipped["disk_full"] = "needs root to mount a small tmpfs"
        node = start_node(self.processes, self.node_home)
        self.node_peer = node.peer_id
        self.model = make_tiny(self.model)[1]
        friend = self.friend_peer = self.join_friend(
            node.invite("--role", "friend", "--grant", "relay")
        )
        node_home = ("--home", str(self.node_home), "--json")
        run("hearth-node", "roster", "grant", friend, "planner", *node_home)
        self.start_friend(beside_setup=True)
        deadline = time.monotonic() + 120
        status = ("hearth-node", "status", "--json", "--home", str(self.friend_home))
        while "planner" not in last_json(run(*status))["roles"]:
            if time.monotonic() > deadline:
                raise RuntimeError("the home never gave the friend its planner role")
            time.sleep(0.2)  # the home pushes its roster to the friend  # fmt: skip
        init_phone(self.phone)
        pair(self.phone, node.invite())  # the roster the phone keeps names the friend's role
        run("hearth", "config", "set", "limits.max_value_chars", "40", "--home", str(self.phone))
        (self.phone / "policy.toml").write_text('friend_planners = "when-home-unreachable"\n')
        node.proc.terminate()
        node.proc.wait(timeout=30)
        self.kill(self.friend)  # restarted beside the home by `start_friend`
        self.script.write_text(SCRIPT.model_dump_json())
        book = AddressBook(self.phone)
        book.remember(self.node_peer, [self.node_addr()])
        book.remember(friend, [self.node_addr(self.friend_port)])

    def join_friend(self, invite: str) -> str:
        """The friend's node joined to the home with `invite`: its peer id."""
        joined = run("hearth-node", "join", "-", "--json", "--home", str(self.friend_home),
                     stdin=invite + "\n")  # fmt: skip
        (self.friend_home / "config.toml").write_text("plan_for_friends = true\n")
        return str(last_json(joined)["peer_id"])

    def start_friend(self, beside_setup: bool = False) -> None:
        """The friend's node: beside the home (its namespace), or on loopback beside the
        real home node of the setup, which gives it its role."""
        ready = self.friend_home / "ready.json"
        ready.unlink(missing_ok=True)
        where = "/ip4/127.0.0.1/tcp/0" if beside_setup else self.node_addr(self.friend_port)
        self.friend = self.processes.spawn(
            *([] if beside_setup else self.prefix("node")), str(BIN / "hearth-node"), "serve",
            "--home", str(self.friend_home), "--listen", where, "--no-mdns",
            "--model", str(self.model), "--ready-file", str(ready),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_ready(self.friend, ready, 120)

    def start_node(self) -> None:
        ready = self.root / "node-ready.json"
        ready.unlink(missing_ok=True)
        self.node = self.processes.spawn(
            *self.prefix("node"), sys.executable, "-m", "tests.hostile.node", str(self.node_home),
            "--script", str(self.script), "--log", str(self.root / "heard.jsonl"),
            "--listen", self.node_addr(), "--ready-file", str(ready),
            cwd=str(ROOT), env={"PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        wait_ready(self.node, ready, 60)

    def start_companion(self) -> tuple[float, bool]:
        """Start `hearth serve`: the seconds until it serves (its ready file is written),
        and whether it waited for an ask working in its own process meanwhile."""
        ready = self.root / "serve-ready.json"
        ready.unlink(missing_ok=True)
        log = self.root / "serve.log"
        started = log.stat().st_size if log.exists() else 0
        t0 = time.monotonic()
        with log.open("a") as err:  # every start's log, kept for a companion that dies
            self.companion = self.processes.spawn(
                *self.prefix("phone"), str(BIN / "hearth"), "serve", "--home", str(self.phone),
                "--api-port", "0", "--ready-file", str(ready), stdout=subprocess.DEVNULL,
                stderr=err,
            )  # fmt: skip
        while not ready.exists():
            if self.companion.poll() is not None:
                raise RuntimeError(f"hearth serve exited {self.companion.returncode}: "
                                   f"{log.read_text()[-500:]}")  # fmt: skip
            time.sleep(0.01)
        return time.monotonic() - t0, "waiting for" in log.read_text()[started:]

    @staticmethod
    def kill(proc: subprocess.Popen[str] | None) -> None:
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)

    @contextlib.contextmanager
    def full_home(self) -> Iterator[None]:
        """The phone's home with no free byte, freed after."""
        filler = self.phone.parent / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as out:  # its close fails too
            while True:
                out.write(b"\0" * 65536)
                out.flush()
        try:
            yield
        finally:
            filler.unlink()


def request_text(n: int) -> str:
    return f"chaos {n}: note it and then text it"


def ask(world: World, n: int) -> subprocess.Popen[str]:
    return world.processes.spawn(
        str(BIN / "hearth"), "ask", request_text(n), "--yes", "--json",
        "--home", str(world.phone), stderr=subprocess.DEVNULL,
    )  # fmt: skip


def outcome_of(proc: subprocess.Popen[str]) -> tuple[str, dict[str, Any]]:
    try:
        out, _ = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        World.kill(proc)
        return "no answer (hung)", {}
    lines = out.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        return "no answer", {}
    if "error" in answer:
        return f"failed: {answer['error']['code']}", answer
    return ("deferred" if answer.get("deferred") else "answered"), answer


def ledger_twice(phone: Path) -> list[str]:
    """Notes and messages written more than once: a scripted value (it names its request
    and step) twice, or a note id (its step's key) twice."""
    data = phone / "data"
    notes_file = data / "notes.json"
    notes = json.loads(notes_file.read_text()) if notes_file.exists() else []
    values = [n["text"] for n in notes]
    outbox = data / "outbox"
    if outbox.exists():
        values += [json.loads(p.read_text())["body"] for p in outbox.glob("*.json")]
    values = [v for v in values if SCRIPTED_VALUE.match(v)] + [f"note {n['id']}" for n in notes]
    return [value for value, count in Counter(values).items() if count > 1]


def effects_of(phone: Path) -> set[str]:
    """The request ids the scripted home's notes and messages name (each value names
    its request): the requests that ran a step."""
    data = phone / "data"
    notes_file = data / "notes.json"
    values = [n["text"] for n in json.loads(notes_file.read_text())] if notes_file.exists() else []
    outbox = data / "outbox"
    if outbox.exists():
        values += [json.loads(p.read_text())["body"] for p in outbox.glob("*.json")]
    return {v.split(":")[0] for v in values if SCRIPTED_VALUE.match(v)}


def recorded_ids(phone: Path) -> set[str]:
    """Every request id in a conversation turn or in the inbox."""
    ids = set()
    for name, query in (
        ("conversations.db", "SELECT request_id FROM turns"),
        ("inbox.db", "SELECT request_id FROM requests"),
    ):
        con = sqlite3.connect(f"file:{phone / name}?mode=ro", uri=True, timeout=10)
        ids |= {rid for (rid,) in con.execute(query)}
        con.close()
    return ids


def databases_broken(phone: Path) -> list[str]:
    broken = []
    for db in sorted(phone.glob("*.db")):
        try:
            con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
            ok = con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            con.close()
        except sqlite3.Error as exc:
            ok, db = False, Path(f"{db}: {exc}")
        if not ok:
            broken.append(str(db))
    return broken


def audit_holds(phone: Path) -> bool:
    """`hearth audit --verify`'s check, read beside the running companion."""
    return AuditLog(phone).verify()[0]


def kept_texts(phone: Path) -> set[str]:
    """Every request text in the inbox (kept for the home, waiting or sent)."""
    con = sqlite3.connect(f"file:{phone / 'inbox.db'}?mode=ro", uri=True, timeout=10)
    texts = {
        json.loads(request)["text"] for (request,) in con.execute("SELECT request FROM requests")
    }
    con.close()
    return texts


def recorded_texts(phone: Path) -> set[str]:
    """Every request text in a conversation turn or in the inbox."""
    con = sqlite3.connect(f"file:{phone / 'conversations.db'}?mode=ro", uri=True, timeout=10)
    texts = {text for (text,) in con.execute("SELECT text FROM turns")}
    con.close()
    return texts | kept_texts(phone)


def check(world: World, totals: Totals, when: str) -> None:
    for value in ledger_twice(world.phone):
        if value not in totals.twice:
            totals.twice.append(value)
    totals.broken += [f"{when}: {db}" for db in databases_broken(world.phone)]
    if not audit_holds(world.phone):
        totals.broken.append(f"{when}: audit --verify")


def chaos(root: Path, seed: int, points: int, log: Any = sys.stderr) -> Totals:
    rng = random.Random(seed)
    totals = Totals(seed, points)
    kinds = list(EVENTS)
    with contextlib.ExitStack() as stack, Processes() as processes:
        world = World(processes, root, rng)
        if os.geteuid() == 0:  # the tmpfs setup mounts, gone at the end (lazily: files open)
            stack.callback(subprocess.run, ["umount", "-l", str(world.phone.parent)], check=False)
        if (why := skip_reason()) is None:
            world.link = stack.enter_context(linked_namespaces(subnet=241))
        else:
            totals.skipped["link_down"] = why
        world.setup(totals.skipped)
        if world.tmpfs:  # the phone's home outlives its tmpfs (read a run kept with --keep)
            keep = shutil.ignore_patterns("*.sock")  # (a socket is not copied)
            stack.callback(shutil.copytree, world.phone, root / "phone", ignore=keep)
        kinds = [k for k in kinds if k not in totals.skipped]
        world.start_node()
        world.start_friend()
        world.start_companion()
        asked: dict[str, str] = {}
        stopped: set[str] = set()  # told the companion stopped mid-request: its end unknown
        for n in range(points):
            kind = rng.choice(kinds)
            proc = ask(world, n)
            time.sleep(rng.uniform(0.0, 2.5))  # a random moment of the request
            totals.events[kind] += 1
            if kind == "kill_companion":
                world.kill(world.companion)
                took, waited = world.start_companion()
                (totals.restart_after_waiting_s if waited else totals.restart_s).append(took)
            elif kind == "kill_node":
                world.kill(world.node)
                time.sleep(rng.uniform(0.0, 3.0))  # a while away: the friend plans
                world.start_node()
            elif kind == "kill_friend":
                world.kill(world.friend)
                world.start_friend()
            elif kind == "link_down":
                world.link.cut_silently()
                time.sleep(rng.uniform(0.5, 3.0))
                sh("ip", "netns", "exec", world.link.a, "ip", "link", "set", world.link.dev_a, "up")
            if kind == "disk_full":
                with world.full_home():
                    outcome, answer = outcome_of(proc)
                    full_outcome, _ = outcome_of(ask(world, 10_000 + n))  # asked while full
                    totals.outcomes[f"asked while the disk is full: {full_outcome}"] += 1
                    asked[request_text(10_000 + n)] = full_outcome
            else:
                outcome, answer = outcome_of(proc)
            if outcome == "answered" and answer.get("planner") == world.friend_peer:
                outcome = "answered, planned by the friend"
            text = request_text(n)
            asked[text] = outcome
            if "stopped mid-request" in str(answer.get("error", {}).get("message")):
                stopped.add(text)
            totals.outcomes[outcome] += 1
            if outcome.startswith("no answer"):
                totals.lost.append(f"{text}: {outcome}")
            if world.companion is not None and world.companion.poll() is not None:
                why = (root / "serve.log").read_text().strip().splitlines()[-3:]
                totals.broken.append(f"point {n}: the companion died by itself: {why}")
                world.start_companion()
            check(world, totals, f"point {n} ({kind})")
            log.write(f"{n} {kind} {outcome}\n")
            if n % 10 == 9:  # totals so far, in case the run is stopped
                log.write(json.dumps(totals.report()) + "\n")
            log.flush()
        time.sleep(3)  # the inbox delivers what waited, the link being up
        recorded, kept = recorded_texts(world.phone), kept_texts(world.phone)
        totals.failed_yet_kept += [
            f"{text}: {outcome}, yet kept for the home"
            for text, outcome in asked.items()
            if outcome.startswith("failed") and text in kept and text not in stopped
        ]
        for text, outcome in asked.items():
            if (outcome.startswith("answered") or outcome == "deferred") and text not in recorded:
                totals.lost.append(f"{text}: {outcome}, but in no conversation")
        # a client told "stopped mid-request" of a request the companion had not yet
        # recorded failed with a code; what ran for it cannot lack a record:
        totals.lost += [
            f"request {rid}: its notes or messages exist, but it is in no conversation"
            for rid in sorted(effects_of(world.phone) - recorded_ids(world.phone))
        ]
        check(world, totals, "end")
        world.kill(world.companion)
        world.kill(world.node)
        world.kill(world.friend)
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="run in this new directory and keep it")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up mounts and namespaces
    if args.keep:
        args.keep.mkdir(parents=True)
        totals = chaos(args.keep.resolve(), args.seed, args.points)
    else:
        with tempfile.TemporaryDirectory(prefix="hearth-chaos-") as tmp:
            totals = chaos(Path(tmp), args.seed, args.points)
    print(json.dumps(totals.report()))


if __name__ == "__main__":
    main()
