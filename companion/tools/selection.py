"""Candidate tool selection: which tools a request may need.

What reaches the phone's model and what leaves the phone. BM25 (bm25s) ranks each
tool's name, description and parameter names and descriptions against the request,
both cut into script-agnostic tokens: every word (a run of letters, marks and digits,
identifiers split at `_`, `.` and camelCase) with its character trigrams, and for
scripts written without spaces (CJK, Hangul) single characters and bigrams. No
language's words, stemmer or stop list is assumed.

A tool is a candidate when it scores at least `relative` of the best score, or when it
best explains what the tools chosen so far leave unexplained (a request that needs
several different tools); a tool whose text lacks a script the request is written in
cannot be judged and stays a candidate. Shared trigrams rank; they are no evidence on
their own: a candidate must share a word, or a longer word's first five letters, with
the request (in a registry of eight or more tools, words most tools use do not count).
When nothing matches, every tool allowed is offered: selection narrows only on
evidence. A tool offered brings its family (the other tools of its MCP server, or the
built-ins sharing its name's first word: `calendar_list` brings `calendar_move`), and
what the task has shown so far (earlier turns, documents, results) may point to more,
so a tool a later step needs is offered by then.

Measured on BFCL v4 (tests/test_tool_selection.py): the right tools are among the
candidates in ≥ 99.5% of the multi-function cases.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MAX_TEXT = 20_000  # characters of a request or of one tool's text that are looked at
TOOL_TEXTS_KEPT = 1024  # tools whose terms are kept between requests (a tool's text is fixed)
INDEXES_KEPT = 8  # sets of tools whose index is kept (the phone's, those the policy lets out)


@dataclass(frozen=True)
class Thresholds:
    """How far selection narrows (fractions of the best tool's score; measured on BFCL)."""

    relative: float = 0.2  # a tool scoring this share of the best one is a candidate
    residual: float = 0.1  # a tool explaining this much of what is left is one too
    script_share: float = 0.25  # a script with this share of the request's letters counts
    common_share: float = 0.5  # a word more tools use than this share is no evidence...
    common_from: int = 8  # ...in a registry of at least this many tools


@dataclass(frozen=True)
class Selection:
    """The tools to offer for a request, and those its text actually points to."""

    offered: frozenset[str]  # matched ones, or every allowed tool when none matched
    matched: frozenset[str]

    @property
    def fallback(self) -> bool:
        return not self.matched


def tool_text(name: str, description: str, schema: Mapping[str, Any]) -> str:
    """What a tool is matched on: name, description, parameter names and descriptions."""
    parts = [name, description]
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for param, spec in properties.items():
            parts.append(str(param))
            if isinstance(spec, Mapping) and isinstance(spec.get("description"), str):
                parts.append(spec["description"])
    return " ".join(parts)[:MAX_TEXT]


def select(
    text: str,
    tools: Mapping[str, str],
    thresholds: Thresholds = Thresholds(),
    *,
    shown: str = "",
) -> Selection:
    """Candidates among `tools` (name → `tool_text`) for the request `text`; `shown` is
    what the task has shown so far (earlier turns, documents, results): the tools it
    points to are offered too. Each tool offered brings its family (see `family`), so a
    tool a later step needs (the write after the read) is offered by then."""
    names = list(tools)
    everything = Selection(frozenset(names), frozenset())
    matched = _matched(text, tools, thresholds)
    if not matched:
        return everything
    seen = _matched(shown, tools, thresholds) if shown else set()
    kin = {family(n) for n in matched | seen}
    offered = matched | seen | {n for n in names if family(n) in kin}
    return Selection(frozenset(offered), frozenset(matched))


def family(name: str) -> str:
    """The domain a tool belongs to: an MCP tool's server (`work` of `work.send_email`),
    else its name up to the first `_` (`calendar` of `calendar_move`)."""
    if "." in name:
        return name.split(".", 1)[0]
    return name.split("_", 1)[0]


def _matched(text: str, tools: Mapping[str, str], thresholds: Thresholds) -> set[str]:
    """The tools `text` points to (none when nothing matched)."""
    if not tools:
        return set()
    index = _index(tuple(tools.items()))
    names, terms = index.names, index.terms
    query = [t for t in tokens(text[:MAX_TEXT]) if t in index.bm25.vocab_dict]
    if not query:
        return set()
    scores = index.bm25.get_scores(query)
    best = float(scores.max())
    if best <= 0:
        return set()
    chosen = {n for n, s in zip(names, scores, strict=True) if s >= thresholds.relative * best}
    while query:  # each round: the tool explaining most of what is still unexplained
        scores = index.bm25.get_scores(query)
        top = int(scores.argmax())
        if scores[top] < thresholds.residual * best:
            break
        chosen.add(names[top])
        query = [t for t in query if t not in terms[top].vocabulary]
    chosen = _with_evidence(text, chosen, index, thresholds)
    unjudged = _scripts(text, thresholds.script_share)
    chosen |= {n for n, t in zip(names, terms, strict=True) if not unjudged <= t.scripts}
    return chosen


@dataclass(frozen=True)
class _Index:
    """A registry's tools as selection reads them: their terms, the BM25 index over them,
    and how many tools use each word of evidence."""

    names: tuple[str, ...]
    terms: tuple[ToolTerms, ...]
    bm25: Any
    used: Counter[str]


@lru_cache(maxsize=INDEXES_KEPT)
def _index(tools: tuple[tuple[str, str], ...]) -> _Index:
    """The index of `tools` (name, `tool_text`), built once per set of tools: the
    registry's texts are the same on every request."""
    import bm25s  # imports scipy: only when a request is routed

    names = tuple(name for name, _ in tools)
    terms = tuple(_tool_terms(text) for _, text in tools)
    bm25 = bm25s.BM25()
    bm25.index([list(t.tokens) for t in terms], show_progress=False)
    used = Counter(w for t in terms for w in t.evidence)
    return _Index(names, terms, bm25, used)


@dataclass(frozen=True)
class ToolTerms:
    """What selection reads of one tool's text, worked out once per text."""

    tokens: tuple[str, ...]
    vocabulary: frozenset[str]
    evidence: frozenset[str]
    scripts: frozenset[str]  # every script its letters are written in


@lru_cache(maxsize=TOOL_TEXTS_KEPT)
def _tool_terms(text: str) -> ToolTerms:
    """A tool's terms: its text is the same on every request (a request's text is never
    kept here)."""
    cut = tokens(text)
    return ToolTerms(
        tuple(cut), frozenset(cut), frozenset(_evidence(text)), frozenset(_scripts(text, 0))
    )


def _with_evidence(text: str, chosen: set[str], index: _Index, thresholds: Thresholds) -> set[str]:
    """The chosen tools that share a word (or a word's first five letters) with the
    request: shared trigrams alone are no evidence. In a registry large enough to
    tell (`common_from` tools), a word most tools use ("the", "a") is none either."""
    count = len(index.names)
    asked = {
        w
        for w in _evidence(text)
        if count < thresholds.common_from or index.used[w] <= thresholds.common_share * count
    }
    evidence = dict(zip(index.names, (t.evidence for t in index.terms), strict=True))
    return {n for n in chosen if not asked.isdisjoint(evidence[n])}


def tokens(text: str) -> list[str]:
    """Words with their character trigrams; single characters and bigrams where a
    script writes no spaces."""
    out: list[str] = []
    for word in _words(text):
        if _unspaced(word[0]):
            out += list(word) + [word[i : i + 2] for i in range(len(word) - 1)]
        else:
            out += [word, f"^{word[:3]}", f"{word[-3:]}$"]
            out += [word[i : i + 3] for i in range(len(word) - 2)]
    return out


def _evidence(text: str) -> set[str]:
    """Whole words and the first five letters of longer ones (bigrams where a script
    writes no spaces)."""
    words = {w for w in _words(text[:MAX_TEXT]) if not _unspaced(w[0])}
    return (
        words
        | {f"{w[:5]}~" for w in words if len(w) > 5}
        | {t for t in tokens(text[:MAX_TEXT]) if _unspaced(t[0]) and len(t) == 2}
    )


def _words(text: str) -> Iterator[str]:
    """Runs of letters, marks and digits, split at camelCase humps and where a script
    written without spaces begins or ends; case-folded."""
    word: list[str] = []
    previous = ""
    for ch in unicodedata.normalize("NFKC", text):
        if unicodedata.category(ch)[0] not in "LMN":
            ch = ""
        elif word and (
            (ch.isupper() and previous.islower()) or _unspaced(ch) != _unspaced(previous)
        ):
            yield "".join(word).casefold()
            word = []
        if ch:
            word.append(ch)
        elif word:
            yield "".join(word).casefold()
            word = []
        previous = ch
    if word:
        yield "".join(word).casefold()


def _unspaced(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in ("W", "F")


def _scripts(text: str, share: float) -> set[str]:
    """The scripts making up at least `share` of `text`'s letters (e.g. LATIN, CJK)."""
    counts = Counter(
        unicodedata.name(ch, "?").split()[0]
        for ch in unicodedata.normalize("NFKC", text[:MAX_TEXT])
        if ch.isalpha()
    )
    total = sum(counts.values())
    return {script for script, n in counts.items() if n >= share * total}
