"""The phone's time reaches its planners, end to end: a real phone (`hearth` processes)
whose clock and zone its configuration sets, paired with a home that records every
frame it hears. Each plan request carries the phone's date-time with its offset and
zone, across a month's (and a year's) end, on the night Europe/Berlin changes to summer
time, and with the processes' own zone (`TZ`) another than the phone's. What a prompt
makes of it is `test_phone_time.py`'s."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
from pathlib import Path

import pytest

from hearth.protocol.model.chat import stated_time

from .conftest import Processes
from .hostile.harness import start_bench
from .hostile.script import Script
from .nodes import BIN, cli

pytestmark = pytest.mark.timeout(600)


def heard(bench) -> int:  # type: ignore[no-untyped-def]
    """How many plan requests the home heard so far."""
    return len(bench.plan_requests()) if bench.heard.exists() else 0


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory):
    processes = Processes()
    try:
        yield start_bench(processes, tmp_path_factory.mktemp("bench"))
    finally:
        processes.cleanup()


@pytest.mark.parametrize(
    ("clock", "zone", "offset", "stated"),
    [
        (  # a month's and a year's end
            "2026-12-31T23:59:40+01:00", "Europe/Berlin", "+01:00",
            ("2026-12-31 23:59, Thursday", "2027-01-01 00:00, Friday"),
        ),
        (  # the minute Berlin moves its clocks to summer time: 01:59 +01:00, then 03:00 +02:00
            "2026-03-29T01:59:40+01:00", "Europe/Berlin", None,
            ("2026-03-29 01:59, Sunday (Europe/Berlin, UTC+01:00)",
             "2026-03-29 03:00, Sunday (Europe/Berlin, UTC+02:00)"),
        ),
        (  # the phone in New York; its processes' TZ in Tokyo (already the next day there)
            "2026-02-28T21:00:00-05:00", "America/New_York", "-05:00",
            ("2026-02-28 21:00, Saturday (America/New_York, UTC-05:00)",
             "2026-02-28 21:01, Saturday (America/New_York, UTC-05:00)"),
        ),
    ],
)  # fmt: skip
def test_a_plan_request_carries_the_phones_own_time_and_zone(
    bench, clock: str, zone: str, offset: str | None, stated: tuple[str, ...]
) -> None:
    for key, value in (("timezone", zone), ("clock", clock)):
        assert (
            cli("hearth", "config", "set", key, value, "--home", str(bench.phone)).returncode == 0
        )
    bench.script.write_text(Script(rounds=[], answer="Noted.").model_dump_json())
    before = heard(bench)
    result = subprocess.run(
        [str(BIN / "hearth"), "ask", "--route", "remote", "--json", "--home", str(bench.phone),
         "remind me tomorrow at 9"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "HEARTH_NO_MDNS": "1", "TZ": "Asia/Tokyo"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    [request] = bench.plan_requests()[before:]
    device = request["device"]
    assert device["timezone"] == zone, device
    moment = dt.datetime.fromisoformat(device["local_time"])
    start = dt.datetime.fromisoformat(clock)
    assert dt.timedelta(0) <= moment - start < dt.timedelta(minutes=4), device  # it runs on
    if offset is not None:
        assert device["local_time"].endswith(offset), device
    said = stated_time(device["local_time"], device["timezone"])
    assert said is not None and said.startswith(stated), said


def test_a_phone_without_a_set_clock_sends_this_hosts_time(bench) -> None:
    for key in ("timezone", "clock"):
        assert cli("hearth", "config", "set", key, "", "--home", str(bench.phone)).returncode == 0
    bench.script.write_text(Script(rounds=[], answer="Noted.").model_dump_json())
    before = heard(bench)
    asked = dt.datetime.now(dt.UTC)
    result = subprocess.run(
        [str(BIN / "hearth"), "ask", "--route", "remote", "--json", "--home", str(bench.phone),
         "what day is it"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "HEARTH_NO_MDNS": "1"},
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    [request] = bench.plan_requests()[before:]
    moment = dt.datetime.fromisoformat(request["device"]["local_time"])
    assert moment.utcoffset() is not None
    assert abs(moment - asked) < dt.timedelta(minutes=4)


def test_the_phones_settings_name_the_clock_it_keeps(tmp_path: Path) -> None:
    home = tmp_path / "phone"
    cli("hearth", "init", "--json", "--home", str(home))
    bad = cli(
        "hearth", "config", "set", "clock", "2026-12-31T23:00", "--home", str(home), check=False
    )
    assert bad.returncode == 9 and "offset" in (bad.stdout + bad.stderr)
