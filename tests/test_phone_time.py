"""Every planner knows when and where the phone is: the request carries the phone's
date-time with its offset and zone, and every prompt states it (the template's
`date_string` where it has one, else one system line), outside the shared prefix."""

from __future__ import annotations

import datetime as dt
import time
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from hearth.companion.clock import PhoneClock
from hearth.companion.dates import spoken
from hearth.companion.settings import PhoneSettings
from hearth.companion.tools.builtin.device import device_context
from hearth.protocol.model.chat import (
    ChatTemplate,
    phone_time,
    split_shared,
    stated_time,
    with_time_line,
)
from hearth.protocol.model.tiny import chat_template
from hearth.protocol.wire.messages import DeviceContext

BERLIN = ZoneInfo("Europe/Berlin")
TOOL = {"type": "function", "function": {"name": "notes_create", "parameters": {}}}
DATED = (  # as Llama 3.x's templates state the date
    "{{ bos_token }}system: Today Date: {{ date_string }}\n"
    "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
    "{% for t in tools or [] %}<tool_call>{{ t.function.name }}{% endfor %}"
)


def test_the_phones_time_is_worded_with_its_zone_and_offset() -> None:
    now = dt.datetime(2026, 12, 7, 10, 53, tzinfo=BERLIN)
    assert phone_time(now) == "2026-12-07 10:53, Monday (Europe/Berlin, UTC+01:00)"
    fixed = dt.datetime(2026, 12, 7, 10, 53, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert phone_time(fixed) == "2026-12-07 10:53, Monday (UTC-05:00)"


def test_a_daylight_saving_change_is_stated_with_the_offset_of_that_moment() -> None:
    before = stated_time("2026-03-29T01:59:00+01:00", "Europe/Berlin")
    after = stated_time("2026-03-29T03:00:00+02:00", "Europe/Berlin")
    assert before == "2026-03-29 01:59, Sunday (Europe/Berlin, UTC+01:00)"
    assert after == "2026-03-29 03:00, Sunday (Europe/Berlin, UTC+02:00)"


def test_a_zone_that_disagrees_with_the_offset_is_not_believed() -> None:
    """A phone's clock that says +01:00 with a zone at +09:00 then: its offset stands."""
    said = stated_time("2026-12-07T10:53:00+01:00", "Asia/Tokyo")
    assert said == "2026-12-07 10:53, Monday (UTC+01:00)"
    assert stated_time("2026-12-07T10:53:00+01:00", "../../etc/passwd") == said
    assert stated_time(None, "Europe/Berlin") is None


@pytest.mark.parametrize(
    "local_time", ["2026-12-07T10:53:00", "tomorrow", "2026-13-01T00:00+01:00", "x" * 41]
)
def test_a_request_carries_the_phones_time_only_with_its_offset(local_time: str) -> None:
    with pytest.raises(ValidationError):
        DeviceContext(local_time=local_time)


def test_a_zone_name_is_a_name() -> None:
    assert DeviceContext(timezone="America/New_York", local_time="2026-12-07T04:53-05:00")
    for bad in ("", "Europe/Berlin\n<|im_start|>", "a b"):
        with pytest.raises(ValidationError):
            DeviceContext(timezone=bad)


def test_a_template_without_a_date_gets_one_system_line_after_its_tools() -> None:
    chat = ChatTemplate(chat_template())
    assert not chat.dated
    messages = [{"role": "user", "content": "What time is it?"}]
    first = chat.render(messages, [TOOL], now="2026-12-07 10:53, Monday (UTC+01:00)")
    later = chat.render(messages, [TOOL], now="2026-12-07 10:54, Monday (UTC+01:00)")
    line = "The phone's local time: 2026-12-07 10:53, Monday (UTC+01:00)."
    assert first.count(line) == 1 and first.index("</tools>") < first.index(line)
    assert first.index(line) < first.index("<|im_start|>user")
    shared, rest = split_shared(first, "2026-12-07 10:53, Monday (UTC+01:00)")
    assert shared + rest == first and line not in shared and rest.startswith(line)
    assert split_shared(later, "2026-12-07 10:54, Monday (UTC+01:00)")[0] == shared


def test_an_apps_own_system_message_keeps_its_text_and_gets_the_line() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    timed = with_time_line(messages, "2026-12-07 10:53")
    assert timed[0]["content"] == "Be brief.\n\nThe phone's local time: 2026-12-07 10:53."
    assert timed[1:] == messages[1:] and messages[0]["content"] == "Be brief."


def test_a_template_with_a_date_string_states_it_there_and_nowhere_else() -> None:
    chat = ChatTemplate(DATED)
    assert chat.dated
    text = chat.render([{"role": "user", "content": "hi"}], [TOOL], now="2026-12-07 10:53")
    assert text.startswith("system: Today Date: 2026-12-07 10:53\n")
    assert "The phone's local time" not in text


def test_the_phones_clock_is_set_by_its_configuration() -> None:
    clock = PhoneClock("Europe/Berlin", "2026-03-29T01:59:30+01:00")
    now = clock.now()
    assert now.tzinfo is not None and clock.zone_name() == "Europe/Berlin"
    assert dt.datetime(2026, 3, 29, 0, 59, 30, tzinfo=dt.UTC) <= now
    assert now < dt.datetime(2026, 3, 29, 1, 30, tzinfo=dt.UTC)  # it runs on from there
    unzoned = PhoneClock("", "2026-01-31T23:00:00-05:00")
    assert unzoned.now().utcoffset() == dt.timedelta(hours=-5)
    assert unzoned.zone_name() == "UTC-0500"


@pytest.mark.parametrize(
    ("key", "value"),
    [("timezone", "Mars/Olympus"), ("clock", "2026-12-07T10:53"), ("clock", "soon")],
)
def test_a_wrong_clock_or_zone_is_refused_when_it_is_set(key: str, value: str) -> None:
    with pytest.raises(ValidationError):
        PhoneSettings.model_validate({key: value})


def test_a_date_time_is_shown_in_words() -> None:
    now = dt.datetime(2026, 12, 7, 10, 53)
    assert spoken(dt.datetime(2026, 12, 8, 9, 0), now) == "tomorrow, Tue 8 Dec, 09:00"
    assert spoken(dt.datetime(2026, 12, 7, 18, 30), now) == "today, Mon 7 Dec, 18:30"
    assert spoken(dt.datetime(2027, 1, 2, 8, 5), now) == "Sat 2 Jan 2027, 08:05"
    aware = dt.datetime(2026, 12, 8, 8, 0, tzinfo=dt.UTC)
    assert spoken(aware, now.replace(tzinfo=BERLIN)) == "tomorrow, Tue 8 Dec, 09:00"


def test_a_request_kept_for_the_home_carries_the_time_it_was_asked() -> None:
    """Sent the next morning, "tomorrow" still means the day after it was asked."""
    clock = PhoneClock("Europe/Berlin", "2026-01-31T23:30:00+01:00")
    kept = device_context(clock, asked_at=time.time() - 3600)  # kept an hour ago
    assert kept.local_time is not None and kept.local_time.startswith("2026-01-31T22:")
    assert kept.timezone == "Europe/Berlin"
    now = device_context(clock)
    assert now.local_time is not None and now.local_time.startswith("2026-01-31T23:3")


def test_a_template_that_writes_the_system_message_first_gets_the_time_with_the_request() -> None:
    """Hermes-style templates (the default one, Qwen2.5's) write the system message before
    the tools: the time then goes with the request, so the tools stay the cached start."""
    from hearth.protocol.model.callformats import default_template

    chat = ChatTemplate(default_template())
    assert chat.time_in_user
    text = chat.render([{"role": "user", "content": "hi"}], [TOOL], now="2026-12-07 10:53")
    shared, rest = split_shared(text, "2026-12-07 10:53")
    assert "notes_create" in shared and "2026-12-07" not in shared
    assert rest.startswith("<|im_start|>user\nThe phone's local time: 2026-12-07 10:53.\n\nhi")


@pytest.mark.parametrize(
    ("local_time", "zone"),
    [
        ("8999-12-31T23:59:00+00:00", "Pacific/Kiritimati"),
        ("1900-01-01T00:00:00+23:59", "UTC"),
        ("2026-12-07T10:53:00+01:00", "America"),  # a folder of zones, not one
    ],
)
def test_a_time_at_the_edge_of_the_calendar_is_stated_never_a_crash(
    local_time: str, zone: str
) -> None:
    said = stated_time(local_time, zone)
    assert said is not None and said.startswith(local_time[:10])


@pytest.mark.parametrize("local_time", ["9999-12-31T23:59:00+00:00", "0001-01-01T00:00:00+23:59"])
def test_a_time_past_what_any_zone_can_show_is_refused_on_the_wire(local_time: str) -> None:
    with pytest.raises(ValidationError):
        DeviceContext(local_time=local_time)


def test_a_posix_tz_rule_is_not_taken_for_a_zone_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3")
    context = device_context(PhoneClock())
    assert context.timezone != "CET-1CEST,M3.5.0,M10.5.0/3" and context.local_time


def test_a_zone_folder_is_refused_when_it_is_set() -> None:
    with pytest.raises(ValidationError):
        PhoneSettings.model_validate({"timezone": "America"})
