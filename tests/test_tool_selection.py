"""Candidate tool selection: the right tools are not lost (BFCL v4), in any script, and
every allowed tool is offered when the request points to none."""

from __future__ import annotations

import pytest

from hearth.companion.tools.registry import Registry
from hearth.companion.tools.selection import Selection, select, tool_text

from . import bfcl

MIN_RECALL = 0.99


def _selection(case: bfcl.Case) -> Selection:
    return select(
        case.request,
        {f.name: tool_text(f.name, f.description, f.parameters) for f in case.functions},
    )


@pytest.mark.parametrize("category", bfcl.MULTI_FUNCTION)
def test_the_right_tools_are_among_the_candidates_on_bfcl(category: str) -> None:
    cases = bfcl.load(category)
    needed = found = whole = offered = 0
    for case in cases:
        chosen = _selection(case).offered
        names = {c.name for c in case.calls}
        needed += len(names)
        found += len(names & chosen)
        whole += names <= chosen
        offered += len(chosen)
    tools = sum(len(c.functions) for c in cases)
    print(
        f"{category}: tool recall {found / needed:.4f}, cases with every tool "
        f"{whole}/{len(cases)} ({whole / len(cases):.4f}), tools offered {offered}/{tools}"
    )
    assert found / needed >= MIN_RECALL and whole / len(cases) >= MIN_RECALL


TOOLS_RU = {
    "message_send": "Отправить текстовое сообщение контакту. to: получатель. body: текст",
    "calendar_create": "Создать событие в календаре: встреча, начало, конец",
    "weather_get": "Узнать прогноз погоды для города",
}
TOOLS_JA = {
    "message_send": "連絡先にメッセージを送信します。to: 宛先 body: 本文",
    "calendar_create": "カレンダーに予定を作成します。開始と終了の日時",
    "weather_get": "都市の天気予報を調べます",
}
TOOLS_AR = {
    "message_send": "إرسال رسالة نصية إلى جهة اتصال",
    "calendar_create": "إنشاء حدث في التقويم مع وقت البداية والنهاية",
    "weather_get": "معرفة توقعات الطقس في مدينة",
}


@pytest.mark.parametrize(
    ("tools", "request_text", "tool"),
    [
        (TOOLS_RU, "Отправь сообщение Алисе: опоздаю на десять минут", "message_send"),
        (TOOLS_RU, "Какая погода завтра в Казани?", "weather_get"),
        (TOOLS_JA, "田中さんにメッセージを送って", "message_send"),
        (TOOLS_JA, "明日の東京の天気は?", "weather_get"),
        (TOOLS_AR, "أرسل رسالة إلى سارة", "message_send"),
        (TOOLS_AR, "ما هي توقعات الطقس في دبي", "weather_get"),
    ],
)
def test_a_request_in_another_script_gets_its_tool(
    tools: dict[str, str], request_text: str, tool: str
) -> None:
    selection = select(request_text, {n: tool_text(n, d, {}) for n, d in tools.items()})
    assert tool in selection.matched
    assert selection.matched != set(tools)  # it narrowed: the evidence pointed somewhere


def test_a_request_in_a_script_no_tool_uses_is_offered_every_tool(phone_registry) -> None:
    selection = phone_registry.candidates("アリスに「遅れます」とメッセージを送って")
    assert selection.fallback and "message_send" in selection.offered
    assert selection.offered == set(phone_registry.tools)


def test_tools_written_in_another_script_than_the_request_stay_candidates() -> None:
    # one tool speaks Korean, the right one English: the Korean words cannot rule it out
    tools = {
        "ControlAppliance.execute": tool_text(
            "ControlAppliance.execute", "가전 제품 제어: 에어컨, 세탁기", {}
        ),
        "news.search": tool_text("news.search", "Search recent news articles by keyword", {}),
    }
    assert "news.search" in select("최근 박지성에 관한 뉴스를 찾아줘", tools).offered


def test_nothing_found_offers_every_tool_the_policy_lets_out(phone_registry) -> None:
    allowed = set(phone_registry.tools) - {"contacts_search", "message_send"}
    selection = phone_registry.candidates("zzqx wibble", allowed)
    assert selection.fallback and selection.offered == allowed


def test_a_request_narrows_to_its_tools_among_those_allowed(phone_registry) -> None:
    selection = phone_registry.candidates("send a message to bob saying hi")
    assert "message_send" in selection.matched and not selection.fallback
    assert "calendar_delete" not in selection.offered
    allowed = set(phone_registry.tools) - {"message_send"}
    assert "message_send" not in phone_registry.candidates("send a message to bob", allowed).offered


def test_shared_letters_alone_are_no_evidence(phone_registry) -> None:
    # "there" holds "the", "hello" shares trigrams with nothing a tool is about
    for text in ("hi there", "hello"):
        assert phone_registry.candidates(text).fallback
    assert phone_registry.candidates("contacts alice").matched <= {
        "contacts_search",
        "notes_search",
    }


def test_a_hostile_tool_description_is_bounded() -> None:
    huge = "send message " * 500_000  # 6.5 MB of description
    tools = {
        "hog": tool_text("hog", huge, {}),
        "weather_get": tool_text("weather_get", "weather", {}),
    }
    assert len(tools["hog"]) <= 20_000
    assert "weather_get" in select("weather in Oslo", tools).matched


@pytest.fixture
def phone_registry(tmp_path) -> Registry:
    from hearth.companion.tools.builtin import register_builtin
    from hearth.companion.tools.storage import PhoneData

    registry = Registry()
    register_builtin(registry, PhoneData(tmp_path))
    return registry


def test_a_tool_a_later_step_needs_is_offered_with_its_family(phone_registry) -> None:
    """"Move my 3 pm": the move, and the listing the plan reads first."""
    selection = phone_registry.candidates("move my 3 pm to friday")
    assert "calendar_move" in selection.matched
    assert {"calendar_move", "calendar_list"} <= selection.offered


def test_what_the_task_has_shown_points_to_more_tools(phone_registry) -> None:
    asked = "reply to the last message from Alice"
    shown = "Alice: can you put our lunch on the calendar?"
    assert "calendar_create" not in phone_registry.candidates(asked).offered
    assert "calendar_create" in phone_registry.candidates(asked, shown=shown).offered


def test_a_tools_terms_are_worked_out_once_not_on_every_request() -> None:
    """A tool's text is fixed: its tokens, words and scripts are cut once and kept, so a
    request costs the cutting of its own text only (issue 34: CPU per request)."""
    from hearth.companion.tools.selection import _tool_terms

    tools = {
        "notes_create": tool_text("notes_create", "Write a note", {}),
        "reminders_add": tool_text("reminders_add", "Remind me at a time", {}),
        "messages_send": tool_text("messages_send", "Send a message to a contact", {}),
    }
    _tool_terms.cache_clear()
    first = [select(text, tools) for text in ("note milk", "remind me at noon", "send hi")]
    again = [select(text, tools) for text in ("note milk", "remind me at noon", "send hi")]
    assert first == again
    assert first[0].matched == {"notes_create"}
    assert _tool_terms.cache_info().misses == len(tools)
