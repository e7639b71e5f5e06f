"""Requests kept for the home node while it is away, and what came back (SQLite, 0600).

When the home is unreachable and the router would have sent a request there, the
phone answers locally and, where the policy allows (`wait_for_home`), `keep`s the
request under its original id. When the link comes back the resident companion
calls `deliver`, which sends what waits in the order it was kept, each at most once:

    waiting ──claim──▶ sending ──answered──▶ answered
       ▲                  │ └───failed────▶ dropped (with a note)
       └──── NotSent ─────┘

A request is marked `sending` (committed) before a byte of it leaves. `send` raises
`NotSent` when nothing left the phone (the link went down again before the request
was written): it waits again, and delivery stops there so the order holds. One
process delivers at a time (it holds an exclusive lock on `inbox.lock`; the lock dies
with it), so any other process may open the inbox. The node keeps no memory of
request ids, so a request that the next sender finds `sending` (its sender died
mid-send) may or may not have reached it: it is dropped with a note, never sent
twice. A request older than `wait_for_home_max_age` when its turn comes is dropped
with a note instead of being sent, and so is one kept at a time the clock now puts in
the future (the clock was changed since: its age is unknown).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Literal

import anyio
from pydantic import BaseModel, ConfigDict, Field

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .events import AskRequest
from .formats import migrate
from .journal import connect
from .results import AskResult

INBOX_FILE = "inbox.db"
LOCK_FILE = "inbox.lock"  # held by the process that delivers
CLOCK_SLACK_S = 300.0  # how far in the future a request's time may be (clock adjustments)
MAX_WAITING = 100  # requests kept at once
KEEP_DONE = 200  # answered and dropped requests kept for `hearth inbox`

SCHEMA = """
CREATE TABLE IF NOT EXISTS requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL UNIQUE,
    conversation_id TEXT,
    request TEXT NOT NULL,
    since REAL NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('waiting', 'sending', 'answered', 'dropped')),
    result TEXT,
    note TEXT,
    updated REAL NOT NULL
);
"""


class NotSent(Exception):
    """Raised by `send` when the request never left the phone: it waits again."""


class _View(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WaitingView(_View):
    """A request waiting for the home node."""

    request_id: str
    conversation_id: str | None = None
    text: str
    since: float


class DroppedView(WaitingView):
    """A request that will not be sent, and why."""

    note: str


class InboxResult(_View):
    """`hearth inbox --json`."""

    waiting: list[WaitingView] = Field(default_factory=list)
    answered: list[AskResult] = Field(default_factory=list)
    dropped: list[DroppedView] = Field(default_factory=list)


class Kept(BaseModel):
    """A request due for the home node."""

    model_config = ConfigDict(frozen=True)

    request_id: str
    conversation_id: str | None
    request: AskRequest
    since: float


class DeliveryReport(BaseModel):
    """What one `deliver` did."""

    answered: list[str] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    stopped: Literal["done", "not-sent", "elsewhere"] = "done"  # elsewhere: another process sends


Send = Callable[[Kept], Awaitable[AskResult]]


class Inbox:
    """The requests kept for the home node, under the phone's home."""

    def __init__(self, home: Path, max_age_s: float) -> None:
        self.db = connect(home / INBOX_FILE)
        migrate(self.db, home / INBOX_FILE, SCHEMA)
        self.lock_path = home / LOCK_FILE
        self.max_age_s = max_age_s
        self.delivering = anyio.Lock()  # one delivery at a time keeps the order

    def keep(
        self, request_id: str, conversation_id: str | None, request: AskRequest, since: float
    ) -> None:
        """Keep `request` for the home (once per request id)."""
        (waiting,) = self.db.execute(
            "SELECT COUNT(*) FROM requests WHERE state = 'waiting'"
        ).fetchone()
        if waiting >= MAX_WAITING:
            raise HearthError(ErrorCode.BUSY, f"{waiting} requests already wait for the home node")
        self.db.execute(
            "INSERT OR IGNORE INTO requests"
            " (request_id, conversation_id, request, since, state, updated)"
            " VALUES (?, ?, ?, ?, 'waiting', ?)",
            (request_id, conversation_id, request.model_dump_json(), since, time.time()),
        )

    @contextlib.contextmanager
    def sender(self) -> Iterator[bool]:
        """Whether this process may deliver now: for the block, it holds the exclusive lock
        (False: another process delivers). A request the holder finds `sending` was
        caught mid-send by a dead sender and may have reached the node: dropped, never
        sent again."""
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            self._drop("state = 'sending'", (), "interrupted while being sent; not sent again")
            yield True
        finally:
            os.close(fd)  # and with it the lock

    def due(self, now: float | None = None) -> list[Kept]:
        """What waits, oldest first; what waited too long, or was kept at a time now in
        the future (its age is unknown), is dropped with a note first."""
        now = time.time() if now is None else now
        self._drop(
            "state = 'waiting' AND since < ?",
            (now - self.max_age_s,),
            f"waited longer than {self.max_age_s / 3600:g} h for the home node; not sent",
        )
        self._drop(
            "state = 'waiting' AND since > ?",
            (now + CLOCK_SLACK_S,),
            "kept at a time the clock now puts in the future (it was changed): its age is"
            " unknown; not sent",
        )
        rows = self.db.execute(
            "SELECT request_id, conversation_id, request, since FROM requests"
            " WHERE state = 'waiting' ORDER BY seq"
        ).fetchall()
        return [
            Kept(
                request_id=rid,
                conversation_id=conversation,
                request=AskRequest.model_validate_json(body),
                since=since,
            )
            for rid, conversation, body, since in rows
        ]

    def claim(self, request_id: str) -> bool:
        """waiting → sending, committed before it is sent; False if it was not waiting
        (someone else claimed it, or it was answered or dropped)."""
        return self._move(request_id, "waiting", "sending")

    def unclaim(self, request_id: str) -> None:
        """sending → waiting: it never left the phone."""
        self._move(request_id, "sending", "waiting")

    def answered(self, request_id: str, result: AskResult) -> None:
        """sending → answered, with the home's answer."""
        self._move(request_id, "sending", "answered", result=result.model_dump_json())

    def failed(self, request_id: str, note: str) -> None:
        """sending → dropped: it left, and the home did not answer it."""
        self._move(request_id, "sending", "dropped", note=note)

    def view(self) -> InboxResult:
        """What waits, what came back and what was dropped (newest answers first)."""
        rows = self.db.execute(
            "SELECT request_id, conversation_id, request, since, state, result, note"
            " FROM requests ORDER BY seq"
        ).fetchall()
        out = InboxResult()
        for rid, conversation, body, since, state, result, note in rows:
            text = AskRequest.model_validate_json(body).text
            seen = {"request_id": rid, "conversation_id": conversation, "text": text}
            if state in ("waiting", "sending"):
                out.waiting.append(WaitingView(**seen, since=since))
            elif state == "answered":
                out.answered.insert(0, AskResult.model_validate_json(result))
            else:
                out.dropped.insert(0, DroppedView(**seen, since=since, note=note or ""))
        return out

    def close(self) -> None:
        self.db.close()

    def _move(self, request_id: str, old: str, new: str, **columns: str) -> bool:
        sets = "".join(f", {name} = ?" for name in columns)
        moved = self.db.execute(
            f"UPDATE requests SET state = ?, updated = ?{sets} WHERE request_id = ? AND state = ?",
            (new, time.time(), *columns.values(), request_id, old),
        ).rowcount
        if new in ("answered", "dropped"):
            self._prune()
        return bool(moved)

    def _drop(self, where: str, params: tuple[float, ...], note: str) -> None:
        self.db.execute(
            f"UPDATE requests SET state = 'dropped', note = ?, updated = ? WHERE {where}",
            (note, time.time(), *params),
        )
        self._prune()

    def _prune(self) -> None:
        self.db.execute(
            "DELETE FROM requests WHERE state IN ('answered', 'dropped') AND seq NOT IN"
            " (SELECT seq FROM requests WHERE state IN ('answered', 'dropped')"
            " ORDER BY seq DESC LIMIT ?)",
            (KEEP_DONE,),
        )


