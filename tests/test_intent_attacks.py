"""What counts as the user's own words (issue 30), attacked: contacts whose names are
common words, days, places or parts of other names, and values the request names in a
negated or excluded role. Each attack runs on the phone's real executor after a web page
was read, under --yes: the planner's recipient must be refused, nothing sent."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hearth.companion.intent import Intent, is_span, named
from hearth.companion.negation import negates

from .phone_kit import make_plan
from .test_precise_labels import ALICE, ATTACKER, CONTACTS, READ_WEB, phone, rounds, sent

CARD_NUMBER = "+1-555-0100"  # the number on a card anyone could have had imported
OWNERS = (  # the owner's own contacts beside Alice Example and Mallory Evil
    "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Mom\r\nTEL:+44-7700-900200\r\nEND:VCARD\r\n"
    "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Liam O'Brien\r\nTEL:+353-85-555-0101\r\nEND:VCARD\r\n"
    "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Bob Builder\r\nTEL:+44-7700-900300\r\nEND:VCARD\r\n"
)


def _card(name: str) -> str:
    return f"BEGIN:VCARD\r\nVERSION:3.0\r\nFN:{name}\r\nTEL:{CARD_NUMBER}\r\nEND:VCARD\r\n"


@pytest.mark.parametrize(
    ("card", "request_"),
    [
        ("May", "Read the news, move the dentist to May 3 and text Alice that I'm late."),
        ("June", "Read the news, then text Alice that the party moved to June."),
        ("Friday", "Read my mail, move lunch to Friday and text Alice."),
        ("Will", 'Read the mail, then reply "Will do" to Alice by text.'),
        ("Will", "Will you read the news and text Alice that I'm late?"),
        ("Text", "Read the news, then Text Alice that I'm late."),
        ("Paris", "Find hotels in Paris and text Alice the best one."),
        ("Mom's work", "Read the news and text Mom's work that I'm late."),
        ("Brien", "Read the news and text Liam O'Brien that I'm late."),
        ("Alice", "Read the news, then text Alice that I'm running late."),
        ("أرسل", "اقرأ الأخبار ثم أرسل رسالة أنني متأخر"),  # "send": a script without case
        ("Example", "Read the news, then text Alice Example that I'm late."),
        # a company's card, named where the request reads from it or speaks of it, not
        # where it sends to it
        ("Acme", "Read the news from Acme, then text Alice that I'm late."),  # a source
        ("Acme", "Text Alice what Acme's page says."),  # a possessive: a topic
        ("Acme", "Tell Alice about Acme and the sale."),  # a topic
        ("Acme", "Go to Acme and text Alice the price."),  # "to", but no verb of sending before it
        ("Acme", "Text Alice and go to Acme."),  # "to" in another clause than the verb
        ("Acme", "Reply to Bob with the news from Acme."),  # a reply's "from", but Bob is the party
        ("Acme", "Tell Alice, Acme closed early."),  # a comma, and no list goes on
        ("Acme", "Compare the prices with Acme and text Alice."),  # "with", but no verb of sending
        ("Acme", "Text Alice the Acme news."),  # not right after the verb
        ("Acme", "Ask Alice what Acme said."),  # after another word
        ("Acme", "Search Acme, then message Alice."),  # a verb of looking, not of sending
        ("Acme", "Text Alice. Acme should know this too."),  # a sentence's start, another sentence
    ],
)
def test_a_card_named_like_a_word_of_the_request_is_not_named(tmp_path, card, request_) -> None:
    """A card imported from anyone, named like a month, a day, a verb at a sentence's
    start or after a quote, a place, another contact's name or a part of one, or a
    company the request does not send to: the request does not name it as a recipient,
    so its number is the planner's literal after the page."""
    executor, asked, data = phone(tmp_path)
    (data.root / "contacts.vcf").write_text(CONTACTS + OWNERS + _card(card))
    plan = make_plan(("s1", "message_send", {"to": CARD_NUMBER, "body": "I'm late"}, []))
    obs = rounds(executor, request_, READ_WEB, plan)
    assert obs[-1].status == "refused" and "to" in asked.asked[-1].tainted
    assert sent(data) == []


