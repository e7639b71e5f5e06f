"""The built-in phone tools on real files."""

from __future__ import annotations

import trio

from hearth.companion.tools.registry import ToolContext

from .phone_kit import make_executor


def call(registry, name, key="p:s1", **args):
    tool = registry.get(name)
    return trio.run(lambda: tool.run(tool.validate(args), ToolContext(key)))


def test_calendar_create_list_move_delete_on_an_ics_file(tmp_path) -> None:
    executor, _, data = make_executor(tmp_path)
    reg = executor.registry
    event = call(
        reg,
        "calendar_create",
        title="Dentist",
        start="2026-12-24T09:00",
        end="2026-12-24T10:00",
        location="Main St",
    )
    assert (
        call(
            reg,
            "calendar_create",
            title="Dentist",
            start="2026-12-24T09:00",
            end="2026-12-24T10:00",
        )
        == event
    )  # same idempotency key: not twice
    assert "BEGIN:VEVENT" in (data.root / "calendar.ics").read_text()
    listed = call(reg, "calendar_list", start="2026-12-24T00:00", end="2026-12-25T00:00")
    assert [e["title"] for e in listed] == ["Dentist"]
    moved = call(
        reg,
        "calendar_move",
        key="p:s2",
        event_id=event["event_id"],
        start="2026-12-27T09:00",
        end="2026-12-27T10:00",
    )
    assert moved["start"].startswith("2026-12-27")
    assert call(reg, "calendar_list", start="2026-12-24T00:00", end="2026-12-25T00:00") == []
    call(reg, "calendar_delete", key="p:s3", event_id=event["event_id"])
    assert call(reg, "calendar_list") == []


def test_reminders_notes_clipboard_and_files(tmp_path) -> None:
    executor, _, data = make_executor(tmp_path)
    reg = executor.registry
    call(reg, "reminder_create", text="call mum", at="2026-12-24T18:00")
    assert [r["text"] for r in call(reg, "reminder_list")] == ["call mum"]
    call(reg, "notes_create", key="p:n1", text="buy milk", title="shopping")
    assert [n["title"] for n in call(reg, "notes_search", query="milk")] == ["shopping"]
    call(reg, "clipboard_set", text="copied")
    assert call(reg, "clipboard_get") == "copied"
    call(reg, "files_write", path="docs/a.txt", text="hello")
    assert call(reg, "files_read", path="docs/a.txt")["text"] == "hello"
    assert call(reg, "files_list") == ["docs/a.txt"]
    assert (data.sandbox / "docs" / "a.txt").read_text() == "hello"


def test_device_status_says_unknown_where_the_device_does_not_say(tmp_path) -> None:
    executor, _, _ = make_executor(tmp_path)
    status = call(executor.registry, "device_status")
    assert set(status) == {"battery", "charging", "network"}
