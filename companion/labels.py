"""Labels: what a value the executor holds carries with it, wherever it flows.

*private*: it came from (or was derived from) a private-data tool: contacts,
messages, calendar, notes, files, clipboard, location. *untrusted*: it may have been
chosen by someone other than the owner; the set names those sources (a web result's
site, an MCP server, a friend's planner). Labels only ever grow as values combine:
a result carries the labels of the arguments that produced it, an error too. A
private label knows where it came from, so a value may go back to the server that
returned it (which knows it already), never anywhere else.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator

UNKNOWN = "?"  # a private value whose origin is not known (the strictest reading)


class Labels(BaseModel):
    """The labels of one value (immutable; combine with `|`). `private_from` names where
    its private parts came from (a tool's source: `builtin`, `mcp:travel`, `app`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    private: bool = False
    untrusted: frozenset[str] = frozenset()
    private_from: frozenset[str] = frozenset()

    @model_validator(mode="after")
    def _origin_known_or_not(self) -> Labels:
        if self.private and not self.private_from:
            object.__setattr__(self, "private_from", frozenset({UNKNOWN}))
        return self

    def __or__(self, other: Labels) -> Labels:
        return Labels(
            private=self.private or other.private,
            untrusted=self.untrusted | other.untrusted,
            private_from=self.private_from | other.private_from,
        )

    def returned_to(self, source: str) -> Labels:
        """The labels as `source` may see them: private parts that came from `source`
        itself are nothing it does not know (a booking's id, back to its travel server);
        private parts from anywhere else stay private."""
        if self.private and self.private_from == {source}:
            return Labels(untrusted=self.untrusted)
        return self

    def sources(self) -> str:
        """The untrusted sources, for a confirmation or an audit reason."""
        return ", ".join(sorted(self.untrusted))


CLEAN = Labels()
PRIVATE = Labels(private=True)
UNLABELLED = Labels(private=True, untrusted=frozenset({"a journal entry without labels"}))
"""What a value journaled before labels existed is taken to carry: the strictest."""
