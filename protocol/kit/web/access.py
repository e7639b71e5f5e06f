"""Who may pass the guard: the access token, the sessions signing in hands out, and the
budget of wrong tokens.

A session is a cookie AND a key: cookies ignore ports, so any server on another port of
127.0.0.1 (another user's, another Android app's) that the browser visits receives the
session cookie. The login's redirect hands the page a per-session key in the URL fragment
(never sent to any server); the page keeps it in its origin's sessionStorage and sends it
as `X-Hearth-Key` with every request but a plain page or file load, which the cookie
alone may fetch.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict

from .token import MIN_TOKEN_CHARS

MAX_SESSIONS = 64  # oldest sessions are dropped past this
SESSION_SECONDS = 24 * 3600
LOGIN_BURST = 10  # failed token checks answered 401 at once...
LOGIN_REFILL_SECONDS = 3.0  # ...then one more per this many seconds (the rest: 429)


class Sessions:
    """Random session ids (the cookie) and their keys (the page's header) handed out at
    login, kept in memory (never the token itself)."""

    def __init__(self) -> None:
        self._held: OrderedDict[str, tuple[float, str]] = OrderedDict()  # session -> (end, key)

    def new(self) -> tuple[str, str]:
        """A new session and its key; the oldest is dropped past `MAX_SESSIONS`."""
        session, key = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
        self._held[session] = (time.monotonic() + SESSION_SECONDS, key)
        while len(self._held) > MAX_SESSIONS:
            self._held.popitem(last=False)
        return session, key

    def valid(self, session: str, key: str | None) -> bool:
        """Whether `session` is live and `key` is its key (None: no key asked for)."""
        held = self._held.get(session)
        if held is None:
            return False
        if held[0] < time.monotonic():
            del self._held[session]
            return False
        return key is None or hmac.compare_digest(key.encode(), held[1].encode())

    def drop(self, session: str) -> None:
        self._held.pop(session, None)


class FailureBudget:
    """A token bucket of failed token checks: a burst of `LOGIN_BURST`, then one per
    `LOGIN_REFILL_SECONDS`; a wrong token past it is answered 429. The right token always
    passes: anyone on the machine can send wrong ones, and must not lock the owner out."""

    def __init__(self) -> None:
        self._left = float(LOGIN_BURST)
        self._at = time.monotonic()

    def exhausted(self) -> bool:
        now = time.monotonic()
        self._left = min(float(LOGIN_BURST), self._left + (now - self._at) / LOGIN_REFILL_SECONDS)
        self._at = now
        return self._left < 1

    def spend(self) -> None:
        self._left -= 1


class Access:
    """One guard's token, session cookie name, sessions and wrong-token budget (each guard
    its own: a page's session opens no other page)."""

    def __init__(self, token: str, cookie: str) -> None:
        if len(token) < MIN_TOKEN_CHARS:
            raise ValueError("the access token is too short")
        self._token = token.encode()
        self.cookie = cookie
        self.sessions = Sessions()
        self.failures = FailureBudget()

    def is_token(self, given: str) -> bool:
        """Whether `given` is the token (compared in constant time)."""
        return hmac.compare_digest(given.encode(), self._token)

    def wrong_token(self) -> tuple[int, str]:
        """The status and message a wrong token is refused with: 401, or 429 past the
        budget."""
        if self.failures.exhausted():
            return 429, "too many wrong tokens; wait a little"
        self.failures.spend()
        return 401, "wrong access token"

    def session_cookie(self, session: str) -> bytes:
        return f"{self.cookie}={session}; HttpOnly; SameSite=Strict; Path=/".encode()

    def cleared_cookie(self) -> bytes:
        return f"{self.cookie}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0".encode()
