"""The calendar tools, on an iCalendar file (`calendar.ics`)."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hearth.protocol.wire.errors import ErrorCode, HearthError

from ..registry import Registry, Tier, ToolContext
from ..storage import PhoneData, write_atomic
from .common import CHANGE, READ, WRITE, Short, When, when

if TYPE_CHECKING:  # the calendar library loads when these tools run
    import icalendar


def _file(data: PhoneData) -> Path:
    return data.path("calendar.ics")


def load_calendar(data: PhoneData) -> icalendar.Calendar:
    """The phone's calendar (an empty one if it has none yet)."""
    import icalendar

    path = _file(data)
    if path.exists():
        return icalendar.Calendar.from_ical(path.read_bytes())
    cal = icalendar.Calendar()
    cal.add("prodid", "-//Hearth//phone//EN")
    cal.add("version", "2.0")
    return cal


def save_calendar(data: PhoneData, cal: icalendar.Calendar) -> None:
    write_atomic(_file(data), cal.to_ical().decode())


def event_view(ev: Any) -> dict[str, Any]:
    return {
        "event_id": str(ev.get("uid")),
        "title": str(ev.get("summary")),
        "start": ev.decoded("dtstart").isoformat(),
        "end": ev.decoded("dtend").isoformat(),
        "location": str(ev.get("location", "")),
    }


def has_event(cal: icalendar.Calendar, event_id: str) -> bool:
    return any(str(ev.get("uid")) == event_id for ev in cal.walk("VEVENT"))


def find_event(cal: icalendar.Calendar, event_id: str) -> Any:
    for ev in cal.walk("VEVENT"):
        if str(ev.get("uid")) == event_id:
            return ev
    raise HearthError(ErrorCode.PLAN_REJECTED, "event_id: no such event")


def calendar_list(registry: Registry, data: PhoneData) -> None:
    @registry.tool(
        tier=Tier.READ_ONLY,
        annotations=READ,
        private=True,
        untrusted_results=True,
        keys=("event_id",),
    )
    async def calendar_list(
        ctx: ToolContext, start: When | None = None, end: When | None = None
    ) -> list[dict[str, Any]]:
        """List calendar events, optionally between two date-times."""
        lo = when(start, "start") if start else None
        hi = when(end, "end") if end else None
        events = [event_view(e) for e in load_calendar(data).walk("VEVENT")]
        return [
            e
            for e in events
            if (lo is None or dt.datetime.fromisoformat(e["end"]) >= lo)
            and (hi is None or dt.datetime.fromisoformat(e["start"]) <= hi)
        ]


def calendar_create(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.REVERSIBLE, annotations=WRITE)
    async def calendar_create(
        ctx: ToolContext, title: Short, start: When, end: When, location: str = ""
    ) -> dict[str, Any]:
        """Create a calendar event."""
        if when(end, "end") < when(start, "start"):
            raise HearthError(ErrorCode.PLAN_REJECTED, "an event cannot end before it starts")
        import icalendar

        cal = load_calendar(data)
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, ctx.idempotency_key))
        for done in cal.walk("VEVENT"):
            if str(done.get("uid")) == uid:  # a rerun: this step made it already
                return event_view(done)
        ev = icalendar.Event()
        ev.add("uid", uid)
        ev.add("summary", title)
        ev.add("dtstart", when(start, "start"))
        ev.add("dtend", when(end, "end"))
        ev.add("dtstamp", dt.datetime.now(dt.UTC))
        if location:
            ev.add("location", location)
        cal.add_component(ev)
        save_calendar(data, cal)
        return event_view(ev)


def calendar_move(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.IRREVERSIBLE, annotations=CHANGE, control=("event_id",))
    async def calendar_move(
        ctx: ToolContext, event_id: Short, start: When, end: When
    ) -> dict[str, Any]:
        """Move a calendar event to a new start and end."""
        cal = load_calendar(data)
        ev = find_event(cal, event_id)
        for key, value in (("dtstart", start), ("dtend", end)):
            del ev[key]
            ev.add(key, when(value, key[2:]))
        save_calendar(data, cal)
        return event_view(ev)


def calendar_delete(registry: Registry, data: PhoneData) -> None:
    @registry.tool(tier=Tier.IRREVERSIBLE, annotations=CHANGE, control=("event_id",))
    async def calendar_delete(ctx: ToolContext, event_id: Short) -> dict[str, Any]:
        """Delete a calendar event."""
        key, deleted = ctx.idempotency_key, {"deleted": event_id}
        if (done := data.done(key)) is not None:
            return done
        cal = load_calendar(data)
        if data.intended(key) == deleted and not has_event(cal, event_id):
            return data.record(key, deleted)  # deleted by this step before a crash
        ev = find_event(cal, event_id)
        data.intend(key, deleted)
        cal.subcomponents.remove(ev)
        save_calendar(data, cal)
        return data.record(key, deleted)