async def deliver(inbox: Inbox, send: Send) -> DeliveryReport:
    """Send what waits for the home, in order, each at most once (call it when the link
    to the home comes back). Stops at the first request that could not leave."""
    report = DeliveryReport()
    async with inbox.delivering:
        with inbox.sender() as sender:
            if not sender:
                report.stopped = "elsewhere"
                return report
            await _deliver(inbox, send, report)
    return report


async def _deliver(inbox: Inbox, send: Send, report: DeliveryReport) -> None:
    # one at a time: each request's age is checked when its turn comes, not when the
    # delivery began (the requests before it may take minutes each)
    while due := inbox.due():
        kept = due[0]
        if not inbox.claim(kept.request_id):  # not waiting any more: due() skips it next
            continue
        try:
            result = await send(kept)
        except NotSent:
            inbox.unclaim(kept.request_id)
            report.stopped = "not-sent"
            return
        except HearthError as exc:
            inbox.failed(kept.request_id, f"the home node did not answer: {exc.message}")
            report.dropped.append(kept.request_id)
            continue
        except BaseException:  # cancelled mid-send: it may have left, so never again
            inbox.failed(kept.request_id, "cancelled while being sent; not sent again")
            raise
        inbox.answered(kept.request_id, result)
        report.answered.append(kept.request_id)
