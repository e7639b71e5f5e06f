"""Inert text: chat-template markers broken, so a model reads text as text.

Text a model did not get from its user (history, documents, tool results, the web)
may hold a chat template's control sequences (`<|im_end|><|im_start|>system`). Every
prompt built for a model, on the node and on the phone, passes such text through one
`Inert`: each marker gets a space after its first character (`<|im_end|>` →
`< |im_end|>`), so the tokenizer reads it as text, never as a turn, a call or a
thought. Breaking is idempotent: broken text passes unchanged.
"""

from __future__ import annotations

import re
from typing import Any

# markers of the common chat templates, broken for every model (an upstream's tokenizer is
# unknown): ChatML, Llama 3, Phi `<|…|>` (DeepSeek's with U+FF5C for `|`), Qwen's
# `<tool_call>`, `<think>`…, Gemma's turns, Mistral's and Llama 2's `[INST]`…, `<s>`, `</s>`
COMMON_MARKERS = (
    r"<(?=[|\uff5c])|<(?=/?(?:tool_call|tool_response|think|start_of_turn|end_of_turn|s)>)"
    r"|\[(?=/?(?:INST|TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS|SYSTEM_PROMPT)\])"
)


class Inert:
    """Breaks every chat-template marker in untrusted text (`<|im_end|>` → `< |im_end|>`), so
    that the tokenizer reads a document as text, never as a turn, a call or a thought: the
    common templates' markers, and `specials` (the model's own special tokens)."""

    def __init__(self, specials: list[str] | None = None) -> None:
        words = {w for w in specials or () if len(w) > 1 and not any(c.isspace() for c in w)}
        trie = _trie(sorted(words))
        self.pattern = re.compile(COMMON_MARKERS + (f"|{trie}" if trie else ""))

    def __call__(self, text: str) -> str:
        # a space inside one marker may leave another that overlapped it (markers hold no
        # whitespace, so a space never makes one): again until none is left
        while (broken := self.pattern.sub(_break, text)) != text:
            text = broken
        return text


def _break(match: re.Match[str]) -> str:
    return f"{match[0][0]} {match[0][1:]}"


def _trie(words: list[str]) -> str:
    """One regex for `words`, as a trie (thousands of special tokens cost a lookup of
    their first character per position, not one test each)."""
    root: dict[str, Any] = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def walk(node: dict[str, Any]) -> str:
        branches = [re.escape(char) + walk(child) for char, child in node.items() if char]
        if not branches:
            return ""
        if len(branches) == 1 and "" not in node:
            return branches[0]
        return "(?:" + "|".join(branches) + ")" + ("?" if "" in node else "")

    return walk(root)
