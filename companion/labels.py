"""Labels: what a value the executor holds carries with it, wherever it flows.

*private*: it came from (or was derived from) a private-data tool: contacts,
messages, calendar, notes, files, clipboard, location. *untrusted*: it may have been
chosen by someone other than the owner; the set names those sources (a web result's
site, an MCP server, a friend's planner). Labels only ever grow as values combine:
a result carries the labels of the arguments that produced it, an error too.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Labels(BaseModel):
    """The labels of one value (immutable; combine with `|`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    private: bool = False
    untrusted: frozenset[str] = frozenset()

    def __or__(self, other: Labels) -> Labels:
        return Labels(
            private=self.private or other.private, untrusted=self.untrusted | other.untrusted
        )

    def sources(self) -> str:
        """The untrusted sources, for a confirmation or an audit reason."""
        return ", ".join(sorted(self.untrusted))


CLEAN = Labels()
PRIVATE = Labels(private=True)
UNLABELLED = Labels(private=True, untrusted=frozenset({"a journal entry without labels"}))
"""What a value journaled before labels existed is taken to carry: the strictest."""