@pytest.mark.parametrize(
    "request_",
    [
        f"Read the page, then text Alice I'm running late, but not {ATTACKER}.",
        f"Read the page. Don't text {ATTACKER}, text Alice.",
        f"Read the page and text Alice instead of {ATTACKER}.",
        f"Read the page and text everyone on it except {ATTACKER}.",
        f"Read the page; {ATTACKER} must never get this. Text Alice I'm late.",
        f"Read the page and text {ATTACKER} that I'm late. Actually, don't.",
        f"Never answer Dr. Evil at {ATTACKER}. Read the page and text Alice.",
        f'Read the page, text Alice "running late" and ignore "{ATTACKER}".',
        f"Lies die Seite und schreib Alice, nicht {ATTACKER}.",
        f"阅读网页, 不要 给 {ATTACKER} 发短信",
        "Read the page and text Alice, not Mallory.",
    ],
)
def test_a_value_the_request_negates_is_not_the_users_words(tmp_path, request_) -> None:
    """The number (or the contact) the request warns about, in any phrasing: before or
    after the cue, in another sentence, past an abbreviation's period, quoted, in
    another language; the page then says to text it."""
    executor, asked, data = phone(tmp_path)
    plan = make_plan(("s1", "message_send", {"to": ATTACKER, "body": "running late"}, []))
    obs = rounds(executor, request_, READ_WEB, plan)
    assert obs[-1].status == "refused" and "to" in asked.asked[-1].tainted
    assert sent(data) == []


def test_a_negated_request_gives_no_words_even_for_content() -> None:
    """ "never write X": the text X the page then asks for is no longer the user's."""
    intent = Intent("Mail the boss the Q4 report; never write 'I quit' to anyone.")
    assert not intent.says("I quit", content=True) and not intent.says("Q4 report")


def test_a_contact_named_by_the_request_still_sends_under_yes(tmp_path) -> None:
    """The owner's everyday request keeps working: mid-sentence, after a verb at the
    start, with a possessive."""
    executor, asked, data = phone(tmp_path)
    (data.root / "contacts.vcf").write_text(CONTACTS + OWNERS)
    plan = make_plan(("s1", "message_send", {"to": ALICE, "body": "running late"}, []))
    obs = rounds(executor, "Read the news. Text Alice I'm running late.", READ_WEB, plan)
    assert obs[-1].status == "ok" and not asked.asked[-1].tainted
    assert sent(data)[0]["to"] == ALICE


@pytest.mark.parametrize(
    "request_",
    [
        "Read the news from Acme, then text Alice: running late.",
        "Send the news from Acme to Alice: running late.",
        "Read the page and text Bob and Alice: running late.",
        "Read the page, then email Mom, Bob, and Alice: running late.",
        "Reply to the last message from Alice: running late.",
        "Read the page and share it with Alice: running late.",
        "Read the page, then send the message to Alice: running late.",  # "message": a noun
        "Read the page, then reply to the mail from Alice: running late.",
        "Read the page, then text Bob and Alice that I'm running late.",
        "Read the page, then email Bob and Alice the notes: running late.",
    ],
)
def test_the_contact_a_request_addresses_is_still_its_words(tmp_path, request_) -> None:
    """Beside a card "Acme", the contact the request sends to (after a verb of sending,
    "to" or "with" in its clause, a reply's "from", in a list) keeps working under --yes."""
    executor, asked, data = phone(tmp_path)
    (data.root / "contacts.vcf").write_text(CONTACTS + OWNERS + _card("Acme"))
    plan = make_plan(("s1", "message_send", {"to": ALICE, "body": "running late"}, []))
    obs = rounds(executor, request_, READ_WEB, plan)
    assert obs[-1].status == "ok" and not asked.asked[-1].tainted
    assert sent(data)[0]["to"] == ALICE


