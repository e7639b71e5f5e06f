"""Saved model states at the end of recent prompts, so that a prompt seen again (the
same request, the next turn of a conversation) starts where the last one stopped.

A hybrid recurrent model (`qwen35`) cannot cut its context back to a shared position:
its state is whole or nothing. So the state is saved where a later prompt may go on
from: before the last token of each new prompt (the last is evaluated every time, for
its logits), as llama-server's context checkpoints are. Bounded by count and bytes,
least recently used first out.

Each state serves its own scope only (on a node, the phone that asked): a prompt that
starts where another requester's ended would answer sooner, and so tell what that one
asked (a friend's phone probing the owner's recent prompts by their first token's time).
"""

from __future__ import annotations

from collections import OrderedDict

CHECKPOINTS = 8
CHECKPOINT_BYTES = 64 * 1024 * 1024


class Checkpoints:
    """Model states by their scope and the tokens their context holds."""

    def __init__(self, count: int = CHECKPOINTS, max_bytes: int = CHECKPOINT_BYTES) -> None:
        self._count = count
        self._max_bytes = max_bytes
        self._held: OrderedDict[tuple[str, tuple[int, ...]], bytes] = OrderedDict()
        self._bytes = 0

    def longest(
        self, scope: str, start: list[int], prompt: list[int]
    ) -> tuple[tuple[int, ...], bytes] | None:
        """`scope`'s state whose tokens are `start` and then the most of `prompt`, short
        of its last token (kept at least: its logits are wanted); None if none is held."""
        whole = (*start, *prompt)
        found: tuple[str, tuple[int, ...]] | None = None
        for key in self._held:
            held_scope, tokens = key
            if (
                held_scope == scope
                and len(start) < len(tokens) < len(whole)
                and (found is None or len(tokens) > len(found[1]))
                and whole[: len(tokens)] == tokens
            ):
                found = key
        if found is None:
            return None
        self._held.move_to_end(found)
        return found[1], self._held[found]

    def keep(self, scope: str, tokens: tuple[int, ...], state: bytes) -> None:
        """Hold `state`, `scope`'s context after `tokens`; the oldest go past the bounds."""
        if len(state) > self._max_bytes:
            return
        key = (scope, tokens)
        self._bytes += len(state) - len(self._held.pop(key, b""))
        self._held[key] = state
        while len(self._held) > self._count or self._bytes > self._max_bytes:
            self._bytes -= len(self._held.popitem(last=False)[1])

    def __len__(self) -> int:
        return len(self._held)
