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

A contact the request *names*: the contact's full name, or its first name, when no other
contact shares it, appears in the request as a span (letters compared case-folded, at
token boundaries). That contact's phone numbers and e-mail addresses, as the phone's own
contacts hold them, count as the user's words ("text Alice": Alice's number).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

MIN_CHARS = 3  # a shorter string from the request ("to", "a") says nothing about intent
MAX_CHARS = 2000  # longer values are never looked up (the request is capped too)


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def _wordish(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LMN"


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

    def __post_init__(self) -> None:
        self._normal = _nfc(self.request)

    def says(self, value: object, *, content: bool = False) -> bool:
        """Whether `value` (a JSON scalar) is the user's own words (see the module). For
        `content` (the text of a message, not where it goes) case does not matter."""
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


def named(request: str, names: Iterable[str]) -> set[str]:
    """The contact names (of `names`, one per contact: a name may come twice) that
    `request` names: the full name no other contact shares, or a first name (of
    `MIN_CHARS` letters or more) no other contact shares, as a span of the request,
    case-folded and with runs of spaces as one. Two contacts of the same name (another
    may have been imported from anyone's card) are named by neither."""
    text = _nfc(request).casefold()
    fulls: dict[str, list[str]] = {}
    firsts: dict[str, list[str]] = {}
    for name in names:
        parts = _nfc(name).casefold().split()
        fulls.setdefault(" ".join(parts), []).append(name)
        if parts and len(parts[0]) >= MIN_CHARS:
            firsts.setdefault(parts[0], []).append(name)
    out = set()
    for said in (fulls, firsts):
        for words, owners in said.items():
            if len(owners) == 1 and len(words) >= MIN_CHARS and is_span(words, text):
                out.add(owners[0])
    return out
