"""The user's own words: a value that comes from the user's request is the user's intent.

A value counts as the user's own words when, NFC-normalised, it is exactly a *span of
the request* (the request also NFC-normalised): the same characters, the same case, no
compatibility folding (a full-width or look-alike letter is another letter), at least
`MIN_CHARS` characters long, holding a letter or a digit, that starts at the start of
the request or after whitespace, an opening bracket or quote, `#` or a currency sign,
and ends at the end of the request or before whitespace, a closing bracket or quote, or
sentence punctuation (`.,;:!?`) that is itself followed by one of those or the end
("report.txt" in "Read me report.txt." is a span; "DE8937" in "DE89370400" and "org"
in "alice@example.org" are not). A number counts when its decimal form (`950`, `9.5`; `950.0` as
`950`) is such a span, of any length. Nothing else counts: not a part of a word of the
request, not the request's words in another case, not text the planner read.

The text of a message or an event (a content argument, not one that chooses where
data goes) counts the same way, with case folded ("Running late" for "running late").
Numbers and formatted values there (dates, amounts: no two letters in a row and at
most two letters in all, invisible characters dropped) are not text anyone could be
steered by.

A request that holds a negation or exclusion cue ("not", "never", "don't" and "dont",
"except", "instead of", "other than", "avoid", "ignore", "forget", "without", "nor",
"unless", "stop" or "cancel" calling off an action, …: see `negation.py`) gives no
value as the user's words, neither a span nor a contact's entry. Why the whole
request and not the clause the cue governs: what a cue governs is not found reliably
by rule. It reaches back across sentences ("Text +1-555-0199 the
code. Actually, don't."; "Not that IBAN"), over lists ("never reply to A, B or C") and
over abbreviations that look like a sentence's end ("Never answer Dr. Evil at …"), and
it may stand after what it governs ("+1-555-0199 must never get this"). A value the
user warns about must never pass for the user's words; a benign request with a cue
only costs one confirmation, and only once the session read untrusted input or a
friend's planner plans.

A contact the request *names*: the contact's full name, or its first name (of
`MIN_CHARS` letters or more), when no other contact has that full or first name
(compared NFKC-folded and case-folded: "ALICE EXAMPLE" and a full-width "Alice" share
it), is *said* in the request. Said means an occurrence that is

- the name exactly: NFC, the card's own case ("text alice" says no "Alice"), runs of
  spaces in the card as one, beginning with an uppercase or titlecase letter (a card
  named "text" is never said; nor a name in a script without case);
- whole words (runs of letters, marks and digits, an apostrophe or hyphen between two
  of them inside the word): from a word's start to a word's end or to a possessive
  "'s", where the words are a span as above ("Alice's" says Alice; "Brien" in
  "O'Brien", "Luc" in "Jean-Luc", "Ann" in "Annie", "Alice" in "Alice.txt" or
  "notes/Alice" say no one);
- not the first word of a sentence: the request's or a line's start, after
  `.!?…:;` or an opening quote or bracket, where any word is capitalised (a card
  named "Text", "Will" or "Please" is not said by "Text Alice…", "Will you…",
  `"Will do"`);
- the whole run of capitalised words it stands in: no capitalised word (but a
  sentence's first, and the pronoun "I", "I'm") right before or after it with only
  spaces between ("then Text Alice" says neither "Text" nor "Alice"; "Will Smith"
  does not say "Will");
- not a date or a place: not an English day or month name ("to Friday", "in June":
  a contact named "June" is never said), no word holding a digit right before or
  after it ("Mai 3", "3 Mai", "Alice 2"), and not right after "in", "on", "at", "by",
  "until", "till", "since", "during", "before", "after" or "near" ("in Paris", "at
  Riverside");
- overlapping no occurrence that says another contact ("Mom's work" says neither the
  card "Mom" nor the card "Mom's work" when both exist).

A contact said counts only where the request *addresses* it: the request orders the
phone to send, call or share to it. Words are split by punctuation: any Unicode
punctuation between two words (a comma, a colon, a dash, a bracket, a quote; full-width,
ideographic and Arabic ones too) ends a *clause*, and `.!?…` before a space, a CJK full
stop (with or without a space) or a line break ends a *sentence*; only `./@_` with no
space around them join two words into one token ("contract.txt", "notes/Bob"), but a
period before a capital letter ends a sentence ("Bob.Go to Acme"; "Bob.go to Acme", one
token, is the one typo the clause cannot see through). An occurrence (not before a
possessive "'s": "Acme's news" is a topic, so is "Alice's number") is addressed when it
is not in a *message*, is not followed by a past tense (a word of `DID`, or a lower-case
word ending in "ed": "the mail Acme sent", "and mail Acme returned": a subject), and

- the word right before it is an *imperative* of a verb of sending or speaking in
  `VERBS` ("text", "call", "email", "tell", "ask", "invite", "share", "send", "forward",
  "reply", "pay", …): the first word of its clause (the text's start, after punctuation,
  after "and", "or", "but" or "then" — not "I then" or "will then" — or after a word of
  `SOFTENERS`, "please", "just", "now", … that itself stands there), or after
  "can/could/would/will you" at a sentence's start ("Can you please text Alice"). A
  verb after a subject, a modal, "to", a determiner or an adjective is none ("I will
  call Acme", "have Bob call Acme", "ask her to call Acme", "I need to call Mom", "the
  last email Acme sent", "the voice message Acme left"); or
- the word right before it is "to" or "with", the last such word of an imperative's
  clause (not counting an infinitive's "to"; the clause runs back to punctuation, "and",
  "or", "but", "then", a message's start or a subject pronoun: "send it to Bob with the
  notes" and "send the notes and the report to Bob" address no one),
  where the verb has no addressee before it: no word at all after a verb of `PERSONAL`
  (call, invite, remind, …: "invite Alice to Paris"), no infinitive ("ask my assistant
  to book a meeting with Acme"), no earlier to/with before a capitalised word (whom is
  unsure: "email the directions to Acme to Alice", "send the photo to Bob with Mom in
  it" address no one), no pronoun me, him, her, us, them or you before more
  words ("text me the way to Paris"; but "send them to Alice", and "her" before a word of `LETTERS`
  is hers: "forward her email to Bob"), no capitalised name before more words ("text
  Alice directions to Paris"; but "send Q4 report to Alice", "share Google Doc with
  Alice": a word with a digit or only capitalised words is what is sent), no determiner
  after its first word but after a preposition ("text my sister the way to Paris",
  "email the team our trip to Acme"; but "share contract.txt on the drive with Alice");
  and the name ends its item: the text ends, punctuation, a subject pronoun ("to Alice
  I'm late") or a word of `FIRST_FOLLOWERS` follows (and, then, that, who, the, at,
  tomorrow, via, as, right, quickly, again, re, pls, telling, …; not "with Acme
  prices", where Acme names the prices); or
- the word right before it is "from" in exactly "reply/answer/respond to the [up to
  three describing words: lower case, no possessive, no preposition, not "re"]
  message|mail|email|text|note|… from X", the reply an imperative and only spaces
  between ("reply to the last message from Alice"; not "reply to my boss with the quote
  from Acme", "reply to my boss re the offer from Acme", "reply to my last email from
  Berlin", "read the news from Acme");

or it is a later item of a list whose first item is so addressed: items are runs of
capitalised words, separated by "and", "or", "&" or a comma ("email Alice and Bob",
"text Alice, Bob, and Mom"); an item after a comma alone must be followed by another, so
"tell Alice, Acme closed early" does not address Acme; and a later item must end there:
the text ends, punctuation, "that", "about", "saying" or a determiner follows, or "and"
or "or" before another capitalised word ("forward it to Alice and Acme tomorrow will pay
it": Acme starts a new clause).

A *message* is content, not an order: everything after a colon before a space or a line
break (not "10:30"), a full-width colon or a dash, anywhere earlier in the request,
whatever came before it ("add a reminder: call Acme", "text Alice:\nCall Acme when you
land", "My to-dos: call Acme", a list's "- call Acme"); everything inside double, curly,
angle or CJK quotes or brackets opened earlier in the request and not yet closed (an odd
number of straight double quotes, more opening than closing curly or angle quotes or
brackets, an open CJK quote: 'Read "call Acme" aloud', 'text Alice "Landed. Call
Acme."', "text Alice (call Acme)"); and what an imperative of `VERBS` says: the rest of
its sentence after a single quote or a message's start (that, saying, about, if,
whether, so, why, how, who, what, which, where, because, when, before, while, after,
until, once; but "that" right after an imperative and before a word of `LETTERS` is a
determiner: "forward that email to Alice") or after an infinitive ("to call"): "send the
report to Bob before we go to Acme", "tell Bob to read it and call Acme" address Bob
only. Anything else (a source, "from Acme"; a topic, "about Acme", "the Acme report"; a
place; a possessive) names no recipient. A contact addressed in words these rules miss
("let Alice know", "send it to Bob with the notes", "my boss and Bob", "I need to call
Mom", "Read the news: then text Alice") costs one confirmation: when in doubt the rule
says no.

That contact's phone numbers and e-mail addresses, as the phone's own contacts hold
them, count as the user's words ("text Alice": Alice's number), each only when it has
the shape of one (`is_address`: a card anyone sent may hold any text under "EMAIL",
an event's id say, which must not become a trusted identifier of the owner's data).
Every rule fails safe: a contact the request does name but that these rules miss costs
one confirmation; a card that anyone can have imported ("Text", "May", "Paris", "Alice"
beside the owner's "Alice Example") would otherwise lend its number the user's
authority. What these rules cannot tell is a capitalised word right after a verb of
sending or its "to" that is not a person ("send it to Acme" where Acme is a company:
the user did ask to send it there, and a card named so is addressed).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from .negation import negates
from .words import Word, words

MIN_CHARS = 3  # a shorter string from the request ("to", "a") says nothing about intent
MAX_CHARS = 2000  # longer values are never looked up (the request is capped too)


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


OPENING = set("([{<\"'\u201c\u2018\u00ab#")  # may come right before a span
CLOSING = set(")]}>\"'\u201d\u2019\u00bb")  # may come right after one
SENTENCE = set(".,;:!?")  # may come right after one when a space or the end follows


def _starts_token(text: str, at: int) -> bool:
    if at == 0:
        return True
    before = text[at - 1]
    return before.isspace() or before in OPENING or unicodedata.category(before) == "Sc"


def _ends_token(text: str, at: int) -> bool:
    if at >= len(text):
        return True
    after = text[at]
    if after.isspace() or after in CLOSING:
        return True
    return after in SENTENCE and (at + 1 == len(text) or _ends_token(text, at + 1))


def is_span(value: str, text: str) -> bool:
    """Whether `value` occurs in `text` as a span: it starts after whitespace, an
    opening bracket or quote, `#` or a currency sign (or at the start), and ends before
    whitespace, a closing bracket or quote, or sentence punctuation that ends the text
    or is followed by one of those (or at the end)."""
    if not value or value != value.strip():
        return False
    start = text.find(value)
    while start != -1:
        if _starts_token(text, start) and _ends_token(text, start + len(value)):
            return True
        start = text.find(value, start + 1)
    return False


def _number_forms(value: float | int) -> list[str]:
    if isinstance(value, bool):
        return []
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return [str(value)]


@dataclass
class Intent:
    """The user's request, and the contact entries it names (filled in by the executor
    from the phone's own contacts, once per session)."""

    request: str
    contact_entries: frozenset[str] = frozenset()
    _normal: str = field(init=False, repr=False)
    _negated: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._normal = _nfc(self.request)
        self._negated = negates(self._normal)

    def says(self, value: object, *, content: bool = False) -> bool:
        """Whether `value` (a JSON scalar) is the user's own words (see the module). For
        `content` (the text of a message, not where it goes) case does not matter."""
        if self._negated:
            return False
        if isinstance(value, str):
            if value in self.contact_entries:
                return True
            text = _nfc(value)
            request = self._normal
            if content:
                text, request = text.casefold(), request.casefold()
            return (
                MIN_CHARS <= len(text) <= MAX_CHARS
                and any(ch.isalnum() for ch in text)
                and is_span(text, request)
            )
        if isinstance(value, int | float) and not isinstance(value, bool):
            return any(is_span(form, self._normal) for form in _number_forms(value))
        return False

    def says_as_typed(self, value: object) -> bool:
        """Whether `value` is the user's own words as typed: a contact's entry, or a span
        of the request with its own characters (no case folded, no normalisation), or a
        number as `says` has it. What the planner writes after it read private data must
        be so: the case of a letter, or an accent composed or not, would be its choice."""
        if isinstance(value, str) and value not in self.contact_entries:
            return (
                not self._negated
                and MIN_CHARS <= len(value) <= MAX_CHARS
                and any(ch.isalnum() for ch in value)
                and is_span(value, self.request)
            )
        if isinstance(value, float):  # 5.0 where the request says 5: the type is a choice
            return not self._negated and is_span(repr(value), self.request)
        return self.says(value)


