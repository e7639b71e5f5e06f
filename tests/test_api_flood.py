"""A flood of local clients against `hearth serve`'s HTTP API: every client gets an HTTP
answer (the ask, or 429 with Retry-After), a flood of large bodies is not held in memory,
and the companion goes on serving a well-behaved app afterwards."""

from __future__ import annotations

import contextlib
import json
import resource
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
import trio

from .conftest import Processes
from .nodes import cli, init_phone, start_companion

pytestmark = [pytest.mark.hostile, pytest.mark.timeout(600)]

FLOOD = 1000  # concurrent asks (the listen queue holds 4096)


@contextlib.contextmanager
def resident_companion(home: Path, tiny_models) -> Iterator[tuple[str, str, int]]:
    """`hearth serve` for a new phone at `home` with the tiny local model (answers of 8
    tokens): (API URL, token, pid)."""
    processes = Processes()
    init_phone(home, tiny_models[1])
    cli("hearth", "config", "set", "limits.max_tokens", "8", "--home", str(home))
    try:
        running = start_companion(processes, home)
        yield running.ready["api"], (home / "api.token").read_text().strip(), running.proc.pid
    finally:
        processes.cleanup()


@pytest.fixture(scope="module")
def companion(
    tmp_path_factory: pytest.TempPathFactory, tiny_models
) -> Iterator[tuple[str, str, int]]:
    """A resident companion with room for the flood's file descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 3 * FLOOD  # the flood's sockets on both ends, with room (the child inherits it)
    if hard != resource.RLIM_INFINITY and hard < wanted:
        pytest.skip(f"{FLOOD} connections need {wanted} file descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    with resident_companion(tmp_path_factory.mktemp("flood") / "phone", tiny_models) as running:
        yield running


def flood(url: str, token: str, clients: int, body: dict) -> Counter[str]:
    """`clients` concurrent `POST /api/ask`, each on its own connection; what each got:
    its status (a 429 with its Retry-After), or the transport error that ended it."""
    outcomes: Counter[str] = Counter()

    async def go() -> None:
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=0)
        timeout = httpx.Timeout(180, pool=180)
        auth = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(
            base_url=url, headers=auth, limits=limits, timeout=timeout
        ) as http:

            async def one() -> None:
                try:
                    reply = await http.post("/api/ask", json=body)
                except httpx.TransportError as exc:
                    outcomes[type(exc).__name__] += 1
                    return
                if reply.status_code != 429:
                    outcomes[str(reply.status_code)] += 1
                    return
                error, after = reply.json()["error"], reply.headers.get("retry-after", "")
                assert error["code"] == "busy" and str(error["retry_after"]) == after
                outcomes[f"429 after {after}"] += 1

            with anyio.fail_after(300):
                async with anyio.create_task_group() as tg:
                    for _ in range(clients):
                        tg.start_soon(one)

    trio.run(go)
    return outcomes


def peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))


def test_a_flood_of_asks_gets_answers_or_429_with_retry_after(companion) -> None:
    url, token, _ = companion
    outcomes = flood(url, token, FLOOD, {"text": "hi", "route": "local", "tool_choice": "none"})
    assert outcomes["200"] >= 1, outcomes  # the slots served some
    busy = {k: n for k, n in outcomes.items() if k.startswith("429")}
    assert outcomes["200"] + sum(busy.values()) == FLOOD, outcomes  # no reset, no hang-up
    assert all(k.split()[-1].isdigit() and int(k.split()[-1]) >= 1 for k in busy), outcomes
    assert_still_serving(url, token)


def test_a_flood_of_large_bodies_is_read_and_dropped_not_held(companion) -> None:
    url, token, pid = companion
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak starts again from now
    before = peak_rss_kib(pid)
    big = {"text": "x" * 900_000, "route": "local"}  # under the 1 MiB body limit
    outcomes = flood(url, token, 500, big)
    assert set(outcomes) <= {"400"} | {k for k in outcomes if k.startswith("429")}, outcomes
    # read before a place was taken, the bodies grew the peak by ~330 MB; now the places
    # (2 running, 32 waiting) bound the bodies held at once to 34
    assert peak_rss_kib(pid) - before < 160 * 1024
    assert_still_serving(url, token)


def assert_still_serving(url: str, token: str) -> None:
    """A well-behaved app's ask streams its answer, and a report is the command's JSON."""
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as http:
        body = {"text": "hello", "route": "local", "tool_choice": "none"}
        with http.stream("POST", "/api/ask", json=body, timeout=180) as reply:
            assert reply.status_code == 200
            events = [line for line in reply.iter_lines() if line.startswith("event: ")]
        assert events[-1] == "event: answer", events
        status = http.get("/api/status", timeout=60)
        assert status.status_code == 200 and "peer_id" in json.loads(status.text)
