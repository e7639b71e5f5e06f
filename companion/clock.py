"""The phone's clock: the date-time a request carries to its planner, in the phone's own
zone.

`config.toml` may set the zone (`timezone`, an IANA name; default: this host's) and the
clock itself (`clock`, an ISO 8601 date-time with its offset: the phone's clock reads
that when the process starts and runs on from there; for tests, demos and a phone whose
system clock is wrong). Nothing else in the phone reads the system clock for "now".
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


class PhoneClock:
    """Now, as the phone tells it."""

    def __init__(self, timezone: str = "", start: str = "") -> None:
        self.zone: dt.tzinfo | None = ZoneInfo(timezone) if timezone else None
        self._start = dt.datetime.fromisoformat(start) if start else None
        self._started = time.monotonic()

    def now(self) -> dt.datetime:
        """The phone's date-time, aware, in its zone (this host's when none is set)."""
        if self._start is None:
            moment = dt.datetime.now(dt.UTC).astimezone()  # this host's zone
        else:  # the set clock's offset, running on
            moment = self._start + dt.timedelta(seconds=time.monotonic() - self._started)
        return moment.astimezone(self.zone) if self.zone is not None else moment

    def at(self, stamp: float) -> dt.datetime:
        """The phone's date-time at wall-clock time `stamp` (a request kept earlier)."""
        return self.now() - dt.timedelta(seconds=time.time() - stamp)

    def zone_name(self) -> str:
        """The zone's IANA name where the phone knows it, else its UTC offset."""
        key = getattr(self.zone, "key", None)
        if key:
            return str(key)
        host = _host_zone() if self._start is None else None
        return host or self.now().strftime("UTC%z")


def _host_zone() -> str | None:
    """This host's IANA zone name (from `TZ` or `/etc/localtime`), if it has one."""
    name = os.environ.get("TZ", "").removeprefix(":")
    if name and "/" in name:  # a name (a POSIX rule such as CET-1CEST,M3.5.0 is not one)
        return name if _a_zone(name) else None
    try:
        target = Path("/etc/localtime").resolve()
    except OSError:
        return None
    parts = target.parts
    name = "/".join(parts[parts.index("zoneinfo") + 1 :]) if "zoneinfo" in parts else ""
    return name if _a_zone(name) else None


def _a_zone(name: str) -> bool:
    """Whether `name` is an IANA zone this host knows, as a request may carry it."""
    if not re.fullmatch(r"[A-Za-z0-9_+./-]{1,64}", name):
        return False
    try:
        ZoneInfo(name)
    except (ValueError, OSError, ZoneInfoNotFoundError):
        return False
    return True
