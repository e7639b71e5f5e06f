"""Saved model states at the end of recent prompts, so that a prompt seen again (the
same request, the next turn of a conversation) starts where the last one stopped.

A hybrid recurrent model (`qwen35`) cannot cut its context back to a shared position:
its state is whole or nothing. So the state is saved where a later prompt may go on
from: before the last token of each new prompt (the last is evaluated every time, for
its logits), as llama-server's context checkpoints are. Bounded by count and bytes,
least recently used first out.
"""

from __future__ import annotations

from collections import OrderedDict

CHECKPOINTS = 8
CHECKPOINT_BYTES = 64 * 1024 * 1024


class Checkpoints:
    """Model states by the tokens their context holds."""

    def __init__(self, count: int = CHECKPOINTS, max_bytes: int = CHECKPOINT_BYTES) -> None:
        self._count = count
        self._max_bytes = max_bytes
        self._held: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._bytes = 0

    def longest(self, start: list[int], prompt: list[int]) -> tuple[tuple[int, ...], bytes] | None:
        """The state whose tokens are `start` and then the most of `prompt`, short of
        its last token (kept at least: its logits are wanted); None if none is held."""
        whole = (*start, *prompt)
        found: tuple[int, ...] | None = None
        for tokens in self._held:
            if (
                len(start) < len(tokens) < len(whole)
                and (found is None or len(tokens) > len(found))
                and whole[: len(tokens)] == tokens
            ):
                found = tokens
        if found is None:
            return None
        self._held.move_to_end(found)
        return found, self._held[found]

    def keep(self, tokens: tuple[int, ...], state: bytes) -> None:
        """Hold `state`, the context after `tokens`; the oldest go past the bounds."""
        if len(state) > self._max_bytes:
            return
        self._bytes += len(state) - len(self._held.pop(tokens, b""))
        self._held[tokens] = state
        while len(self._held) > self._count or self._bytes > self._max_bytes:
            self._bytes -= len(self._held.popitem(last=False)[1])

    def __len__(self) -> int:
        return len(self._held)
