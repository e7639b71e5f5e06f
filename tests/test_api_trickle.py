"""Local clients that trickle their bodies against `hearth serve`'s HTTP API: the slot an
ask takes before its body is read is given back when the body does not arrive in time."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from hearth.companion.api.errors import BODY_READ_S
from hearth.companion.settings import PhoneSettings

from .test_api_flood import resident_companion

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def companion(tmp_path_factory: pytest.TempPathFactory, tiny_models) -> Iterator[tuple[str, str]]:
    """A resident companion with the tiny local model: (API URL, token)."""
    with resident_companion(tmp_path_factory.mktemp("trickle") / "phone", tiny_models) as running:
        yield running[:2]


def trickler(url: str, token: str) -> socket.socket:
    """An ask whose headers promise 64 body bytes, of which one is sent."""
    parts = urlsplit(url)
    conn = socket.create_connection((parts.hostname, parts.port), timeout=10)
    head = (
        f"POST /api/ask HTTP/1.1\r\nHost: {parts.netloc}\r\nAuthorization: Bearer {token}\r\n"
        "Content-Type: application/json\r\nContent-Length: 64\r\n\r\n{"
    )
    conn.sendall(head.encode())
    return conn


def test_trickled_bodies_do_not_hold_the_slots(companion) -> None:
    """Before: each trickled body held its slot for as long as its client liked, and 8 of
    them answered every other ask `busy` for ever. Now each is answered 408 in time."""
    url, token = companion
    places = PhoneSettings().api_running + PhoneSettings().api_queue  # running and waiting
    held = [trickler(url, token) for _ in range(places + 4)]  # every place, and refused ones
    try:
        auth = {"Authorization": f"Bearer {token}"}
        body = {"text": "hi", "route": "local", "tool_choice": "none"}
        status = 0
        with httpx.Client(base_url=url, headers=auth, timeout=120) as http:
            time.sleep(1)  # the tricklers are admitted first
            assert http.post("/api/ask", json=body).status_code == 429
            for _ in range(int(2 * BODY_READ_S)):  # bounded: two deadlines
                status = http.post("/api/ask", json=body).status_code
                if status == 200:
                    break
                time.sleep(1)
        assert status == 200
        for conn in held:  # each got its answer (the refused ones too, once drained or not)
            answer = conn.recv(4096).split(b"\r\n", 1)[0]
            assert answer.split()[1:2] == [b"408"], answer  # the refused ones drained too
    finally:
        for conn in held:
            conn.close()
