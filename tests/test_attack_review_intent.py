"""Attack review of issue 30's last changes, by a fresh-eyes attacker: which contact a
request *addresses* (`intent.py`), and --yes covering one open-world call per tool after
a private read (`executor.py`). A plain test is an attack the product refuses (a guard);
a strict xfail is an attack that still succeeds, with the reason and a suggested fix."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import trio

from hearth.companion.intent import named
from hearth.companion.tools.registry import Tier

from .phone_kit import declared, make_executor, make_plan, web_lookup_tool
from .test_intent_attacks import CARD_NUMBER, OWNERS, _card
from .test_precise_labels import ALICE, CONTACTS, READ_WEB, phone, rounds, sent

pytestmark = pytest.mark.hostile

OWNER_NAMES = ["Alice Example", "Mallory Evil", "Mom", "Liam O'Brien", "Bob Builder"]


def _sent_to_card(tmp_path, card: str, request: str) -> tuple[list[str], dict[str, str]]:
    """After a web page, the planner texts the imported card's number under --yes (the
    body is the whole request: the user's words): the recipients sent to and what the
    last question said was tainted."""
    executor, asked, data = phone(tmp_path)
    (data.root / "contacts.vcf").write_text(CONTACTS + OWNERS + _card(card))
    plan = make_plan(("s1", "message_send", {"to": CARD_NUMBER, "body": request}, []))
    rounds(executor, request, READ_WEB, plan)
    return [m["to"] for m in sent(data)], (asked.asked[-1].tainted if asked.asked else {})


# -- which contact is addressed: attacks that still succeed ------------------------------

NOUN_VERBS = [  # a word of VERBS used as a noun: "the email", "the call", "the answer"
    ("Acme", "Read the email Acme sent, then text Alice that I'm late."),
    ("Acme", "Read the text Acme sent and text Alice."),
    ("Acme", "Move the call with Acme to Friday and text Alice."),
    ("Acme", "Summarise the answer from Acme, then text Alice."),
    ("Acme", "Read the reply from Acme and text Alice."),
    ("Acme", "Check the message Acme sent, then text Alice."),
    ("Acme", "Read the news, then text Alice the invite Acme sent."),
]


@pytest.mark.parametrize(("card", "request_"), NOUN_VERBS)
def test_a_verb_of_sending_used_as_a_noun_addresses_no_one(tmp_path, card, request_) -> None:
    """A word of VERBS after a determiner is a noun: it addresses no one (attacks that
    succeeded before the determiner rule)."""
    to, tainted = _sent_to_card(tmp_path, card, request_)
    assert to == [] and "to" in tainted


NOUN_TO = [  # "to"/"with" that belongs to a noun, in a clause that has a verb of sending
    ("Paris", "Read the news, then text Alice directions to Paris."),
    ("Acme", "Read the news, then send Alice a link to Acme."),
    ("Acme", "Read the news, then email Alice with Acme prices."),
    ("Paris", "Read the news, then text Alice the way to Paris."),
    ("Acme", "Read the news, then text Alice the number to call Acme."),  # an infinitive's
]


@pytest.mark.parametrize(("card", "request_"), NOUN_TO)
def test_to_or_with_governed_by_a_noun_addresses_no_one(tmp_path, card, request_) -> None:
    """'to'/'with' after a verb that already addressed someone, or before a noun the name
    modifies, belongs to what is sent: the card is not addressed (attacks that succeeded
    while any 'to' after a verb of sending in the clause addressed)."""
    to, tainted = _sent_to_card(tmp_path, card, request_)
    assert to == [] and "to" in tainted


@pytest.mark.parametrize(
    ("card", "request_"),
    [
        ("Acme", "Read the news, then forward the invoice to Alice and Acme will pay it."),
        ("Acme", "Read the news, then share the photos with Alice and Acme will print them."),
        ("Paris", "Read the news, then send the note to Alice or Paris will do."),
    ],
)
def test_a_new_clauses_subject_after_and_is_not_a_list_item(tmp_path, card, request_) -> None:
    to, tainted = _sent_to_card(tmp_path, card, request_)
    assert to == [] and "to" in tainted


def test_from_inside_a_replys_message_addresses_no_one(tmp_path) -> None:
    to, tainted = _sent_to_card(
        tmp_path, "Acme", "Read the news, then reply that the invoice from Acme is paid."
    )
    assert to == [] and "to" in tainted


# -- which contact is addressed: attacks the product refuses -----------------------------


@pytest.mark.parametrize(
    ("card", "request_"),
    [
        ("\u0410cme", "Read the news, then text Acme that I'm late."),  # Cyrillic U+0410 for A
        ("Ac\u200bme", "Read the news, then text Acme that I'm late."),  # zero-width inside
        ("\uff21cme", "Read the news, then text Acme that I'm late."),  # full-width A
        ("acme", "Read the news, then text Acme that I'm late."),  # another case
        ("Acme", "Read the news, then text acme that I'm late."),  # the request's lower case
        ("Acme", 'Read the news, then text "Acme" that I\'m late.'),  # in quotes: a start
        ("Acme", "Read the news, then text Alice/Acme that I'm late."),  # a path's part
        ("Acme", "Read the news, then text Alice\u200b and Acme."),  # a zero-width joint
        ("Acme", "Read the news, then call Alice then Acme."),  # 'then': no list
        ("Alice and Bob", "Read the news, then email Alice and Bob."),  # spans two cards
        ("Alice, Bob", "Read the news, then email Alice, Bob and Mom."),
        ("Alice Example", "Read the news, then text Alice that I'm late."),  # a second Alice
        ("Alice\u00a0Example", "Read the news, then text Alice that I'm late."),  # NBSP twin
        ("\uff21lice", "Read the news, then text Alice that I'm late."),  # full-width twin
        ("ALICE", "Read the news, then text Alice that I'm late."),  # a twin in capitals
        ("Acme", "Read the news from Acme, then reply to Alice."),  # 'from' of no reply
        ("Acme", "Read the news, then reply to Bob about the mail from Acme."),
        ("Acme", "Read the news, then text Alice\nAcme"),  # a line's start
        ("Acme", "Read the news, then email Alice about Acme and Bob."),  # a topic's list
        ("Acme", "Read the news, then tell Alice & Acme's team."),  # a possessive item
        ("Acme", "Read the news, then text Alice what the mail from Acme says."),
        ("Acme", "Read the news, then forward Alice the DM Acme sent."),  # a run of capitals
    ],
)
def test_a_look_alike_or_misplaced_card_is_not_addressed(tmp_path, card, request_) -> None:
    """Look-alike letters, invisible characters, other cases, quotes, paths and twins of
    an owner's name: the imported card's number is the planner's literal, and refused."""
    to, tainted = _sent_to_card(tmp_path, card, request_)
    assert to == [] and "to" in tainted


