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

A request that holds a negation or exclusion cue ("not", "never", "don't", "except",
"instead of", "other than", "avoid", "ignore", "without", "nor", "unless", …: see
`negation.py`) gives no value as the user's words, neither a span nor a contact's
entry. Why the whole request and not the clause the cue governs: what a cue governs
is not found reliably by rule. It reaches back across sentences ("Text +1-555-0199 the
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

A contact said counts only where the request *addresses* it: a message, a call or
something shared goes to it. An occurrence (not before a possessive "'s": "Acme's news"
is a topic, so is "Alice's number") is addressed when, within its sentence (no `.!?…:;`
before a space, no line break between), the word right before it is

- a verb of sending or speaking in `VERBS` ("text Alice", "call Mom", "email Bob",
  "tell", "ask", "invite", "share", "send", "forward", "reply", "pay", …), used as a
  verb: not right after a determiner ("the", "a", "my", "this", … in `DETERMINERS`) or
  a possessive, where it is a noun ("the email Acme sent", "the call with Acme"), nor
  after "to" in a clause whose verb of sending already addressed someone ("text Alice
  the number to call Acme", "ask him to call Acme": what is sent, or an order to him); or
- "to" or "with", with such a verb earlier in the same clause (no comma, "and", "or",
  "then" or "but" between) that addressed no one yet, right after it: a capitalised word
  or "me", "him", "us", "them" ("send it to Bob", "share the file with Alice"; not "text
  Alice directions to Paris", "text me the way to Paris", "go to Acme", "compare it with
  Acme", "send the notes and the report to Bob": a clause that starts at "and", one
  confirmation), where the name ends its item: the text, its sentence or clause ends, or
  a word of `ITEM_FOLLOWERS` follows ("to Bob tomorrow", "with Alice at noon"; not "with
  Acme prices", where Acme names the prices); or
- "from", with "reply", "answer" or "respond" earlier in the same clause and no other
  capitalised word, nor "that", "about" or "saying", between ("reply to the last message
  from Alice"; not "read the news from Acme", "reply to Bob with the news from Acme" or
  "reply that the invoice from Acme is paid");

or the occurrence is an item of a list whose first item is so addressed: items are runs
of capitalised words, separated by "and", "or", "&" or a comma ("email Alice and Bob",
"text Alice, Bob, and Mom"); an item after a comma alone must be followed by another
(", " or "and"/"or"), so "tell Alice, Acme closed early" does not address Acme; and a
later item must end its item as above, so in "forward it to Alice and Acme will pay it"
Acme starts a new clause and is not addressed. Anything
else (a source, "from Acme"; a topic, "about Acme", "the Acme report"; a place; a
possessive) names no recipient: the card's entries count only for the contacts the
request addresses. A contact addressed in words these rules miss ("let Alice know",
"my boss and Bob") costs one confirmation.

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


def _next_to(text: str, a: int, b: int) -> bool:
    """Whether only spaces (no line break) stand between `a` and `b`."""
    gap = text[a:b]
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
    if first > 0 and _next_to(text, ws[first - 1].end, start):
        before = ws[first - 1]
        if (
            before.text.casefold() in PLACE_OR_TIME
            or any(ch.isdigit() for ch in before.text)
            or (_capital(before.text) and not _opens_sentence(text, before.start))
        ):
            return False
    if last + 1 < len(ws) and _next_to(text, ws[last].end, ws[last + 1].start):
        after = ws[last + 1].text
        pronoun = after == "I" or after.startswith(("I'", "I\u2019"))
        if any(ch.isdigit() for ch in after) or (_capital(after) and not pronoun):
            return False
    return True


SENDING = (  # a contact right after one of these is addressed
    "text message sms mail email e-mail call phone ring dial ping tell ask notify inform "
    "remind invite contact reply answer respond write send forward share cc bcc thank dm pay"
)
VERBS = frozenset(SENDING.split())
NOUN_MARKERS = (  # before a word of VERBS, it is a noun: "the email Acme sent"
    "the a an my your his her its our their this that these those every each any no"
)
DETERMINERS = frozenset(NOUN_MARKERS.split())
REPLIES = frozenset(["reply", "answer", "respond"])  # their "from X" is the addressee
MESSAGE_STARTS = frozenset(["that", "about", "saying"])  # a reply's message: not its "from"
OBJECTS = frozenset(["me", "him", "us", "them"])  # "ask him to call Acme": him, not Acme
TOWARD = frozenset(["to", "with"])  # addresses, after a verb of VERBS (cc, bcc are in VERBS)
CONNECTORS = frozenset(["and", "or"])  # between the items of a list
CLAUSE_BREAKS = frozenset(["and", "or", "then", "but"])  # a new clause may start here
FOLLOWS = "for to with from today tonight tomorrow now please asap once when if so too also"
ITEM_FOLLOWERS = CLAUSE_BREAKS | MESSAGE_STARTS | DETERMINERS | PLACE_OR_TIME | set(FOLLOWS.split())
BREAK = re.compile(r"[.!?\u2026:;\u3002\uff01\uff1f]\s")  # in the gap between two words


def _breaks(gap: str) -> bool:
    """Whether the text between two words ends a sentence: `.!?…:;` before a space or a
    line break ("contract.txt" is one sentence)."""
    return BREAK.search(gap) is not None or bool(LINE_BREAKS & set(gap))


def _verb(text: str, ws: list[Word], k: int, verbs: frozenset[str]) -> bool:
    """Whether word `k` is a word of `verbs` used as a verb: not right after a determiner
    or a possessive in its sentence ("the email Acme sent", "Bob's call with Acme")."""
    if ws[k].text.casefold() not in verbs:
        return False
    if k == 0 or _breaks(text[ws[k - 1].end : ws[k].start]):
        return True
    before = ws[k - 1].text
    return before.casefold() not in DETERMINERS and not before.endswith(("'s", "\u2019s"))


def _clause_verb(text: str, ws: list[Word], at: int, verbs: frozenset[str]) -> int | None:
    """The word of `verbs` before word `at` in its clause, or None: back to a sentence's
    end, a comma or a word of `CLAUSE_BREAKS`. For the replies' "from", another
    capitalised word between (another party) ends the search too, and so does the start of
    the reply's message ("reply that the invoice from Acme is paid")."""
    for m in range(at - 1, -1, -1):
        gap = text[ws[m].end : ws[m + 1].start]
        word = ws[m].text.casefold()
        if _breaks(gap) or "," in gap or word in CLAUSE_BREAKS:
            return None
        if _verb(text, ws, m, verbs):  # "send the email to Bob": "send", not "email"
            return m
        if verbs is REPLIES and (_capital(ws[m].text) or word in MESSAGE_STARTS):
            return None
    return None


def _verb_addressed(text: str, ws: list[Word], verb: int, at: int) -> bool:
    """Whether the verb of sending at word `verb` addresses someone right after it, before
    word `at`: a capitalised word that is no possessive, or "me", "him", "us", "them"
    ("text Alice directions to Paris", "ask him to call Acme"). Its clause's later "to" or
    "with", or a verb after "to", then belongs to what is sent, not to whom."""
    k = verb + 1
    if k >= at or not _next_to(text, ws[verb].end, ws[k].start):
        return False
    word = ws[k].text
    if word.casefold() in OBJECTS:
        return True
    return _capital(word) and word != "I" and not word.endswith(("'s", "\u2019s"))


def _infinitive_of_addressed(text: str, ws: list[Word], verb: int) -> bool:
    """Whether the verb of sending at word `verb` follows "to" in a clause whose own verb
    of sending already addressed someone ("text Alice the number to call Acme", "ask him to
    call Acme"): what is sent, not an order to the phone."""
    if verb < 1 or ws[verb - 1].text.casefold() != "to":
        return False
    clause = _clause_verb(text, ws, verb - 1, VERBS)
    return clause is not None and _verb_addressed(text, ws, clause, verb - 1)


def _toward_addresses(text: str, ws: list[Word], cue: int, last: int) -> bool:
    """Whether "to" or "with" at word `cue` addresses the item ending at word `last`: a
    verb of sending earlier in its clause that addressed no one yet ("send it to Bob"; not
    "text Alice directions to Paris"), and the item ends there (not "with Acme prices")."""
    verb = _clause_verb(text, ws, cue, VERBS)
    return (
        verb is not None and not _verb_addressed(text, ws, verb, cue) and _item_ends(text, ws, last)
    )


def _list_goes_on(text: str, ws: list[Word], last: int) -> bool:
    """Whether another list item follows word `last`: a comma, "and" or "or" next."""
    if last + 1 >= len(ws):
        return False
    gap = text[ws[last].end : ws[last + 1].start].strip()
    return gap == "," or (gap == "" and ws[last + 1].text.casefold() in CONNECTORS)


def _item_ends(text: str, ws: list[Word], last: int) -> bool:
    """Whether the name or list item ending at word `last` ends there: the text ends, a
    sentence, a comma, a colon or another item follows, or a word of `ITEM_FOLLOWERS`
    ("that", "about", "the", "at", "tomorrow", …); not a verb ("and Acme will pay it": a
    new clause's subject) nor a noun ("with Acme prices": Acme names the prices)."""
    if last + 1 >= len(ws):
        return True
    gap = text[ws[last].end : ws[last + 1].start]
    if _breaks(gap) or any(mark in gap for mark in ",:;"):
        return True
    return ws[last + 1].text.casefold() in ITEM_FOLLOWERS


def _item_start(ws: list[Word], text: str, j: int) -> int | None:
    """The first word of the list item (a run of capitalised words) that ends at word `j`,
    or None if that is no such item."""
    if j < 0 or not _capital(ws[j].text) or ws[j].text.casefold() in VERBS | TOWARD:
        return None
    while j > 0:
        before = ws[j - 1]
        cue = before.text.casefold() in VERBS | TOWARD
        if cue or not _capital(before.text) or not _next_to(text, before.end, ws[j].start):
            break
        j -= 1
    return j


def _addressed(text: str, ws: list[Word], start: int, end: int) -> bool:
    """Whether the name said at `text[start:end]` is addressed (see the module): after a
    verb of `VERBS`, or "to"/"with" in such a verb's clause, or a reply's "from", itself or
    as an item of a list that is."""
    first = next(i for i, w in enumerate(ws) if w.start == start)
    last = next(i for i, w in enumerate(ws) if w.start < end <= w.end)
    if end != ws[last].end:
        return False  # a possessive: a topic or a source, not a recipient
    i = first
    while i > 0:
        prev = ws[i - 1]
        gap = text[prev.end : ws[i].start]
        word = prev.text.casefold()
        if _breaks(gap):
            return False
        if not gap.strip():
            if word in VERBS | TOWARD | {"from"} and i != first and not _item_ends(text, ws, last):
                return False  # "to Alice and Acme will pay it": Acme starts a new clause
            if word in VERBS:
                return _verb(text, ws, i - 1, VERBS) and not _infinitive_of_addressed(
                    text, ws, i - 1
                )
            if word in TOWARD:
                return _toward_addresses(text, ws, i - 1, last)
            if word == "from":
                return _clause_verb(text, ws, i - 1, REPLIES) is not None
            if word not in CONNECTORS:
                return False
            j = i - 2  # "Alice and Bob", "Alice, and Bob"
            if j >= 0 and text[ws[j].end : prev.start].strip() not in ("", ","):
                return False
        elif gap.strip() in (",", "&"):
            if i == first and gap.strip() == "," and not _list_goes_on(text, ws, last):
                return False  # "tell Alice, Acme closed early"
            j = i - 1
        else:
            return False
        item = _item_start(ws, text, j)
        if item is None:
            return False
        i = item
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