PHONE_CHARS = set("0123456789+-.() ")
MIN_PHONE_DIGITS = 5
EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(\.[^@\s.]+)+")


def is_address(entry: str) -> bool:
    """Whether a contact's entry has the shape of a phone number (digits, of
    `MIN_PHONE_DIGITS` or more, with `+-.() `) or of an e-mail address (one `@`, a
    dotted domain, no spaces)."""
    if set(entry) <= PHONE_CHARS:
        return sum(ch.isdigit() for ch in entry) >= MIN_PHONE_DIGITS
    return EMAIL.fullmatch(entry) is not None


INVISIBLE = {"Cf", "Mn", "Me"}  # zero-width and soft characters, marks: not letters apart
MAX_LETTERS_APART = 2  # "T" and "Z" of an ISO date-time; "C A L L" is a word


def free_text(value: object) -> bool:
    """Whether `value` is text a reader could be told something by: a string with two
    letters in a row once invisible characters are dropped, or more than
    `MAX_LETTERS_APART` letters in all (not a date, a time, an amount or an id of
    digits; "c a l l" and "c\\u200ball" are text)."""
    if not isinstance(value, str):
        return False
    shown = "".join(ch for ch in value if unicodedata.category(ch) not in INVISIBLE)
    letters = re.findall(r"[^\W\d_]", shown)
    return len(letters) > MAX_LETTERS_APART or re.search(r"[^\W\d_]{2}", shown) is not None