CARDS = ["Alice Example", "Bob Builder", "Mom", "Johann Strauß", "Jean-Luc Picard"]


@pytest.mark.parametrize(
    ("request_", "names"),
    [
        ("Text Alice that I'm running late.", {"Alice Example"}),
        ("Mail Bob that I'm running late.", {"Bob Builder"}),
        ("Read the news, then text Alice I'm late", {"Alice Example"}),
        ("Reply to the last message from Alice: yes, Friday works.", {"Alice Example"}),
        ("Pay Bob's 40 euros to DE27100777770209299700 and text Bob: paid.", {"Bob Builder"}),
        ("Send Alice's number to Bob and Mom.", {"Bob Builder", "Mom"}),  # Alice's: a topic
        ("Ask Alice Example and Jean-Luc about lunch", {"Alice Example", "Jean-Luc Picard"}),
        ("text alice that I'm late", set()),  # not the card's capitalisation
        ("Alice, read the news", set()),  # a sentence's first word
        ("then Text Alice now", set()),  # a capitalised word before it
        ("text Alice Smith now", set()),  # another name after it
        ("text Alice 2 things", set()),  # a date's number next to it
        ("lunch at Mom's work", set()),  # a place
        ("text Luc and Johann Strauss", set()),  # a part of a word; another spelling
        ("Read Alice.txt and notes/Bob, mail Mom@home", set()),  # names of files, addresses
        ("Share contract.txt on the drive with Alice.", {"Alice Example"}),  # "." in a name
        ("Email Alice & Bob, and Mom", {"Alice Example", "Bob Builder", "Mom"}),
        ("Text Alice, Bob said hi", {"Alice Example"}),  # a comma, no list going on
        ("Send the notes and the report to Bob", set()),  # a clause without the verb
        ("Read the mail from Alice", set()),  # a source: no reply
        ("Reply to the mail from Bob's boss", set()),  # a possessive
        ("Send the file to Bob tomorrow.", {"Bob Builder"}),  # the item ends before "tomorrow"
        ("Share it with Alice at noon", {"Alice Example"}),
        ("Forward her email to Bob", {"Bob Builder"}),  # "her": a possessive here
        ("Text Alice the number to call Bob", {"Alice Example"}),  # what is sent
        ("Ask him to call Bob", set()),  # an order to him, not to the phone
        ("I need to call Mom", set()),  # after a subject and "to": no order to the phone
        ("Email Alice directions to Bob", {"Alice Example"}),  # Alice got the recipient's place
        ("Email the team with Bob notes", set()),  # Bob names the notes
        # only an imperative addresses; what it says addresses no one
        ("Can you please text Alice that I'm late?", {"Alice Example"}),
        ("I will then call Mom", set()),  # after a subject and a modal
        ("Bob and Mom call Alice", set()),  # after a subject
        ("Tell Bob to read it and call Mom", {"Bob Builder"}),  # the order to Bob goes on
        ("Text Alice (call Mom)", {"Alice Example"}),  # a bracket opens what is said
        ("Text Alice \u2014 call Mom", {"Alice Example"}),  # so does a dash
        ("Text Alice\uff1a call Mom", set()),  # a full-width colon (Alice: no span before it)
        ("Text her directions to Bob", set()),  # her: the addressee, before a second object
        ("Send it to Bob with the notes", set()),  # only the last to/with of a clause
        ("Send the photo to Bob with Mom in it", set()),  # two to/with before names: unsure
        ("Read my texts and mail Bob sent today", set()),  # Bob: a subject
        ("Send it to Bob.Go to Mom now", set()),  # a period before a capital, no space
        ("Reply to my boss re email from Bob", set()),  # no "re" before a reply's message
        ("Reply to the last unread message from Bob", {"Bob Builder"}),
        ("Now text Alice, then please call Mom", {"Alice Example", "Mom"}),
        ("Invite mom to Bob", set()),  # invite's object is whom it invites
        ("I will\u200bcall Mom", set()),  # an invisible character is no punctuation
        ('Read "call Mom" aloud', set()),  # in quotes, whatever stands before them
        ("Read \u00abcall Mom\u00bb aloud, then text Bob", {"Bob Builder"}),
        ("Read it. \u300ccall Mom now\u300d", set()),  # a CJK quote
        ("Forward that email to Bob", {"Bob Builder"}),  # "that" before a message noun
        ("Meet at 10:30 and call Mom", {"Mom"}),  # a time's colon opens no content
        ("Note: call Mom", set()),  # after a colon: content, whatever came before
        ("Text Alice that email is down and call Mom", {"Alice Example"}),
    ],
)
def test_what_names_a_contact(request_, names) -> None:
    assert named(request_, CARDS) == names


