"""The words of a text, with where each starts and ends (for `intent` and `negation`)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

JOINERS = frozenset("'\u2019-\u2010")  # inside a word between two letters: O'Brien, Jean-Luc


def wordish(ch: str) -> bool:
    """Whether `ch` is a letter, a mark or a digit."""
    return unicodedata.category(ch)[0] in "LMN"


@dataclass(frozen=True)
class Word:
    """A word of a text: `text[start:end]`."""

    start: int
    end: int
    text: str


def words(text: str) -> list[Word]:
    """The words of `text`: runs of letters, marks and digits, an apostrophe or hyphen
    between two of them inside the word ("O'Brien", "Jean-Luc" and "Alice's" are one)."""
    out: list[Word] = []
    start = None
    for i, ch in enumerate(text):
        inner = ch in JOINERS and start is not None and i + 1 < len(text) and wordish(text[i + 1])
        if wordish(ch) or inner:
            start = i if start is None else start
        elif start is not None:
            out.append(Word(start, i, text[start:i]))
            start = None
    if start is not None:
        out.append(Word(start, len(text), text[start:]))
    return out