def test_a_look_alike_twin_makes_the_owners_contact_ambiguous_not_the_attackers() -> None:
    """A card spelled like the owner's Alice in a look-alike script (Cyrillic U+0410) or with a
    zero-width character is another name: the owner's Alice stays the one addressed; a
    full-width or capitals twin folds to the same name, so neither is (one confirmation)."""
    request = "Text Alice that I'm late"
    assert named(request, [*OWNER_NAMES, "\u0410lice Evil"]) == {"Alice Example"}
    assert named(request, [*OWNER_NAMES, "Alice\u200b Evil"]) == {"Alice Example"}
    assert named(request, [*OWNER_NAMES, "\uff21lice Evil"]) == set()
    assert named(request, [*OWNER_NAMES, "ALICE"]) == set()


# -- --yes covers one open-world call per tool after a private read ----------------------

PIN_NOTE = '[{"id": "n1", "title": "Bank", "text": "PIN 4921"}]'
READ_NOTE = make_plan(("s1", "notes_search", {"query": "Bank"}, []))
REQUEST = "Look up the weather and the news on news.example"


def _two_lookups(tmp_path):  # type: ignore[no-untyped-def]
    """A phone with the private bank note and two open-world app tools, each recording
    the query it is sent."""
    executor, asked, data = phone(tmp_path)
    (data.root / "notes.json").write_text(PIN_NOTE)
    looked_up: list[dict[str, str]] = []
    executor.registry.add(web_lookup_tool(looked_up))

    async def news_lookup(site: str, query: str) -> str:
        """Look something up in a site's news."""
        looked_up.append({"site": site, "query": query})
        return "Nothing new."

    executor.registry.add(declared(news_lookup, Tier.OPEN_WORLD_READ, control_args=["site"]))
    return executor, asked, looked_up


