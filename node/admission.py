"""Admission: bounded concurrent sessions, a bounded queue, and a fair share per peer.

When a slot frees, the next session is taken round-robin across peers, so one
phone with many requests cannot starve another. Past the bounds a request gets
`busy` with a `retry_after` hint at once: when the queue is full, one opening after
each phone already told to come back that has not yet, so a crowd turned away returns
spread out at the rate places open (all at once, every phone but one would be turned
away again; all late, the node would sit idle).

A friend's phone (this node plans for it as a favour) comes after the node's own:
it gets a slot only when one is free at once, no own phone is waiting, the
friends' share (`friend_sessions`) is not used up and that phone holds fewer than its own
(`friend_per_phone`); it never waits in the queue.
Its sessions are not counted against the own phones' slots, so a friend's session
never takes a slot an own phone needs.
"""

from __future__ import annotations

import contextlib
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import anyio

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .status import AdmissionSummary

FIRST_SESSION_S = 1.0  # a session's time in its slot, guessed until one has ended here
PACE_WEIGHT = 0.2  # of the last session ended, in the pace at which slots free


@dataclass
class AdmissionStats:
    active: int = 0
    queued: int = 0
    busy: int = 0
    admitted: int = 0
    queue_wait_s: list[float] = field(default_factory=list)


class Admission:
    """Slots for plan sessions: `async with admission.slot(peer): ...`."""

    def __init__(
        self,
        max_active: int,
        max_queue: int,
        per_peer: int,
        friend_sessions: int = 0,
        friend_per_phone: int = 1,
    ) -> None:
        self.max_active = max_active
        self.max_queue = max_queue
        self.per_peer = per_peer
        self.friend_sessions = friend_sessions
        self.friend_per_phone = friend_per_phone
        self.friends_active = 0
        self._friends_held: dict[str, int] = {}  # friends' sessions by phone
        self.served_for_others = 0  # friends' sessions admitted since the start
        self.stats = AdmissionStats()
        self._held: dict[str, int] = {}
        self._waiting: OrderedDict[str, deque[anyio.Event]] = OrderedDict()
        self._interval_s: float | None = None  # how often a slot frees, all taken
        self._asked_back: dict[str, float] = {}  # phones turned away at capacity: when

    def summary(self) -> AdmissionSummary:
        """Counters and the p99 wait in the queue (last 1000 admissions), for status."""
        waits = sorted(self.stats.queue_wait_s)
        p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))] if waits else 0.0
        return AdmissionSummary(
            admitted=self.stats.admitted,
            busy=self.stats.busy,
            queue_wait_p99_ms=round(p99 * 1000, 1),
        )

    def _load(self, peer: str) -> int:
        return self._held.get(peer, 0) + len(self._waiting.get(peer, ()))

    def _interval(self) -> float:
        """How often a slot frees while every slot is taken: recent sessions' time in
        their slot over the sessions then running (they share one model)."""
        return self._interval_s or FIRST_SESSION_S / self.max_active

    def _retry_after(self) -> float:
        """When this phone's turn would come if it could wait: everyone queued goes first."""
        return round(self._interval() * (self.stats.queued + 1), 2)

    def _come_back(self, peer: str) -> float:
        """For `peer` turned away with the queue full: one interval more than the phones
        asked back before it and not back yet, so retries arrive one per place that
        opens (a phone back early is not counted against itself)."""
        now = time.monotonic()
        self._asked_back = {p: t for p, t in self._asked_back.items() if t > now}
        after = round(self._interval() * (len(self._asked_back) + 1), 2)
        self._asked_back[peer] = now + after
        return after

    @contextlib.asynccontextmanager
    async def slot(self, peer: str) -> AsyncIterator[None]:
        self._asked_back.pop(peer, None)  # back: whatever it gets now
        if self._load(peer) >= self.per_peer:
            self.stats.busy += 1
            raise HearthError(
                ErrorCode.BUSY,
                f"this phone already has {self.per_peer} requests running or queued",
                retry_after=self._retry_after(),
            )
        started = time.monotonic()
        if self.stats.active >= self.max_active:
            if self.stats.queued >= self.max_queue:
                self.stats.busy += 1
                raise HearthError(
                    ErrorCode.BUSY, "the node is at capacity", retry_after=self._come_back(peer)
                )
            ready = anyio.Event()
            self._waiting.setdefault(peer, deque()).append(ready)
            self.stats.queued += 1
            try:
                await ready.wait()
            except BaseException:
                self._forget(peer, ready)
                if ready.is_set():  # handed a slot while being cancelled: pass it on
                    self._release_slot()
                raise
        else:
            self.stats.active += 1
        self._held[peer] = self._held.get(peer, 0) + 1
        self.stats.admitted += 1
        self.stats.queue_wait_s.append(time.monotonic() - started)
        del self.stats.queue_wait_s[:-1000]
        began = time.monotonic()
        try:
            yield
        finally:
            self._held[peer] -= 1
            if not self._held[peer]:
                del self._held[peer]
            pace = (time.monotonic() - began) / self.stats.active
            known = self._interval_s
            self._interval_s = pace if known is None else known + PACE_WEIGHT * (pace - known)
            self._release_slot()

    @contextlib.asynccontextmanager
    async def friend_slot(self, peer: str) -> AsyncIterator[None]:
        """A slot for a friend's phone `peer`, now or `busy`: own phones first."""
        held = self._friends_held.get(peer, 0)
        if self.friends_active >= self.friend_sessions:
            why = f"this node plans for at most {self.friend_sessions} friends' requests at once"
        elif held >= self.friend_per_phone:
            n = self.friend_per_phone
            why = f"this node plans at most {n} requests of one friend's phone at once"
        elif self._waiting or self.stats.active + self.friends_active >= self.max_active:
            why = "this node's own phones come first, and it is busy with them"
        else:
            why = ""
        if why:
            self.stats.busy += 1
            raise HearthError(ErrorCode.BUSY, why, retry_after=self._retry_after())
        self.friends_active += 1
        self._friends_held[peer] = held + 1
        self.served_for_others += 1
        try:
            yield
        finally:
            self.friends_active -= 1
            self._friends_held[peer] -= 1
            if not self._friends_held[peer]:
                del self._friends_held[peer]

    def _forget(self, peer: str, event: anyio.Event) -> None:
        queue = self._waiting.get(peer)
        if queue and event in queue:
            queue.remove(event)
            self.stats.queued -= 1
            if not queue:
                del self._waiting[peer]

    def _release_slot(self) -> None:
        """Give the freed slot to the next peer in round-robin order, or free it."""
        if not self._waiting:
            self.stats.active -= 1
            return
        peer, queue = next(iter(self._waiting.items()))
        event = queue.popleft()
        self.stats.queued -= 1
        del self._waiting[peer]
        if queue:
            self._waiting[peer] = queue  # to the back of the round
        event.set()
