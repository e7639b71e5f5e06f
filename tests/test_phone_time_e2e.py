"""The phone's time reaches every planner, end to end: a real `hearth-node serve` with
the micro-planner and a real phone whose clock and zone its configuration sets. The
micro-planner reads its dates from that line, so what it plans shows what it was told:
across a month's end, on the night Europe/Berlin changes to summer time, and with the
home node in another zone than the phone."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hearth.protocol.model.micro.files import kept

from .nodes import cli, init_phone, last_json, pair, start_node

pytestmark = pytest.mark.timeout(600)


def ask(home: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    result = cli("hearth", "ask", *args, "--json", "--home", str(home), check=False, timeout=300)
    return result, last_json(result)


def set_clock(phone: Path, zone: str, clock: str) -> None:
    for key, value in (("timezone", zone), ("clock", clock)):
        assert cli("hearth", "config", "set", key, value, "--home", str(phone)).returncode == 0


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory):
    """A home node planning with the micro-planner, its own zone far from the phone's."""
    from .conftest import Processes

    processes = Processes()
    root = tmp_path_factory.mktemp("home")
    os.environ["TZ"] = "Asia/Tokyo"  # the node's processes: another zone than the phone's
    try:
        node = start_node(processes, root / "node", "--model", str(kept()[0]))
        yield node
    finally:
        del os.environ["TZ"]
        processes.cleanup()


@pytest.mark.parametrize(
    ("clock", "zone", "request", "at"),
    [
        (  # a month's (and a year's) end
            "2026-12-31T20:15:00+01:00", "Europe/Berlin",
            "Remind me to call the dentist tomorrow at 9", "2027-01-01T09:00",
        ),
        (  # the night Berlin moves its clocks to summer time (01:59 +01:00, then 03:00 +02:00)
            "2026-03-28T22:00:00+01:00", "Europe/Berlin",
            "Remind me to call the dentist tomorrow at 8:30am", "2026-03-29T08:30",
        ),
        (  # the phone in New York, the node in Tokyo (already the next day there)
            "2026-02-28T21:00:00-05:00", "America/New_York",
            "Remind me to call the dentist tomorrow at 10", "2026-03-01T10:00",
        ),
    ],
)  # fmt: skip
def test_tomorrow_is_the_day_after_the_phones_today(
    tmp_path: Path, home, clock: str, zone: str, request: str, at: str
) -> None:
    phone = tmp_path / "phone"
    init_phone(phone, kept()[1])
    assert pair(phone, home.invite())["roles"] == ["phone"]
    set_clock(phone, zone, clock)
    result, out = ask(phone, "--route", "remote", "--yes", request)
    assert result.returncode == 0, out
    steps = [s for p in out["plans"] for s in p["steps"]]
    assert [(s["tool"], s["status"]) for s in steps] == [("reminder_create", "ok")], out
    assert steps[0]["arguments"] == {"text": "call the dentist", "at": at}, steps


def test_the_phones_own_model_tells_the_phones_time(tmp_path: Path) -> None:
    phone = tmp_path / "phone"
    init_phone(phone, kept()[1])
    set_clock(phone, "Europe/Berlin", "2026-03-29T01:59:30+01:00")
    result, out = ask(phone, "--route", "local", "What time is it?")
    assert result.returncode == 0, out
    assert out["route"] == "local" and not out["plans"], out
    assert out["answer"] in ("It is 01:59.", "It is 03:00."), out  # it runs on, over the change
