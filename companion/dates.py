"""Date-times in a person's words, relative to the phone's now: "tomorrow, Tue 8 Dec,
09:00" (for confirmations, listings and the demo: never a raw ISO string)."""

from __future__ import annotations

import datetime as dt


def spoken(at: dt.datetime, now: dt.datetime) -> str:
    """`at` as the phone's user reads it: today/tomorrow/yesterday named, the weekday,
    day and month, the year only when it is not this one, the time to the minute.
    An aware `at` is shown in `now`'s zone; a naive one is the phone's local time."""
    if at.tzinfo is not None and now.tzinfo is not None:
        at = at.astimezone(now.tzinfo)
    days = (at.date() - now.date()).days
    named = {0: "today, ", 1: "tomorrow, ", -1: "yesterday, "}.get(days, "")
    year = "" if at.year == now.year else f" {at.year}"
    return f"{named}{at:%a} {at.day} {at:%b}{year}, {at:%H:%M}"
