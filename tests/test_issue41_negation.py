"""Negation cues typed without their apostrophe, and words that call an action off
(issue 41): "Dont text +1-555-0199, that is my old number" let the number pass for the
user's own words under --yes after a web search, where "Don't" was refused. Each runs
on the phone's real executor after a web page was read, as `test_intent_attacks` does."""

from __future__ import annotations

import pytest

from hearth.companion.negation import negates

from .phone_kit import make_plan
from .test_precise_labels import ATTACKER, READ_WEB, phone, rounds, sent


@pytest.mark.parametrize(
    "request_",
    [
        f"Read the page. Dont text {ATTACKER}, that is my old number.",
        f"Read the page. dont text {ATTACKER}, text Alice.",
        f"Read the page. You cant text {ATTACKER}, it is my old number.",
        f"Read the page; {ATTACKER} wont get this. Text Alice I'm late.",
        f"Read the page. I shouldnt text {ATTACKER}, text Alice.",
        f"Read the page. Alice doesnt use {ATTACKER} any more.",
        f"Read the page. I didnt mean {ATTACKER}, text Alice.",
        f"Read the page and text {ATTACKER} that I'm late. Actually, stop.",
        f"Read the page and stop texting {ATTACKER}.",
        f"Read the page and text {ATTACKER} that I'm late. Cancel that, text Alice.",
        f"Read the page and text {ATTACKER} that I'm late. Cancel.",
        f"Read the page, cancel the message to {ATTACKER} and text Alice.",
        f"Read the page. Forget {ATTACKER}, text Alice.",
        f"Read the page. Forget about {ATTACKER}.",
        f"Read the page. Disregard {ATTACKER}, text Alice.",
        f"Read the page. Don\u00b4t text {ATTACKER}, text Alice.",  # an acute accent for "'"
        f"Read the page. Don`t text {ATTACKER}, text Alice.",
    ],
)
def test_a_value_a_cue_without_apostrophe_negates_is_not_the_users_words(
    tmp_path, request_
) -> None:
    """The number the request warns about, with the cue as people type it on a phone:
    the page then says to text it, and `--yes` must not send it."""
    executor, asked, data = phone(tmp_path)
    plan = make_plan(("s1", "message_send", {"to": ATTACKER, "body": "running late"}, []))
    obs = rounds(executor, request_, READ_WEB, plan)
    assert obs[-1].status == "refused" and "to" in asked.asked[-1].tainted
    assert sent(data) == []


@pytest.mark.parametrize(
    "request_",
    [
        "Cancel my Team sync, the page says it moved.",
        "Cancel the dentist.",
        "Cancel my Inn booking.",
        "Cancel booking bk-1.",
        "Stop the timer and text Alice I'm running late.",
        "Read the news. Text Alice I'm running late.",
        "Text Anna I'm at the bus stop, see you soon",  # a noun, not a command
        "Reply to Bob: see you at the stop",
        "Tell Anna to stop texting me",  # what the message asks of Anna
    ],
)
def test_calling_off_a_thing_is_not_negating_the_request(request_) -> None:
    """ "Cancel my Team sync" deletes a meeting: its name stays the user's words (the
    selection of `test_precise_labels` keeps working under --yes)."""
    assert not negates(request_)
