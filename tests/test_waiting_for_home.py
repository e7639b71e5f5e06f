"""Waiting for home end to end (issue 20), real processes only: three requests made
while the home node is down are answered locally and kept; the companion is restarted
in between; when the node comes back they are delivered in the order they were asked,
each exactly once."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import urllib.request
from contextlib import closing
from pathlib import Path

import pytest

from hearth.companion.inbox import INBOX_FILE

from .nodes import BIN, init_phone, pair, start_companion, start_node, wait_until

QUESTIONS = (
    "compare the train prices and then book the cheapest",
    "find my flight times and then plan the transfers",
    "read the hotel offers and then book the closest",
)
WAIT_S = 60.0  # for the link to notice a change (keepalive, dial, backoff), on a loaded machine
DELIVERY_S = 240.0  # three plans on the node with the tiny model, on a loaded machine
STOP_S = 10.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def hearth(home: Path, *args: str) -> dict:
    """`hearth ARGS --json` for the phone `home`: its one JSON object."""
    result = subprocess.run(
        [str(BIN / "hearth"), *args, "--json", "--home", str(home)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    return json.loads(lines[0])


def home_reachable(home: Path) -> bool | None:
    [node] = hearth(home, "status")["nodes"]
    return node["reachable"]


def stop(proc: subprocess.Popen[str], signum: int) -> None:
    os.kill(proc.pid, signum)
    proc.wait(timeout=STOP_S)


def admitted(metrics_port: int) -> float:
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    [line] = [x for x in body.splitlines() if x.startswith("hearth_admitted_total ")]
    return float(line.split()[1])


@pytest.mark.timeout(900)
def test_three_requests_kept_while_the_home_is_down_are_delivered_in_order_once(
    processes, tmp_path: Path, tiny_models, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HEARTH_NO_MDNS", "1")
    listen = (f"/ip4/127.0.0.1/tcp/{free_port()}",)  # the same address after the restart
    model = ("--model", str(tiny_models[0]))
    node = start_node(processes, tmp_path / "node", *model, listen=listen)
    phone = tmp_path / "phone"
    init_phone(phone, tiny_models[1], noise=True)
    pair(phone, node.invite())
    companion = start_companion(processes, phone)
    wait_until(lambda: home_reachable(phone), "the link to the home", WAIT_S)

    stop(node.proc, signal.SIGKILL)
    wait_until(lambda: home_reachable(phone) is False, "the link to notice", WAIT_S)
    asked = []
    for question in QUESTIONS:
        local = hearth(phone, "ask", question, "--no")
        assert local["route"] == "local" and local["deferred"], local
        assert local["served_by"] == "companion", local
        assert "kept for the home node" in local["reason"], local
        asked.append(local["request_id"])
    assert len(set(asked)) == 3
    waiting = hearth(phone, "inbox")["waiting"]
    assert [w["request_id"] for w in waiting] == asked

    assert companion.stop() == 0  # SIGTERM; what waits is kept across the restart
    start_companion(processes, phone)
    assert [w["request_id"] for w in hearth(phone, "inbox")["waiting"]] == asked

    metrics_port = free_port()
    start_node(processes, node.home, *model, "--metrics-port", str(metrics_port), listen=listen)
    inbox = wait_until(
        lambda: (box := hearth(phone, "inbox"))["waiting"] == [] and box, "delivery", DELIVERY_S
    )
    assert inbox["dropped"] == [], inbox["dropped"]
    answered = inbox["answered"]  # newest first
    assert [a["request_id"] for a in reversed(answered)] == asked  # each exactly once
    assert all(a["route"] == "remote" for a in answered), answered
    with closing(sqlite3.connect(f"file:{phone / INBOX_FILE}?mode=ro", uri=True)) as db:
        delivered = [
            rid for (rid,) in db.execute(
                "SELECT request_id FROM requests WHERE state = 'answered' ORDER BY updated"
            )
        ]  # fmt: skip
    assert delivered == asked  # answered in the order they were asked
    assert admitted(metrics_port) == 3  # the node planned three sessions, none twice
    for request_id, conversation_id in ((a["request_id"], a["conversation_id"]) for a in answered):
        turns = hearth(phone, "conversations", conversation_id)["turns"]
        assert [(t["request_id"], t["route"]) for t in turns] == [
            (request_id, "local"),
            (request_id, "remote"),  # the home's answer joins the conversation, once
        ]
