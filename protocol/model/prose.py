"""A streamed answer's prose: the model's text as it comes, without its tool calls."""

from __future__ import annotations

# The tags `toolcalls` parses (CALL_OPEN, CALL_CLOSE), not imported from there: it loads
# the wire's messages, more than a command's streaming view needs (tests/test_prose.py
# checks they agree)
TAGS = ("<tool_call>", "</tool_call>")


class ProseOnly:
    """Streamed text without its tool calls: what lies between `<tool_call>` and
    `</tool_call>` is dropped, however the pieces split the tags."""

    def __init__(self) -> None:
        self._held = ""
        self._in_call = False

    def feed(self, piece: str) -> str:
        """The prose `piece` completes (a piece that may begin a tag is held back)."""
        self._held += piece
        shown: list[str] = []
        while True:
            tag = TAGS[self._in_call]
            at = self._held.find(tag)
            if at < 0:
                keep = _partial_tag(self._held, tag)
                if not self._in_call:
                    shown.append(self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep :]
                return "".join(shown)
            if not self._in_call:
                shown.append(self._held[:at])
            self._held = self._held[at + len(tag) :]
            self._in_call = not self._in_call


def _partial_tag(text: str, tag: str) -> int:
    """How many of `text`'s last characters could begin `tag`."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-n:]):
            return n
    return 0