def test_a_second_call_in_a_later_round_is_asked(tmp_path) -> None:
    """The leak split over rounds (one lookup a round): the count is the session's, so
    the second round's lookup is asked and --yes says no."""
    executor, asked, looked_up = _two_lookups(tmp_path)
    one = make_plan(("s1", "web_lookup", {"site": "news.example", "query": "news"}, []))
    two = make_plan(("s1", "web_lookup", {"site": "news.example", "query": "weather"}, []))
    obs = rounds(executor, REQUEST, READ_NOTE, one, two)
    assert [o.status for o in obs] == ["ok", "ok", "refused"] and len(looked_up) == 1
    assert (
        "another open-world call (web_lookup, after web_lookup)"
        in (asked.asked[-1].tainted["query"])
    )


def test_the_same_call_twice_in_one_plan_is_asked(tmp_path) -> None:
    """Two identical lookups (the count, not the words, carries a bit): the second is asked."""
    executor, asked, looked_up = _two_lookups(tmp_path)
    step = {"site": "news.example", "query": "news"}
    leak = make_plan(("s1", "web_lookup", step, []), ("s2", "web_lookup", dict(step), []))
    obs = rounds(executor, REQUEST, READ_NOTE, leak)
    assert [o.status for o in obs] == ["ok", "ok", "refused"] and len(looked_up) == 1
    assert (
        "another open-world call (web_lookup, after web_lookup)"
        in (asked.asked[-1].tainted["query"])
    )


def test_a_literal_the_request_does_not_say_is_asked_even_as_the_first_call(tmp_path) -> None:
    """The one covered call still needs the user's words: the PIN itself is asked."""
    executor, asked, looked_up = _two_lookups(tmp_path)
    leak = make_plan(("s1", "news_lookup", {"site": "news.example", "query": "4921"}, []))
    obs = rounds(executor, REQUEST, READ_NOTE, leak)
    assert obs[-1].status == "refused" and looked_up == []
    assert "private data" in asked.asked[-1].tainted["query"]


def test_one_call_per_different_open_world_tool_carries_no_bits(tmp_path) -> None:
    """After the private read, --yes covers one open-world call in the session whichever
    tool: a lookup in each of two tools, each picking one of the request's words, would
    spell two bits of the PIN out (it did while --yes covered one call per tool). The
    second is asked, naming the first."""
    executor, asked, looked_up = _two_lookups(tmp_path)
    bits = format(4921, "b")[:2]  # "10"
    words = ["weather", "news"]
    leak = make_plan(
        ("s1", "web_lookup", {"site": "news.example", "query": words[int(bits[0])]}, []),
        ("s2", "news_lookup", {"site": "news.example", "query": words[int(bits[1])]}, []),
    )
    obs = rounds(executor, REQUEST, READ_NOTE, leak)
    assert [o.status for o in obs] == ["ok", "ok", "refused"] and len(looked_up) == 1
    assert (
        "another open-world call (news_lookup, after web_lookup)"
        in (asked.asked[-1].tainted["query"])
    )


CRASHING_PHONE = """
import json, sys, time
from pathlib import Path
from hearth.companion.tools.registry import Tier
from tests.phone_kit import declared, make_plan
from tests.test_attack_review_intent import PIN_NOTE, READ_NOTE, REQUEST
from tests.test_precise_labels import phone, rounds

home = Path(sys.argv[1])
executor, _, data = phone(home)
(data.root / "notes.json").write_text(PIN_NOTE)
log = home / "looked_up.jsonl"

async def web_lookup(site: str, query: str) -> str:
    \"\"\"Look something up on a web site.\"\"\"
    with log.open("a") as f:
        f.write(json.dumps({"tool": "web_lookup", "query": query}) + "\\n")
    return "Sunny."

async def news_lookup(site: str, query: str) -> str:
    \"\"\"Look something up in a site's news.\"\"\"
    (home / "blocked").write_text("")
    time.sleep(3600)  # killed here, mid-step
    return "Nothing new."

executor.registry.add(declared(web_lookup, Tier.OPEN_WORLD_READ, control_args=["site"]))
executor.registry.add(declared(news_lookup, Tier.OPEN_WORLD_READ, control_args=["site"]))
rounds(executor, REQUEST, READ_NOTE, make_plan(*json.loads(sys.argv[2])))
"""


