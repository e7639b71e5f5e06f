"""Requests kept for the home node: sent in order, each at most once (also across a
companion killed mid-send), and dropped with a note when too old."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
import trio

from hearth.companion.events import AskRequest
from hearth.companion.inbox import Inbox, Kept, NotSent, deliver
from hearth.companion.results import AskResult
from hearth.protocol.wire.errors import ErrorCode, HearthError

DAY = 86400.0


def keep_three(home, since: float = 0.0) -> None:
    inbox = Inbox(home, DAY)
    now = since or time.time()
    for n in (1, 2, 3):
        inbox.keep(f"r{n}", "c1", AskRequest(text=f"request {n}"), now + n)
    inbox.keep("r1", "c1", AskRequest(text="again"), now)  # the same id is kept once
    inbox.close()


def answer(kept: Kept) -> AskResult:
    return AskResult(request_id=kept.request_id, route="remote", answer=kept.request.text)


def test_delivered_in_order_once_after_a_reopen(tmp_path) -> None:
    keep_three(tmp_path)
    inbox = Inbox(tmp_path, DAY)  # the companion restarted
    assert [w.text for w in inbox.view().waiting] == ["request 1", "request 2", "request 3"]
    sent: list[str] = []

    async def send(kept: Kept) -> AskResult:
        sent.append(kept.request_id)
        return answer(kept)

    report = trio.run(deliver, inbox, send)
    assert report.answered == sent == ["r1", "r2", "r3"]
    assert trio.run(deliver, inbox, send).answered == []  # nothing twice
    view = inbox.view()
    assert view.waiting == [] and [a.answer for a in view.answered][::-1] == [
        "request 1",
        "request 2",
        "request 3",
    ]
    assert oct(os.stat(tmp_path / "inbox.db").st_mode & 0o777) == "0o600"


def test_a_request_that_never_left_waits_again_and_keeps_its_place(tmp_path) -> None:
    keep_three(tmp_path)
    inbox = Inbox(tmp_path, DAY)
    link_up = False
    sent: list[str] = []

    async def send(kept: Kept) -> AskResult:
        if not link_up:
            raise NotSent
        sent.append(kept.request_id)
        return answer(kept)

    assert trio.run(deliver, inbox, send).stopped == "not-sent"
    assert [w.request_id for w in inbox.view().waiting] == ["r1", "r2", "r3"]
    link_up = True
    assert trio.run(deliver, inbox, send).answered == sent == ["r1", "r2", "r3"]


def test_a_home_error_drops_that_request_with_a_note_and_the_rest_go_on(tmp_path) -> None:
    keep_three(tmp_path)
    inbox = Inbox(tmp_path, DAY)

    async def send(kept: Kept) -> AskResult:
        if kept.request_id == "r2":
            raise HearthError(ErrorCode.PLAN_REJECTED, "bad plan")
        return answer(kept)

    report = trio.run(deliver, inbox, send)
    assert report.answered == ["r1", "r3"] and report.dropped == ["r2"]
    (dropped,) = inbox.view().dropped
    assert dropped.request_id == "r2" and "bad plan" in dropped.note


SENDER = """
import sys, time, trio
from pathlib import Path
from hearth.companion.inbox import Inbox, deliver
from hearth.companion.results import AskResult

async def send(kept):
    if kept.request_id == "r2":
        print("sending", flush=True)
        await trio.sleep(600)  # killed here, mid-send
    return AskResult(request_id=kept.request_id, answer="first run")

trio.run(deliver, Inbox(Path(sys.argv[1]), 86400.0), send)
"""


@pytest.mark.timeout(120)
def test_a_companion_killed_mid_send_never_sends_that_request_again(tmp_path) -> None:
    keep_three(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-c", SENDER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "sending\n"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()  # type: ignore[union-attr]
    inbox = Inbox(tmp_path, DAY)  # the companion starts again
    sent: list[str] = []

    async def send(kept: Kept) -> AskResult:
        sent.append(kept.request_id)
        return answer(kept)

    trio.run(deliver, inbox, send)
    assert sent == ["r3"]  # r1 went before the kill, r2 may have reached the node
    view = inbox.view()
    assert [a.request_id for a in view.answered] == ["r3", "r1"]
    (dropped,) = view.dropped
    assert dropped.request_id == "r2" and "not sent again" in dropped.note


def test_requests_older_than_the_policy_limit_are_dropped_with_a_note(tmp_path) -> None:
    now = time.time()
    inbox = Inbox(tmp_path, 3600.0)
    inbox.keep("old", None, AskRequest(text="stale"), now - 7200)
    inbox.keep("new", None, AskRequest(text="fresh"), now - 60)
    assert [k.request_id for k in inbox.due(now)] == ["new"]
    view = inbox.view()
    assert [w.request_id for w in view.waiting] == ["new"]
    (dropped,) = view.dropped
    assert dropped.request_id == "old" and "waited longer than 1 h" in dropped.note
    assert view.model_dump(mode="json")["dropped"][0]["text"] == "stale"


OPENER = """
import sys, trio
from pathlib import Path
from hearth.companion.inbox import Inbox, deliver

async def send(kept):
    raise AssertionError("a second sender ran")

inbox = Inbox(Path(sys.argv[1]), 86400.0)  # `hearth inbox`, an app's companion…
print(trio.run(deliver, inbox, send).stopped)
"""


@pytest.mark.timeout(120)
def test_another_process_opening_the_inbox_mid_send_neither_drops_nor_sends_it(tmp_path) -> None:
    keep_three(tmp_path)
    inbox = Inbox(tmp_path, DAY)
    seen: list[str] = []

    async def send(kept: Kept) -> AskResult:
        if kept.request_id == "r2":
            opened = await trio.run_process(
                [sys.executable, "-c", OPENER, str(tmp_path)], capture_stdout=True
            )
            seen.append(opened.stdout.decode().strip())
        return answer(kept)

    assert trio.run(deliver, inbox, send).answered == ["r1", "r2", "r3"]
    assert seen == ["elsewhere"]
    view = inbox.view()
    assert view.dropped == [] and [a.request_id for a in view.answered] == ["r3", "r2", "r1"]


def test_a_request_kept_at_a_time_now_in_the_future_is_dropped_not_kept_forever(
    tmp_path,
) -> None:
    now = time.time()
    inbox = Inbox(tmp_path, 3600.0)
    inbox.keep("skewed", None, AskRequest(text="clock was a year ahead"), now + 365 * DAY)
    inbox.keep("jitter", None, AskRequest(text="clock a minute ahead"), now + 60)
    assert [k.request_id for k in inbox.due(now)] == ["jitter"]
    (dropped,) = inbox.view().dropped
    assert dropped.request_id == "skewed" and "age is unknown" in dropped.note


@pytest.mark.timeout(60)
def test_a_request_that_grows_too_old_while_others_are_sent_is_dropped(tmp_path) -> None:
    now = time.time()
    inbox = Inbox(tmp_path, 3600.0)
    inbox.keep("first", None, AskRequest(text="slow"), now)
    inbox.keep("second", None, AskRequest(text="almost too old"), now - 3600 + 1)

    async def send(kept: Kept) -> AskResult:
        await trio.sleep(2)  # the home takes its time with the first
        return answer(kept)

    report = trio.run(deliver, inbox, send)
    assert report.answered == ["first"]
    (dropped,) = inbox.view().dropped
    assert dropped.request_id == "second" and "waited longer than 1 h" in dropped.note