CAPITALS = {"Lu", "Lt"}
SENTENCE_END = set(".!?\u2026:;\u3002\uff01\uff1f")  # what a sentence's first word follows
LINE_BREAKS = set("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
TAILS = ("", "'s", "\u2019s")  # what may follow a name inside its last word
PLACE_OR_TIME = frozenset(
    ["in", "on", "at", "by", "until", "till", "since", "during", "before", "after", "near"]
)
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August"]
MONTHS += ["September", "October", "November", "December"]
CALENDAR = frozenset(DAYS + MONTHS)  # never a name said: "June" neither


def _capital(word: str) -> bool:
    return unicodedata.category(word[0]) in CAPITALS


def _opens_sentence(text: str, at: int) -> bool:
    """Whether the word at `at` is a sentence's first: the text's or a line's start, or
    after sentence punctuation or an opening quote or bracket."""
    i = at - 1
    while i >= 0 and text[i].isspace():
        if text[i] in LINE_BREAKS:
            return True
        i -= 1
    return i < 0 or text[i] in SENTENCE_END or text[i] in OPENING


def _past(word: str) -> bool:
    """Whether `word` is a past tense: a word of `DID`, or lower case ending in "ed" (but
    a word of `FIRST_FOLLOWERS`: "unchanged")."""
    plain = word.casefold()
    ending = len(plain) > 3 and plain.endswith("ed") and plain not in FIRST_FOLLOWERS
    return plain in DID or (ending and word.islower())


def _gap(text: str, ws: list[Word], k: int) -> str:
    """The text between word `k - 1` and word `k`."""
    return text[ws[k - 1].end : ws[k].start]


def _space(gap: str) -> bool:
    """Whether `gap` is spaces only, no line break."""
    return gap.isspace() and not LINE_BREAKS & set(gap)


def _said_at(text: str, ws: list[Word], start: int, end: int) -> bool:
    """Whether `text[start:end]` says a name (see the module): whole words, not a
    sentence's first, the whole run of capitalised words, not a date or a place."""
    first = next((i for i, w in enumerate(ws) if w.start == start), None)
    last = next(
        (i for i, w in enumerate(ws) if w.start < end <= w.end and text[end : w.end] in TAILS),
        None,
    )
    if first is None or last is None or _opens_sentence(text, start):
        return False
    if not (_starts_token(text, start) and _ends_token(text, ws[last].end)):
        return False  # inside a path, an address or a file's name: "Alice.txt", "x/Alice"
    if first > 0 and _space(text[ws[first - 1].end : start]):
        before = ws[first - 1]
        if (
            before.text.casefold() in PLACE_OR_TIME
            or any(ch.isdigit() for ch in before.text)
            or (_capital(before.text) and not _opens_sentence(text, before.start))
        ):
            return False
    if last + 1 < len(ws) and _space(_gap(text, ws, last + 1)):
        after = ws[last + 1].text
        pronoun = after == "I" or after.startswith(("I'", "I\u2019"))
        if any(ch.isdigit() for ch in after) or (_capital(after) and not pronoun):
            return False
    return True


SENDING = (  # a verb of sending or speaking: its imperative addresses
    "text message sms mail email e-mail call phone ring dial ping tell ask notify inform "
    "remind invite contact reply answer respond write send forward share cc bcc thank dm pay"
)
VERBS = frozenset(SENDING.split())
PERSONS = "call phone ring dial ping notify inform remind invite contact thank"
PERSONAL = frozenset(PERSONS.split())  # whose object is always whom they address
REPLIES = frozenset(["reply", "answer", "respond"])  # "reply to the message from X"
MESSAGES = "message mail email e-mail text note sms dm voicemail letter messages mails emails texts"
MAX_DESCRIBING = 3  # words between "the"/"my" and the message a reply answers
LETTERS = frozenset(MESSAGES.split())  # what a reply's "from" may follow
TOWARD = frozenset(["to", "with"])  # addresses, in an imperative's clause
CONNECTORS = frozenset(["and", "or"])  # between the items of a list
STARTERS = frozenset(["and", "or", "but", "then"])  # a new clause starts here
SOFTENING = "also please pls just kindly now first next finally quickly immediately"
SOFTENERS = frozenset(SOFTENING.split())  # "then please text Alice", "now call Mom"
ASKING = frozenset(["can", "could", "would", "will"])  # "Can you text Alice?"
MODALS = ASKING | frozenset(["should", "shall", "must", "may", "might"])
SUBJECTS = frozenset(["i", "we", "you", "he", "she", "they"])  # also as "I'm", "we'll", …
OBJECTS = frozenset(["me", "him", "her", "us", "them", "you"])  # "text me the way"
SAYING = (  # what follows one of these, to the sentence's end, is said, not sent to
    "that saying about if whether so why how who what which where because when before "
    "while after until once"
)
MESSAGE_STARTS = frozenset(SAYING.split())
NOUN_MARKERS = (  # start a noun phrase: "text my sister the way", "the email Acme sent"
    "the a an my your his her its our their this that these those every each any no some all both"
)
DETERMINERS = frozenset(NOUN_MARKERS.split())
BETWEEN = "of for from on in at by to with into onto over under near via through about per"
PREPOSITIONS = frozenset(BETWEEN.split())  # a determiner after one starts no second object
FOLLOWS = (  # may follow the item right after to/with/from: "to Bob tomorrow", "via email"
    "for to with from at on in by via as until till since during near today tonight "
    "tomorrow now asap too also again right quickly directly immediately soon later first "
    "instead unchanged please pls thanks thank yes re regarding telling explaining asking"
)
FIRST_FOLLOWERS = STARTERS | MESSAGE_STARTS | DETERMINERS | frozenset(FOLLOWS.split())
LATER_FOLLOWERS = DETERMINERS | frozenset(["that", "about", "saying"])  # "and Acme will": no
JOINTS = set("./@_")  # with no space: one token ("contract.txt", "notes/Bob")
DONE = "sent wrote left said posted forwarded shared mailed emailed texted replied called asked"
DID = frozenset(DONE.split())  # after a name: its subject ("the mail Acme sent")
SENTENCE_BREAK = re.compile(r"[.!?\u2026]\s|[\u3002\uff01\uff1f\uff0e\uff61]")
OPENERS = {"Ps", "Pd"}  # opening brackets, dashes (and ":", "'"): what opens a message


def _joint(gap: str) -> bool:
    """Whether `gap` joins two words into one token ("contract.txt", "alice@example")."""
    return bool(gap) and set(gap) <= JOINTS


def _joined(text: str, ws: list[Word], k: int) -> bool:
    """Whether word `k` goes on the token of the word before it: a joint, but a period
    before a capital letter ("Bob.Go to Acme": a sentence's end, however typed)."""
    gap = _gap(text, ws, k)
    return _joint(gap) and not ("." in gap and _capital(ws[k].text))


def _flows(text: str, ws: list[Word], k: int) -> bool:
    """Whether a clause goes on from word `k - 1` to word `k`: spaces or a token's joint,
    no punctuation."""
    return _space(_gap(text, ws, k)) or _joined(text, ws, k)


def _sentence_ends(gap: str) -> bool:
    """Whether `gap` ends a sentence: `.!?…` before a space, a CJK full stop or a line
    break ("contract.txt" is one sentence)."""
    return SENTENCE_BREAK.search(gap) is not None or bool(LINE_BREAKS & set(gap))


def _opens_message(gap: str) -> bool:
    """Whether `gap` holds a colon, a single quote, an opening bracket or a dash (what
    follows a colon or a dash is `_labels`' content anyway; a name between double quotes
    or brackets is `_quoted`)."""
    return not _joint(gap) and any(
        ch in ":'\uff1a" or unicodedata.category(ch) in OPENERS for ch in gap
    )


def _labels(gap: str) -> bool:
    """Whether `gap` holds a colon before a space or a line break (not "10:30"), a
    full-width colon, or a dash: what follows is content, whatever came before."""
    return (
        re.search(r":\s", gap) is not None
        or "\uff1a" in gap
        or any(unicodedata.category(ch) == "Pd" for ch in gap)
    )


def _subject(word: str) -> bool:
    """Whether `word` is a subject pronoun ("I", "we", "I'm", "she'll")."""
    return word.casefold().replace("\u2019", "'").split("'")[0] in SUBJECTS


def _starts(text: str, ws: list[Word], k: int) -> bool:
    """Whether word `k` begins a clause, where a verb is an order to the phone: the
    text's start, after punctuation, "and", "or", "but", "then" (not "I then"), a word of
    `SOFTENERS` that does, or "can/could/would/will you" at a sentence's start."""
    if k == 0:
        return True
    gap = _gap(text, ws, k)
    if not _space(gap):  # punctuation or a line break; not a joint, an invisible or a symbol
        return not _joined(text, ws, k) and (
            bool(LINE_BREAKS & set(gap)) or any(unicodedata.category(ch)[0] == "P" for ch in gap)
        )
    before = ws[k - 1].text.casefold()
    if before in STARTERS - {"then"}:
        return True
    if before == "then":
        after = k < 2 or not _space(_gap(text, ws, k - 1))
        return after or not (_subject(ws[k - 2].text) or ws[k - 2].text.casefold() in MODALS)
    if before in SOFTENERS:
        return _starts(text, ws, k - 1)
    return (
        before == "you"
        and k >= 2
        and _space(_gap(text, ws, k - 1))
        and ws[k - 2].text.casefold() in ASKING
        and _opens_sentence(text, ws[k - 2].start)
    )


def _imperative(text: str, ws: list[Word], k: int) -> bool:
    """Whether word `k` is a verb of `VERBS` as an order to the phone: the first word of
    its clause (never after a subject, a modal, "to", a determiner or an adjective)."""
    return ws[k].text.casefold() in VERBS and _starts(text, ws, k)


def _infinitive(text: str, ws: list[Word], k: int) -> bool:
    """Whether word `k` is "to" before a lower-case word that is no determiner or pronoun
    ("to call", "to book": what someone else is to do)."""
    if ws[k].text.casefold() != "to" or k + 1 >= len(ws) or not _space(_gap(text, ws, k + 1)):
        return False
    after = ws[k + 1].text
    return unicodedata.category(after[0]) == "Ll" and after.casefold() not in DETERMINERS | OBJECTS


def _cue_before_name(text: str, ws: list[Word], k: int) -> bool:
    """Whether word `k` is "to" or "with" before a capitalised word ("to Acme")."""
    return (
        ws[k].text.casefold() in TOWARD
        and k + 1 < len(ws)
        and _space(_gap(text, ws, k + 1))
        and _capital(ws[k + 1].text)
    )


def _quoted(before: str) -> bool:
    """Whether a quote or a bracket opened in `before` is still open: an odd number of
    straight double quotes, more opening than closing curly or angle quotes or brackets,
    or a CJK quote open."""
    kinds = [unicodedata.category(ch) for ch in before]
    straight = sum(before.count(q) for q in '"\uff02')
    cjk = sum(before.count(q) for q in "\u300c\u300e") - sum(
        before.count(q) for q in "\u300d\u300f"
    )
    brackets = kinds.count("Ps") > kinds.count("Pe")
    return straight % 2 == 1 or kinds.count("Pi") > kinds.count("Pf") or cjk > 0 or brackets


def _in_message(text: str, ws: list[Word], first: int) -> bool:
    """Whether word `first` stands in quotes or brackets opened before it, after a colon
    or a dash anywhere before it (content: "add a reminder: call Acme"), or in what an
    imperative earlier in its sentence says: after a single quote, a message's start
    ("that", "if", "so", …) or an infinitive ("tell Bob to read it and call Acme")."""
    if _quoted(text[: ws[first].start]):
        return True
    if any(_labels(_gap(text, ws, m)) for m in range(1, first + 1)):
        return True  # "add a reminder: call Acme", "text Alice:\nCall Acme", "list:\n- …"
    opened = False
    for m in range(first - 1, -1, -1):
        gap = _gap(text, ws, m + 1)
        if _sentence_ends(gap):
            return False
        opened = opened or _opens_message(gap)
        if opened and _imperative(text, ws, m):
            return True
        if _message_start(text, ws, m) or _infinitive(text, ws, m):
            opened = True
    return False


def _message_start(text: str, ws: list[Word], k: int) -> bool:
    """Whether word `k` starts a message: a word of `MESSAGE_STARTS`, but "that" right
    after an imperative and before a word of `LETTERS` ("forward that email to Alice")."""
    if ws[k].text.casefold() not in MESSAGE_STARTS:
        return False
    return not (
        ws[k].text.casefold() == "that"
        and 0 < k < len(ws) - 1
        and _imperative(text, ws, k - 1)
        and _letter(ws[k + 1].text)
    )


def _ends_clause(text: str, ws: list[Word], k: int) -> bool:
    """Whether word `k` ends a clause scanned to it: "and", "or", "but", "then", a
    message's start or a subject."""
    word = ws[k].text
    return word.casefold() in STARTERS or _message_start(text, ws, k) or _subject(word)


def _clause_verb(text: str, ws: list[Word], cue: int) -> int | None:
    """The imperative of `VERBS` that word `cue` ("to", "with") follows in its clause, or
    None: back to punctuation, "and", "or", "but", "then", a message's start or a subject."""
    for m in range(cue - 1, -1, -1):
        if not _flows(text, ws, m + 1):
            return None
        if _imperative(text, ws, m):
            return m
        if _ends_clause(text, ws, m):
            return None
    return None


def _last_cue(text: str, ws: list[Word], cue: int) -> bool:
    """Whether no other "to"/"with" (but an infinitive's "to") follows word `cue` in its
    clause ("email the directions to Acme to Alice": only Alice)."""
    for m in range(cue + 1, len(ws)):
        if not _flows(text, ws, m) or _ends_clause(text, ws, m):
            return True
        if ws[m].text.casefold() in TOWARD and not _infinitive(text, ws, m):
            return False
    return True


def _name_like(word: str) -> bool:
    return (
        _capital(word)
        and word != "I"
        and not _subject(word)
        and not word.endswith(("'s", "\u2019s"))
        and not any(ch.isdigit() for ch in word)
    )


def _object_before(text: str, ws: list[Word], verb: int, cue: int) -> bool:
    """Whether the verb at word `verb` has an addressee (or an order) before word `cue`:
    any object of a verb of `PERSONAL` ("invite mom to"), an infinitive ("ask my boss to
    book a meeting with"), an earlier to/with before a name ("the way to Acme to"), or
    two objects ("text Alice
    directions to", "text my sister the way to", "text me the way to"); one object
    ("send them to", "send Q4 report to", "share Google Doc with") is what is sent."""
    inside = range(verb + 1, cue)
    if not inside:
        return False
    if ws[verb].text.casefold() in PERSONAL:
        return True  # "invite Alice to Paris", "call mom with Acme": the object is whom
    if any(_infinitive(text, ws, m) or _cue_before_name(text, ws, m) for m in inside):
        return True  # "to book a meeting with", "to Acme … to Alice": whom, unsure
    pronoun = ws[verb + 1].text.casefold()
    if pronoun in OBJECTS and len(inside) > 1:  # "her email": hers, what is sent
        return not (pronoun == "her" and len(inside) == 2 and _letter(ws[verb + 2].text))
    if _name_like(ws[verb + 1].text):  # a run of capitalised tokens, then more words
        m = verb + 2
        while m < cue and (_joined(text, ws, m) or _capital(ws[m].text)):
            m += 1
        if m < cue:
            return True
    return any(
        ws[m].text.casefold() in DETERMINERS and ws[m - 1].text.casefold() not in PREPOSITIONS
        for m in inside[1:]
    )


def _letter(word: str) -> bool:
    return word.casefold() in LETTERS


def _first_ends(text: str, ws: list[Word], last: int) -> bool:
    """Whether the item right after to/with/from ends at word `last`: the text ends,
    punctuation, a subject or a word of `FIRST_FOLLOWERS` follows ("to Bob tomorrow",
    "via email", "that …"; not "with Acme prices": Acme names the prices)."""
    if last + 1 >= len(ws) or not _space(_gap(text, ws, last + 1)):
        return True
    after = ws[last + 1].text
    return after.casefold() in FIRST_FOLLOWERS or _subject(after)


def _later_ends(text: str, ws: list[Word], last: int) -> bool:
    """Whether a later list item ends at word `last`: the text ends, punctuation,
    "that", "about", "saying" or a determiner follows, or "and"/"or" before another
    capitalised item (not "and Acme tomorrow will pay it": a new clause's subject)."""
    if last + 1 >= len(ws) or not _space(_gap(text, ws, last + 1)):
        return True
    after = ws[last + 1].text.casefold()
    if after in LATER_FOLLOWERS:
        return True
    return (
        after in CONNECTORS
        and last + 2 < len(ws)
        and _space(_gap(text, ws, last + 2))
        and _capital(ws[last + 2].text)
    )


def _toward(text: str, ws: list[Word], cue: int, last: int) -> bool:
    """Whether "to"/"with" at word `cue` addresses the item ending at word `last`: the
    last such cue of an imperative's clause, whose verb has no addressee before it, and
    the item ends there."""
    verb = _clause_verb(text, ws, cue)
    return (
        verb is not None
        and _last_cue(text, ws, cue)
        and not _object_before(text, ws, verb, cue)
        and _first_ends(text, ws, last)
    )


def _describes(word: str) -> bool:
    """Whether `word` may describe the message a reply answers ("last", "unread"): lower
    case, no possessive, no preposition nor a message's start ("re", "on", "about")."""
    plain = word.casefold()
    return (
        unicodedata.category(word[0]) == "Ll"
        and not plain.endswith(("'s", "\u2019s"))
        and plain not in PREPOSITIONS | MESSAGE_STARTS | {"re", "regarding"}
    )


def _reply_from(text: str, ws: list[Word], cue: int, last: int) -> bool:
    """Whether "from" at word `cue` names whom a reply goes to: "reply/answer/respond to
    the [up to 3 describing words] message|mail|email|text|note|… from X", nothing else
    ("reply to my boss with the quote from Acme": Acme is no party)."""
    if cue < 4 or not _letter(ws[cue - 1].text):
        return False
    k = cue - 2
    while k >= 0 and ws[k].text.casefold() != "the":
        if cue - 2 - k >= MAX_DESCRIBING or not _describes(ws[k].text):
            return False
        k -= 1
    return (
        k >= 2
        and ws[k - 1].text.casefold() == "to"
        and ws[k - 2].text.casefold() in REPLIES
        and _imperative(text, ws, k - 2)
        and all(_space(_gap(text, ws, m)) for m in range(k - 1, cue + 1))
        and _first_ends(text, ws, last)
    )


def _list_goes_on(text: str, ws: list[Word], last: int) -> bool:
    """Whether another list item follows word `last`: a comma, "and" or "or" next."""
    if last + 1 >= len(ws):
        return False
    gap = _gap(text, ws, last + 1).strip()
    return gap == "," or (gap == "" and ws[last + 1].text.casefold() in CONNECTORS)


def _item_start(ws: list[Word], text: str, j: int) -> int | None:
    """The first word of the list item (a run of capitalised words) that ends at word `j`,
    or None if that is no such item."""
    if j < 0 or not _capital(ws[j].text) or ws[j].text.casefold() in VERBS | TOWARD:
        return None
    while j > 0:
        before = ws[j - 1]
        cue = before.text.casefold() in VERBS | TOWARD
        if cue or not _capital(before.text) or not _space(_gap(text, ws, j)):
            break
        j -= 1
    return j


def _addressed(text: str, ws: list[Word], start: int, end: int) -> bool:
    """Whether the name said at `text[start:end]` is addressed (see the module): right
    after an imperative of `VERBS`, or after the last "to"/"with" of such an imperative's
    clause, or after a reply's "from", itself or as an item of a list that is; never in
    what an imperative says."""
    first = next(i for i, w in enumerate(ws) if w.start == start)
    last = next(i for i, w in enumerate(ws) if w.start < end <= w.end)
    if end != ws[last].end or _in_message(text, ws, first):
        return False  # a possessive (a topic or a source), or a part of a message
    if last + 1 < len(ws) and _past(ws[last + 1].text):
        return False  # "and email Acme sent", "and mail Acme returned": a subject
    item_first, item_last, later = first, last, False
    while item_first > 0:
        i = item_first
        gap = _gap(text, ws, i)
        word = ws[i - 1].text.casefold()
        if later and not _later_ends(text, ws, last):
            return False  # "to Alice and Acme tomorrow will pay it": a new clause
        if _space(gap):
            if word in VERBS:
                return _imperative(text, ws, i - 1)
            if word in TOWARD:
                return _toward(text, ws, i - 1, item_last)
            if word == "from":
                return _reply_from(text, ws, i - 1, item_last)
            if word not in CONNECTORS:
                return False
            j = i - 2  # "Alice and Bob", "Alice, and Bob"
            if j < 0 or _gap(text, ws, i - 1).strip() not in ("", ","):
                return False
        elif gap.strip() in (",", "&") and not LINE_BREAKS & set(gap):
            if not later and gap.strip() == "," and not _list_goes_on(text, ws, last):
                return False  # "tell Alice, Acme closed early"
            j = i - 1
        else:
            return False
        item = _item_start(ws, text, j)
        if item is None:
            return False
        item_first, item_last, later = item, j, True
    return False


def _shared(name: str) -> str:
    """The form in which two contacts' names are the same name."""
    return " ".join(unicodedata.normalize("NFKC", name).casefold().split())


def named(request: str, names: Iterable[str]) -> set[str]:
    """The contact names (of `names`, one per contact: a name may come twice) that
    `request` names as recipients (see the module): the full or first name that no other
    contact has as its full or first name, said in the request where it addresses the
    contact. Two contacts of the same name
    (another may have been imported from anyone's card) are named by neither."""
    text = _nfc(request)
    if negates(text):
        return set()
    cards = list(names)
    said_as: list[set[str]] = []
    owners: dict[str, set[int]] = {}
    for card, name in enumerate(cards):
        parts = _nfc(name).split()
        forms = {" ".join(parts), *parts[:1]}
        said_as.append(
            {f for f in forms if len(f) >= MIN_CHARS and _capital(f) and f not in CALENDAR}
        )
        for form in forms:
            owners.setdefault(_shared(form), set()).add(card)
    ws = words(text)
    # (card, start, end, its own) of each name said; a name other cards share names no
    # one but still claims its place, so adding a card never frees a name it overlaps
    spans: list[tuple[int, int, int, bool]] = []
    for card, forms in enumerate(said_as):
        for form in forms:
            at = text.find(form)
            while at != -1:
                if _said_at(text, ws, at, at + len(form)):
                    spans.append((card, at, at + len(form), owners[_shared(form)] == {card}))
                at = text.find(form, at + 1)
    return {
        cards[card]
        for card, start, end, own in spans
        if own
        and not any(c != card and s < end and start < e for c, s, e, _ in spans)
        and _addressed(text, ws, start, end)
    }