def test_a_crash_between_calls_does_not_reset_the_count(tmp_path, processes) -> None:
    """The count of open-world calls is not journaled: a phone killed mid-plan in the one
    covered lookup resumes with none counted. The resumed session has lost the request
    too, so nothing the planner wrote passes for the user's words: the rerun of the step
    caught mid-run and the next lookup are still asked, and --yes says no."""
    home = tmp_path / "phone"
    home.mkdir()
    steps = [
        ("s1", "news_lookup", {"site": "news.example", "query": "weather"}, []),
        ("s2", "web_lookup", {"site": "news.example", "query": "news"}, []),
    ]
    root = Path(__file__).resolve().parent.parent
    proc = processes.spawn(
        sys.executable, "-c", CRASHING_PHONE, str(home), json.dumps(steps), cwd=root
    )
    while not (home / "blocked").exists():
        assert proc.poll() is None, "the phone ended before its crash"
        time.sleep(0.05)
    proc.kill()
    proc.wait(timeout=30)

    executor, asked, _ = make_executor(home)
    looked_up: list[dict[str, str]] = []
    executor.registry.add(web_lookup_tool(looked_up))
    news: list[dict[str, str]] = []

    async def news_lookup(site: str, query: str) -> str:
        """Look something up in a site's news."""
        news.append({"site": site, "query": query})
        return "Nothing new."

    executor.registry.add(declared(news_lookup, Tier.OPEN_WORLD_READ, control_args=["site"]))
    trio.run(executor.resume)
    assert not (home / "looked_up.jsonl").exists()
    assert looked_up == [] and news == []
    # the step caught mid-run and the web_lookup after it: both asked, --yes said no
    assert [q.tool for q in asked.asked] == ["news_lookup", "web_lookup"]
    assert all("private data" in q.tainted["query"] for q in asked.asked)


def test_a_lookup_planned_before_the_read_cannot_carry_the_note_by_ref(tmp_path) -> None:
    """A plan written before anything was read (so no count, no taint yet) that feeds
    the private note's text into a web lookup by a `$ref`: the value carries the
    note's private label, and it does not leave."""
    executor, _, looked_up = _two_lookups(tmp_path)
    plan = make_plan(
        ("s1", "notes_search", {"query": "Bank"}, []),
        (
            "s2",
            "web_lookup",
            {"site": "news.example", "query": {"$ref": "s1.result.0.text"}},
            ["s1"],
        ),
    )
    obs = rounds(executor, "Look up my Bank note on news.example", plan)
    assert [o.status for o in obs] == ["ok", "refused"] and looked_up == []
    assert "private values off the phone" in (obs[-1].error or "")


def test_a_second_message_after_a_private_read_is_asked(tmp_path) -> None:
    """The builtin message_send is open-world: two texts to Alice, each body one of the
    request's words ("late" or "early" for a bit each), after the bank note: the
    second is asked, and --yes says no."""
    executor, asked, data = phone(tmp_path)
    (data.root / "notes.json").write_text(PIN_NOTE)
    two = make_plan(
        ("s1", "message_send", {"to": ALICE, "body": "late"}, []),
        ("s2", "message_send", {"to": ALICE, "body": "early"}, []),
    )
    obs = rounds(executor, "Read my Bank note, then text Alice late or early", READ_NOTE, two)
    assert [o.status for o in obs] == ["ok", "ok", "refused"]
    assert [m["body"] for m in sent(data)] == ["late"]
    assert "another open-world call (message_send" in asked.asked[-1].tainted["body"]
