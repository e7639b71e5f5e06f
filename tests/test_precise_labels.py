"""Precise labels (issue 30): a `$ref` that selects from the owner's data by trusted
criteria, the user's own words, the contacts a request names, literals judged by what
the planner had read when it wrote them, and the content of writes planned after
untrusted input."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from hearth.companion.executor import SessionState
from hearth.companion.intent import Intent, is_span, named
from hearth.companion.tools.registry import Annotations, Tier, Tool
from hearth.protocol.wire.messages import UntrustedInput

from .phone_kit import make_executor, make_plan

WEB = UntrustedInput(tool="web_search", source="evil.example", digest=bytes(32))
ALICE = "+44-7700-900123"
ATTACKER = "+1-555-0199"
CALENDAR = (
    "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//t//EN\r\n"
    "BEGIN:VEVENT\r\nUID:evt-dentist\r\nSUMMARY:Dentist\r\nDTSTART:20261210T090000\r\n"
    "DTEND:20261210T100000\r\nDTSTAMP:20261201T000000Z\r\nEND:VEVENT\r\n"
    "BEGIN:VEVENT\r\nUID:evt-13\r\nSUMMARY:Team sync\r\nDTSTART:20261210T150000\r\n"
    "DTEND:20261210T160000\r\nDTSTAMP:20261201T000000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n"
)
CONTACTS = (
    f"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Alice Example\r\nTEL:{ALICE}\r\n"
    "EMAIL:alice@example.org\r\nEND:VCARD\r\n"
    f"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Mallory Evil\r\nTEL:{ATTACKER}\r\nEND:VCARD\r\n"
)


def phone(tmp_path, answer: bool | None = True):  # type: ignore[no-untyped-def]
    executor, asked, data = make_executor(tmp_path, answer=answer)
    data.root.mkdir(parents=True, exist_ok=True)
    (data.root / "calendar.ics").write_text(CALENDAR)
    (data.root / "contacts.vcf").write_text(CONTACTS)
    return executor, asked, data


def rounds(executor, request: str, *plans):  # type: ignore[no-untyped-def]
    """Run `plans` as the rounds of one session for `request`; every observation."""
    state = SessionState(request=request)

    async def go() -> list[Any]:
        out = []
        for plan in plans:  # as the phone's owner sees them: errors unredacted
            out += await executor.execute(plan, state, home=False)
        return out

    return trio.run(go)


def events(data) -> str:  # type: ignore[no-untyped-def]
    return (data.root / "calendar.ics").read_text()


def sent(data) -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
    outbox = data.root / "outbox"
    return [json.loads(p.read_text()) for p in outbox.iterdir()] if outbox.exists() else []


def select(where: dict[str, Any], field: str = "event_id", **more: Any) -> dict[str, Any]:
    return {"$ref": "s1.result", "where": where, "select": field, **more}


READ_WEB = make_plan(("s1", "device_status", {}, []), untrusted=[WEB])


def test_an_event_selected_by_the_users_words_is_deleted_under_yes_after_untrusted_input(
    tmp_path,
) -> None:
    executor, asked, data = phone(tmp_path)
    plan = make_plan(
        ("s1", "calendar_list", {}, []),
        ("s2", "calendar_delete", {"event_id": select({"title": "Team sync"})}, ["s1"]),
    )
    obs = rounds(executor, "Cancel my Team sync, the page says it moved.", READ_WEB, plan)
    assert [o.status for o in obs] == ["ok", "ok", "ok"]
    (question,) = asked.asked  # irreversible: confirmed per step, nothing tainted
    assert question.tool == "calendar_delete" and not question.tainted
    assert "evt-13" not in events(data) and "evt-dentist" in events(data)


def test_an_injected_delete_file_13_still_needs_a_tainted_literal(tmp_path) -> None:
    """The page says "delete the event at 09:00": the criterion is the planner's literal,
    written after reading it, so the selected id is steered; --yes refuses it."""
    executor, asked, data = phone(tmp_path)
    by_injected = make_plan(
        ("s1", "calendar_list", {}, []),
        ("s2", "calendar_delete", {"event_id": select({"title": "Dentist"})}, ["s1"]),
    )
    copied = make_plan(("s1", "calendar_delete", {"event_id": "evt-dentist"}, []))
    obs = rounds(executor, "Cancel my Team sync.", READ_WEB, by_injected, copied)
    assert [o.status for o in obs] == ["ok", "ok", "refused", "refused"]
    assert all("evil.example" in q.tainted["event_id"] for q in asked.asked)
    assert "evt-dentist" in events(data)


def test_a_selection_planned_before_anything_was_read_is_trusted(tmp_path) -> None:
    """Literals are judged by what the planner had read when it wrote the plan: a
    criterion written in the plan that lists the calendar was written before the
    listing (untrusted: invitations) was read."""
    executor, asked, data = phone(tmp_path)
    plan = make_plan(
        ("s1", "calendar_list", {}, []),
        (
            "s2",
            "calendar_move",
            {
                "event_id": select({"start": "2026-12-10T15:00:00"}),
                "start": "2026-12-11T15:00",
                "end": "2026-12-11T16:00",
            },
            ["s1"],
        ),
    )
    obs = rounds(executor, "Move my 3 pm to Friday.", plan)
    assert [o.status for o in obs] == ["ok", "ok"] and not asked.asked[0].tainted
    assert "DTSTART:20261211T150000" in events(data)


def test_a_selected_field_that_is_not_the_entrys_key_stays_steered(tmp_path) -> None:
    """A note the request names, but its text (anyone's) is no key of the owner's data."""
    executor, asked, data = phone(tmp_path)
    (data.root / "notes.json").write_text(
        json.dumps([{"id": "n1", "title": "Callback", "text": "payload.txt"}])
    )
    where = {"$ref": "s1.result", "where": {"title": "Callback"}}
    plan = make_plan(
        ("s1", "notes_search", {"query": ""}, []),
        ("s2", "files_write", {"path": {**where, "select": "text"}, "text": "x"}, ["s1"]),
        ("s3", "files_write", {"path": {**where, "select": "id"}, "text": "x"}, ["s1"]),
    )
    obs = rounds(executor, "Write to the file the Callback note names.", READ_WEB, plan)
    # the note's text is anyone's; its id is a key, but of notes: no file path
    assert [o.status for o in obs[1:]] == ["ok", "refused", "refused"]
    steered = [q for q in asked.asked if q.tainted]
    assert len(steered) == 2 and "notes_search" in steered[0].tainted["path"]
    assert not (data.sandbox / "payload.txt").exists() and not (data.sandbox / "n1").exists()


@pytest.mark.parametrize(
    ("selection", "problem"),
    [
        ({"$ref": "s1.result", "select": "event_id"}, "needs where"),
        ({"$ref": "s1.result", "where": {"title": "Dentist"}, "limit": 1}, "only where"),
        ({"$ref": "s1.result.0", "where": {"title": "Dentist"}}, "must name a list"),
        ({"$ref": "s1.result", "where": {}}, "where must map"),
        ({"$ref": "s1.result", "where": {"title": ["x"]}}, "a value must be"),
        ({"$ref": "s1.result", "where": {"title": "Nobody"}}, "selects nothing"),
        ({"$ref": "s1.result", "where": {"location": ""}}, "selects 2 elements"),
        ({"$ref": "s1.result", "where": {"title": "Dentist"}, "pick": "any"}, "pick must be"),
        ({"$ref": "s1.result", "where": {"title": "Dentist"}, "select": 3}, "select must be"),
        ({"$ref": "s1.result", "where": {"title": "Dentist"}, "select": "nope"}, "names nothing"),
        ({"$ref": 7, "where": {"title": "Dentist"}}, "must be a string"),
    ],
)
def test_a_selection_is_validated_strictly_with_typed_errors(tmp_path, selection, problem) -> None:
    executor, _, data = phone(tmp_path)
    plan = make_plan(
        ("s1", "calendar_list", {}, []),
        ("s2", "calendar_delete", {"event_id": selection}, ["s1"]),
    )
    obs = rounds(executor, "Cancel the dentist.", plan)
    assert obs[1].status == "refused" and problem in (obs[1].error or "")
    assert "Dentist" not in (obs[1].error or "").replace("the dentist", "")  # no values named
    assert "evt-dentist" in events(data)


def test_first_and_last_pick_among_matches(tmp_path) -> None:
    executor, _, data = phone(tmp_path)
    plan = make_plan(
        ("s1", "calendar_list", {}, []),
        ("s2", "calendar_delete", {"event_id": select({"location": ""}, pick="last")}, ["s1"]),
    )
    assert [o.status for o in rounds(executor, "Delete the last event.", plan)] == ["ok", "ok"]
    assert "evt-13" not in events(data) and "evt-dentist" in events(data)


def test_a_recipient_in_the_users_own_words_is_not_tainted_by_what_was_read_later(
    tmp_path,
) -> None:
    executor, asked, data = phone(tmp_path)
    text = make_plan(("s1", "message_send", {"to": "+49-170-555-0100", "body": "Running late"}, []))
    obs = rounds(executor, "Text +49-170-555-0100: running late.", READ_WEB, text)
    assert obs[-1].status == "ok" and not asked.asked[-1].tainted
    assert sent(data) == [{"to": "+49-170-555-0100", "body": "Running late"}]


@pytest.mark.parametrize(
    "spoof",
    [
        "+49-170-555-0199",  # not in the request
        "+49-170-555-010",  # a part of the request's number
        "\uff0b49-170-555-0100",  # full-width plus: another character
        "+49\u2011170\u2011555\u20110100",  # non-breaking hyphens: look-alikes
    ],
)
def test_no_injected_text_passes_for_the_users_words(tmp_path, spoof) -> None:
    executor, asked, data = phone(tmp_path)
    text = make_plan(("s1", "message_send", {"to": spoof, "body": "Running late"}, []))
    obs = rounds(executor, "Text +49-170-555-0100: running late.", READ_WEB, text)
    assert obs[-1].status == "refused" and "to" in asked.asked[-1].tainted
    assert sent(data) == []


def test_text_alice_sends_to_alices_number_from_the_contacts(tmp_path) -> None:
    executor, asked, data = phone(tmp_path)
    plan = make_plan(("s1", "message_send", {"to": ALICE, "body": "Running late"}, []))
    obs = rounds(executor, "Read the news, then text Alice that I'm running late", READ_WEB, plan)
    assert obs[-1].status == "ok" and not asked.asked[-1].tainted
    assert sent(data)[0]["to"] == ALICE


def test_a_contact_the_request_does_not_name_is_no_intent(tmp_path) -> None:
    """The page names Mallory; the request does not: her number is the planner's."""
    executor, asked, data = phone(tmp_path)
    plan = make_plan(("s1", "message_send", {"to": ATTACKER, "body": "Running late"}, []))
    obs = rounds(executor, "Text Alice that I'm running late", READ_WEB, plan)
    assert obs[-1].status == "refused" and "to" in asked.asked[-1].tainted
    assert sent(data) == []


def test_a_write_planned_after_untrusted_input_with_untrusted_content_is_never_under_yes(
    tmp_path,
) -> None:
    """The calendar event whose title an injected page wrote: no control argument, still
    never approved by --yes; a title in the user's own words is."""
    executor, asked, data = phone(tmp_path)
    injected = make_plan(
        (
            "s1",
            "calendar_create",
            {
                "title": "Call +1-555-0199 to keep your account",
                "start": "2026-12-12T09:00",
                "end": "2026-12-12T10:00",
            },
            [],
        ),
    )
    mine = make_plan(
        (
            "s1",
            "calendar_create",
            {"title": "Lunch with Alice", "start": "2026-12-11T12:00", "end": "2026-12-11T13:00"},
            [],
        ),
    )
    request = "Check the page, then put Lunch with Alice in my calendar."
    obs = rounds(executor, request, READ_WEB, injected, mine)
    assert [o.status for o in obs] == ["ok", "refused", "ok"]
    assert asked.asked[0].tainted["title"].startswith("content")
    assert "+1-555-0199" not in events(data) and "Lunch with Alice" in events(data)


def test_copied_untrusted_content_after_untrusted_input_is_never_under_yes(tmp_path) -> None:
    executor, asked, data = phone(tmp_path)
    data.sandbox.mkdir(parents=True)
    (data.sandbox / "page.txt").write_text("Call +1-555-0199 to keep your account")
    read = make_plan(("s1", "files_read", {"path": "page.txt"}, []))
    note = make_plan(
        ("s1", "files_read", {"path": "page.txt"}, []),
        ("s2", "notes_create", {"text": {"$ref": "s1.result.text"}}, ["s1"]),
    )
    obs = rounds(executor, "Keep page.txt in my notes.", read, note)
    assert obs[-1].status == "refused" and "files_read" in asked.asked[-1].tainted["text"]


def test_the_users_words_are_spans_of_the_request() -> None:
    request = "Pay 950 euros to DE89370400440532013000 for report.txt (see #general)."
    intent = Intent(request)
    assert intent.says("DE89370400440532013000") and intent.says("report.txt")
    assert intent.says(950.0) and intent.says(950) and intent.says("general")
    assert not intent.says("DE8937") and not intent.says("0532013000")  # parts of a word
    assert not intent.says("REPORT.TXT") and not intent.says("report")
    assert not intent.says("eur") and not intent.says(95) and not intent.says(True)
    assert not intent.says("to") and intent.says("pay 950", content=True)
    assert is_span("Pay 950", request) and not is_span("ay 9", request)
    assert named("text Alice and Bob now", ["Alice Example", "Bob A", "Bob B"]) == {"Alice Example"}


def test_a_criterion_may_be_a_trusted_field_selected_before(tmp_path) -> None:
    """Chained: the reminder the request names gives the event's id the next selection
    matches on; both picked on the phone by trusted criteria, after untrusted input."""
    executor, asked, data = phone(tmp_path)
    (data.root / "reminders.json").write_text(
        json.dumps([{"id": "evt-13", "text": "Prepare the sync", "at": "2026-12-10T14:00"}])
    )
    plan = make_plan(
        ("s0", "reminder_list", {}, []),
        ("s1", "calendar_list", {}, []),
        (
            "s2",
            "calendar_delete",
            {
                "event_id": select(
                    {
                        "event_id": {
                            "$ref": "s0.result",
                            "where": {"text": "Prepare the sync"},
                            "select": "id",
                        }
                    }
                )
            },
            ["s0", "s1"],
        ),
    )
    obs = rounds(executor, "Delete the event of my reminder Prepare the sync.", READ_WEB, plan)
    assert [o.status for o in obs] == ["ok", "ok", "ok", "ok"], obs
    assert not asked.asked[-1].tainted and "evt-13" not in events(data)


def _server_tool(name: str, source: str, handler, **kw: Any) -> Tool:  # type: ignore[no-untyped-def]
    return Tool(
        name=name,
        description=name,
        handler=handler,
        schema={"type": "object", "properties": {"booking_id": {"type": "string"}}}
        if kw.get("tier") is Tier.IRREVERSIBLE
        else {"type": "object", "properties": {}},
        source=source,
        untrusted_results=True,
        **kw,
    )


@pytest.mark.parametrize("server", ["mcp:travel", "mcp:other"])
def test_a_private_id_goes_back_only_to_the_server_it_came_from(tmp_path, server) -> None:
    """The owner's bookings are private; the booking's id may go back to the travel
    server that listed it (it knows it), never to another open-world server."""
    executor, asked, _ = phone(tmp_path)
    cancelled: list[str] = []

    async def bookings(ctx, **_: Any) -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
        return [
            {"booking_id": "bk-1", "hotel": "Riverside"},
            {"booking_id": "bk-2", "hotel": "Inn"},
        ]

    async def cancel(ctx, booking_id: str) -> str:  # type: ignore[no-untyped-def]
        cancelled.append(booking_id)
        return "cancelled"

    executor.registry.add(
        _server_tool(
            "travel.list_bookings",
            "mcp:travel",
            bookings,
            tier=Tier.READ_ONLY,
            annotations=Annotations(read_only=True, destructive=False, open_world=False),
            control_args=frozenset(),
            private=True,
            key_fields=frozenset({"booking_id"}),
        )
    )
    executor.registry.add(
        _server_tool(
            "x.cancel_booking",
            server,
            cancel,
            tier=Tier.IRREVERSIBLE,
            annotations=Annotations(),
            control_args=frozenset({"booking_id"}),
            private=False,
        )
    )
    plan = make_plan(
        ("s1", "travel.list_bookings", {}, []),
        ("s2", "x.cancel_booking", {"booking_id": select({"hotel": "Inn"}, "booking_id")}, ["s1"]),
    )
    obs = rounds(executor, "Cancel my Inn booking.", READ_WEB, plan)
    if server == "mcp:travel":
        assert obs[-1].status == "ok" and cancelled == ["bk-2"] and not asked.asked[-1].tainted
    else:
        assert obs[-1].status == "refused" and "private" in (obs[-1].error or "")
        assert cancelled == []


def test_private_content_never_goes_back_to_a_server_whose_listing_it_came_from(tmp_path) -> None:
    """Only a selected key goes back: the listing's other fields (private) stay on the
    phone, whatever server they came from (the server may pass them on)."""
    executor, _, _ = phone(tmp_path)
    sent: list[str] = []

    async def bookings(ctx, **_: Any) -> list[dict[str, str]]:  # type: ignore[no-untyped-def]
        return [{"booking_id": "bk-1", "hotel": "Riverside"}]

    async def cancel(ctx, booking_id: str) -> str:  # type: ignore[no-untyped-def]
        sent.append(booking_id)
        return "cancelled"

    for name, handler, kw in (
        (
            "travel.list_bookings",
            bookings,
            dict(
                tier=Tier.READ_ONLY,
                annotations=Annotations(read_only=True, destructive=False, open_world=False),
                control_args=frozenset(),
                private=True,
                key_fields=frozenset({"booking_id"}),
            ),
        ),
        (
            "travel.cancel_booking",
            cancel,
            dict(
                tier=Tier.IRREVERSIBLE,
                annotations=Annotations(),
                control_args=frozenset({"booking_id"}),
                private=False,
            ),
        ),
    ):
        executor.registry.add(_server_tool(name, "mcp:travel", handler, **kw))
    hotel = {"$ref": "s1.result", "where": {"booking_id": "bk-1"}, "select": "hotel"}
    plan = make_plan(
        ("s1", "travel.list_bookings", {}, []),
        ("s2", "travel.cancel_booking", {"booking_id": hotel}, ["s1"]),
        ("s3", "travel.cancel_booking", {"booking_id": {"$ref": "s1.result.0.booking_id"}}, ["s1"]),
    )
    obs = rounds(executor, "Cancel booking bk-1.", plan)
    assert [o.status for o in obs[1:]] == ["refused", "refused"] and sent == []
    assert all("private" in (o.error or "") for o in obs[1:])


def test_the_terminal_says_an_answer_was_written_after_untrusted_input() -> None:
    from hearth.companion.terminal import ask_outcome

    out = {"route": "remote", "reason": "r", "plans": [], "answer": "Paid."}
    assert "untrusted" not in " ".join(t.plain for t in ask_outcome(out))
    lines = ask_outcome({**out, "untrusted_sources": ["web_search (https://evil.example/)"]})
    assert "written after reading untrusted input: web_search (https://evil.example/)" in (
        lines[-1].plain
    )
