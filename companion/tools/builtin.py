"""The built-in phone tools, on real files (a PC acting as the phone) or the Termux API.

calendar (iCalendar), reminders, contacts (vCard), messages (outbox, or
`termux-sms-send`), notes, files inside a sandbox, clipboard, device status.
Writes deduplicate on the idempotency key `plan_id:step_id`: a rerun after a crash
returns the first run's result instead of acting twice. Changing or deleting existing
data (moving or deleting an event, overwriting a file or the clipboard) keeps no
previous version, so it is irreversible: a confirmation per step. What the phone
stores (files, notes, calendar, contacts, clipboard, reminders) is private, and
untrusted too: anyone may have written it (an invitation, a download, a paste). Errors name the
argument, never its value (the value may be private).
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import uuid
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .registry import Annotations, Registry, Tier, ToolContext
from .storage import PhoneData, private_dir, write_atomic

if TYPE_CHECKING:  # the calendar and contacts libraries load when those tools run
    import icalendar

READ = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)
WRITE = Annotations(read_only=False, destructive=False, idempotent=True, open_world=False)
CHANGE = Annotations(read_only=False, destructive=True, idempotent=True, open_world=False)
SEND = Annotations(read_only=False, destructive=False, idempotent=True, open_world=True)

Text = Annotated[str, Field(min_length=1, max_length=2000)]
Short = Annotated[str, Field(min_length=1, max_length=200)]
When = Annotated[str, Field(description="ISO 8601 date-time, e.g. 2026-12-24T18:00")]


def _when(text: str, name: str) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise HearthError(ErrorCode.PLAN_REJECTED, f"{name}: not an ISO 8601 date-time") from exc


def _termux(*cmd: str) -> str | None:
    """Output of a Termux API command, or None where Termux is not here."""
    if shutil.which(cmd[0]) is None:
        return None
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout


def register_builtin(registry: Registry, data: PhoneData) -> None:
    """Add every built-in tool, keeping its data under `data`."""
    calendar_file = data.path("calendar.ics")

    def load_calendar() -> icalendar.Calendar:
        import icalendar

        if calendar_file.exists():
            return icalendar.Calendar.from_ical(calendar_file.read_bytes())
        cal = icalendar.Calendar()
        cal.add("prodid", "-//Hearth//phone//EN")
        cal.add("version", "2.0")
        return cal

    def save_calendar(cal: icalendar.Calendar) -> None:
        write_atomic(calendar_file, cal.to_ical().decode())

    def event_view(ev: Any) -> dict[str, Any]:
        return {
            "event_id": str(ev.get("uid")),
            "title": str(ev.get("summary")),
            "start": ev.decoded("dtstart").isoformat(),
            "end": ev.decoded("dtend").isoformat(),
            "location": str(ev.get("location", "")),
        }

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
        lo = _when(start, "start") if start else None
        hi = _when(end, "end") if end else None
        events = [event_view(e) for e in load_calendar().walk("VEVENT")]
        return [
            e
            for e in events
            if (lo is None or dt.datetime.fromisoformat(e["end"]) >= lo)
            and (hi is None or dt.datetime.fromisoformat(e["start"]) <= hi)
        ]

    @registry.tool(tier=Tier.REVERSIBLE, annotations=WRITE)
    async def calendar_create(
        ctx: ToolContext, title: Short, start: When, end: When, location: str = ""
    ) -> dict[str, Any]:
        """Create a calendar event."""
        if (done := data.done(ctx.idempotency_key)) is not None:
            return done
        if _when(end, "end") < _when(start, "start"):
            raise HearthError(ErrorCode.PLAN_REJECTED, "an event cannot end before it starts")
        import icalendar

        cal = load_calendar()
        ev = icalendar.Event()
        ev.add("uid", str(uuid.uuid5(uuid.NAMESPACE_URL, ctx.idempotency_key)))
        ev.add("summary", title)
        ev.add("dtstart", _when(start, "start"))
        ev.add("dtend", _when(end, "end"))
        ev.add("dtstamp", dt.datetime.now(dt.UTC))
        if location:
            ev.add("location", location)
        cal.add_component(ev)
        save_calendar(cal)
        return data.record(ctx.idempotency_key, event_view(ev))

    def find_event(cal: icalendar.Calendar, event_id: str) -> Any:
        for ev in cal.walk("VEVENT"):
            if str(ev.get("uid")) == event_id:
                return ev
        raise HearthError(ErrorCode.PLAN_REJECTED, "event_id: no such event")

    @registry.tool(tier=Tier.IRREVERSIBLE, annotations=CHANGE, control=("event_id",))
    async def calendar_move(
        ctx: ToolContext, event_id: Short, start: When, end: When
    ) -> dict[str, Any]:
        """Move a calendar event to a new start and end."""
        cal = load_calendar()
        ev = find_event(cal, event_id)
        for key, value in (("dtstart", start), ("dtend", end)):
            del ev[key]
            ev.add(key, _when(value, key[2:]))
        save_calendar(cal)
        return event_view(ev)

    @registry.tool(tier=Tier.IRREVERSIBLE, annotations=CHANGE, control=("event_id",))
    async def calendar_delete(ctx: ToolContext, event_id: Short) -> dict[str, Any]:
        """Delete a calendar event."""
        if (done := data.done(ctx.idempotency_key)) is not None:
            return done
        cal = load_calendar()
        ev = find_event(cal, event_id)
        cal.subcomponents.remove(ev)
        save_calendar(cal)
        return data.record(ctx.idempotency_key, {"deleted": event_id})

    reminders_file = data.path("reminders.json")

    def load_reminders() -> list[dict[str, Any]]:
        return json.loads(reminders_file.read_text()) if reminders_file.exists() else []

    @registry.tool(tier=Tier.REVERSIBLE, annotations=WRITE)
    async def reminder_create(ctx: ToolContext, text: Short, at: When) -> dict[str, Any]:
        """Set a reminder (or alarm) at a date-time."""
        if (done := data.done(ctx.idempotency_key)) is not None:
            return done
        reminder = {
            "id": uuid.uuid5(uuid.NAMESPACE_URL, ctx.idempotency_key).hex[:12],
            "text": text,
            "at": _when(at, "at").isoformat(),
        }
        write_atomic(reminders_file, json.dumps([*load_reminders(), reminder], indent=1))
        return data.record(ctx.idempotency_key, reminder)

    @registry.tool(
        tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True, keys=("id",)
    )
    async def reminder_list(ctx: ToolContext) -> list[dict[str, Any]]:
        """List reminders."""
        return load_reminders()

    contacts_file = data.path("contacts.vcf")

    @registry.tool(tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True)
    async def contacts_search(ctx: ToolContext, query: Short) -> list[dict[str, Any]]:
        """Find contacts whose name contains the query."""
        if not contacts_file.exists():
            return []
        import vobject
        from vobject.base import ContentLine

        found = []
        for card in vobject.readComponents(contacts_file.read_text()):
            name = str(card.fn.value) if hasattr(card, "fn") else ""
            if query.lower() in name.lower():
                lines = {
                    key: [x.value for x in card.contents.get(key, []) if isinstance(x, ContentLine)]
                    for key in ("tel", "email")
                }
                found.append({"name": name, "phone": lines["tel"], "email": lines["email"]})
        return found

    outbox = data.path("outbox")

    @registry.tool(tier=Tier.IRREVERSIBLE, annotations=SEND, control=("to",))
    async def message_send(ctx: ToolContext, to: Short, body: Text) -> dict[str, Any]:
        """Send a text message (SMS on Termux; into the outbox on a PC)."""
        if (done := data.done(ctx.idempotency_key)) is not None:
            return done
        if _termux("termux-sms-send", "-n", to, body) is not None:
            channel = "sms"
        else:
            private_dir(outbox)
            name = uuid.uuid5(uuid.NAMESPACE_URL, ctx.idempotency_key).hex[:16]
            write_atomic(outbox / f"{name}.json", json.dumps({"to": to, "body": body}))
            channel = "outbox"
        return data.record(ctx.idempotency_key, {"sent": True, "to": to, "channel": channel})

    notes_file = data.path("notes.json")

    def load_notes() -> list[dict[str, Any]]:
        return json.loads(notes_file.read_text()) if notes_file.exists() else []

    @registry.tool(tier=Tier.REVERSIBLE, annotations=WRITE)
    async def notes_create(ctx: ToolContext, text: Text, title: str = "") -> dict[str, Any]:
        """Write a note."""
        if (done := data.done(ctx.idempotency_key)) is not None:
            return done
        note = {
            "id": uuid.uuid5(uuid.NAMESPACE_URL, ctx.idempotency_key).hex[:12],
            "title": title,
            "text": text,
        }
        write_atomic(notes_file, json.dumps([*load_notes(), note], indent=1))
        return data.record(ctx.idempotency_key, note)

    @registry.tool(
        tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True, keys=("id",)
    )
    async def notes_search(ctx: ToolContext, query: str = "") -> list[dict[str, Any]]:
        """Find notes containing the query (all notes when it is empty)."""
        q = query.lower()
        return [n for n in load_notes() if q in n["text"].lower() or q in n["title"].lower()]

    @registry.tool(tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True)
    async def files_read(ctx: ToolContext, path: Short) -> dict[str, Any]:
        """Read a text file inside the phone's Hearth folder."""
        target = data.inside_sandbox(path)
        if not target.is_file():
            raise HearthError(ErrorCode.PLAN_REJECTED, "path: no such file")
        return {"path": path, "text": target.read_text(errors="replace")[:20000]}

    def file_exists(args: dict[str, Any]) -> bool:
        try:
            return data.inside_sandbox(args["path"]).exists()
        except HearthError:  # outside the sandbox: nothing is overwritten, the write is refused
            return False

    @registry.tool(
        tier=Tier.REVERSIBLE, annotations=WRITE, control=("path",), overwrites=file_exists
    )
    async def files_write(ctx: ToolContext, path: Short, text: Text) -> dict[str, Any]:
        """Write a text file inside the phone's Hearth folder (replacing one is irreversible)."""
        target = data.inside_sandbox(path)
        private_dir(target.parent)
        write_atomic(target, text)
        return {"path": path, "bytes": len(text.encode())}

    @registry.tool(tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True)
    async def files_list(ctx: ToolContext, folder: str = ".") -> list[str]:
        """List files in a folder inside the phone's Hearth folder."""
        base = data.inside_sandbox(folder)
        root = data.sandbox.resolve()
        return sorted(str(p.relative_to(root)) for p in base.rglob("*") if p.is_file())[:500]

    clipboard_file = data.path("clipboard.txt")

    def read_clipboard() -> str:
        text = _termux("termux-clipboard-get")
        if text is not None:
            return text
        return clipboard_file.read_text() if clipboard_file.exists() else ""

    @registry.tool(tier=Tier.READ_ONLY, annotations=READ, private=True, untrusted_results=True)
    async def clipboard_get(ctx: ToolContext) -> str:
        """Read the clipboard."""
        return read_clipboard()

    def clipboard_holds_something(_: dict[str, Any]) -> bool:
        return read_clipboard() != ""

    @registry.tool(tier=Tier.REVERSIBLE, annotations=WRITE, overwrites=clipboard_holds_something)
    async def clipboard_set(ctx: ToolContext, text: Text) -> dict[str, Any]:
        """Put text on the clipboard."""
        if _termux("termux-clipboard-set", text) is None:
            write_atomic(clipboard_file, text)
        return {"copied": len(text)}

    @registry.tool(tier=Tier.READ_ONLY, annotations=READ)
    async def device_status(ctx: ToolContext) -> dict[str, Any]:
        """Battery and network state ("unknown" where the device does not say)."""
        return read_device_status()


def read_device_status() -> dict[str, Any]:
    """Battery and network from the Termux API; "unknown" elsewhere."""
    status: dict[str, Any] = {"battery": "unknown", "charging": "unknown", "network": "unknown"}
    battery = _termux("termux-battery-status")
    if battery:
        info = json.loads(battery)
        status.update(
            battery=info.get("percentage", "unknown"),
            charging=info.get("plugged", "unknown") != "UNPLUGGED",
        )
    wifi = _termux("termux-wifi-connectioninfo")
    if wifi:
        status["network"] = "wifi" if json.loads(wifi).get("ip") else "cellular"
    return status