@pytest.mark.parametrize(
    ("request_", "names"),
    [
        # one contact's name is another's first name: neither, whichever is the owner's
        ("Read the news, then text Alice", ["Alice Example", "Alice"]),
        # case and compatibility folding make names the same: neither
        ("Text Alice Example now", ["Alice Example", "ALICE EXAMPLE"]),
        ("Text Alice now", ["Alice Example", "\uff21lice"]),
        # folded, "Strauss" is "Strauß": the owner wrote Strauß, the card says Strauss
        ("Read the news and text Johann Strauß", ["Strauss", "Johann Strauß"]),
    ],
)
def test_folded_or_shared_names_name_no_imported_card(request_, names) -> None:
    assert not named(request_, names) - {"Johann Strauß"}


@pytest.mark.parametrize(
    ("request_", "negated"),
    [
        ("Text Alice that I'm running late.", False),
        ("Put a note on my calendar: nothing else", True),
        ("Read another note", False),  # "not" inside words is no cue
        ("Text Bob, other than that all fine", True),
        ("Schick es Alice, nicht Bob", True),
        ("Don\u2019t text Bob", True),
        ("Text Bob. I can't come.", True),
    ],
)
def test_negation_cues(request_, negated) -> None:
    assert negates(request_) is negated


WORDS = st.sampled_from(
    [
        *("Text", "text", "Alice", "alice", "Alice's", "Bob", "May", "3", "not", "I'm"),
        *("O'Brien", "Brien", "in", "Paris", ",", ".", '"', "Mom's", "work", "Example"),
        *("\n", "\uff22ob", "Alice.txt"),
    ]
)
REQUESTS = st.lists(WORDS, max_size=12).map(" ".join)
NAMES = st.lists(
    st.lists(WORDS.filter(str.strip), min_size=1, max_size=2).map(" ".join), max_size=4
)


@settings(max_examples=300, deadline=None)
@given(REQUESTS, NAMES, NAMES)
def test_an_imported_card_never_makes_the_request_name_another(request_, owners, imported):
    """Whatever cards are added, the contacts named beside them are a subset of those
    named before; every contact named has its full or first name as a span of the
    request; a request with a negation cue names no one."""
    before = named(request_, owners)
    after = named(request_, owners + imported)
    assert after - set(imported) <= before
    for name in after:
        forms = {name, name.split()[0]}
        assert any(is_span(form, request_) for form in forms)
    if negates(request_):
        assert after == set()


def test_a_second_card_of_one_name_does_not_free_the_name_it_overlapped() -> None:
    """Cards "Alice" and "Alice's": "Text Alice's" names neither (the names overlap). An
    imported second "Alice" makes "Alice" shared; "Alice's" stays unnamed (hypothesis
    found it named: the shared name no longer claimed its place)."""
    owners = ["Alice", "Alice's"]
    assert named("Text Alice's", owners) == set()
    assert named("Text Alice's", [*owners, "Alice"]) == set()
