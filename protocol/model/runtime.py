"""The llama.cpp runtime: one loaded model, its own token loop, per-session state.

llama-cpp-python's streaming stalls after a token that is not valid UTF-8 and
overruns `max_tokens` while output ends inside a UTF-8 sequence; this loop decodes
incrementally and enforces its own limit. For hybrid recurrent models (`qwen35`)
llama-cpp-python re-reads the whole prompt on every call, so a session keeps its
own saved state and each round evaluates only the new tokens.

Calls block: run them in a worker thread. One lock serialises the shared context.
"""

from __future__ import annotations

import codecs
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .loader import load_llama

Finish = Literal["stop", "length", "cancelled"]


@dataclass
class Generation:
    """What one generation produced."""

    text: str
    tokens: int
    finish: Finish
    prompt_tokens: int


@dataclass
class SessionMemory:
    """A plan session's model state: the tokens its context holds, and a snapshot."""

    tokens: list[int] = field(default_factory=list)
    snapshot: Any = None


@dataclass(frozen=True)
class Sampling:
    """Sampling settings (greedy by default, so plans are reproducible)."""

    temperature: float = 0.0
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    repeat_penalty: float = 1.0
    seed: int = 0


class LlamaRuntime:
    """One GGUF model in memory, shared by every session."""

    def __init__(self, path: Path, *, n_ctx: int = 8192, n_threads: int | None = None) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.path = path
        self.llm = load_llama(path, n_ctx=n_ctx, n_threads=n_threads)
        self.lock = threading.Lock()
        self._vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        meta = self.llm.metadata
        self.name = meta.get("general.name", path.stem)
        self.quant = _FILE_TYPES.get(int(meta.get("general.file_type", -1)), "")
        self.n_ctx = self.llm.n_ctx()
        self.chat_template = meta.get("tokenizer.chat_template", "")
        self._owner: SessionMemory | None = None

    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=True))

    def generate(
        self,
        memory: SessionMemory,
        text: str,
        *,
        grammar: str | None,
        max_tokens: int,
        sampling: Sampling = Sampling(),
        on_text: Callable[[str], None] = lambda _: None,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> Generation:
        """Append `text` to the session's context and generate until end of turn,
        grammar completion, `max_tokens` or `cancelled()` (checked every token)."""
        new_tokens = self.tokenize(text)
        with self.lock:
            self._restore(memory)
            if len(memory.tokens) + len(new_tokens) + max_tokens > self.n_ctx:
                raise HearthError(
                    ErrorCode.INVALID_INPUT,
                    f"request needs {len(memory.tokens) + len(new_tokens) + max_tokens} "
                    f"tokens; the model's context is {self.n_ctx}",
                )
            grammar_obj = (
                self._lib.LlamaGrammar.from_string(grammar, verbose=False) if grammar else None
            )
            self.llm.set_seed(sampling.seed)
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            pieces: list[str] = []
            produced: list[int] = []
            finish: Finish = "length"
            stream = self.llm.generate(
                new_tokens,
                reset=False,
                temp=sampling.temperature,
                top_k=sampling.top_k,
                top_p=sampling.top_p,
                min_p=sampling.min_p,
                repeat_penalty=sampling.repeat_penalty,
                grammar=grammar_obj,
            )
            for token in stream:
                if self._lib.llama_vocab_is_eog(self._vocab, token):
                    finish = "stop"
                    break
                produced.append(token)
                piece = decoder.decode(self.llm.detokenize([token], special=True))
                if piece:
                    pieces.append(piece)
                    on_text(piece)
                if cancelled():
                    finish = "cancelled"
                    break
                if len(produced) >= max_tokens:
                    break
            stream.close()
            tail = decoder.decode(b"", final=True)
            if tail:
                pieces.append(tail)
                on_text(tail)
            # the last token taken was sampled but not evaluated: the context holds the rest
            evaluated = produced[:-1] if finish != "stop" else produced
            memory.tokens = memory.tokens + new_tokens + evaluated
            memory.snapshot = self.llm.save_state()
            self._owner = memory
            return Generation("".join(pieces), len(produced), finish, len(new_tokens))

    def _restore(self, memory: SessionMemory) -> None:
        if self._owner is memory and self.llm.n_tokens == len(memory.tokens):
            return  # the context already holds this session
        if memory.snapshot is None:
            self.llm.reset()  # the next eval clears the context from position 0
        else:
            self.llm.load_state(memory.snapshot)
        self._owner = memory


_FILE_TYPES = {0: "F32", 1: "F16", 7: "Q8_0", 15: "Q4_K_M", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}
