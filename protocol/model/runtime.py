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
import ctypes
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .loader import load_llama

Finish = Literal["stop", "length", "cancelled"]
PREFIX_CACHE_SIZE = 8


@dataclass
class Generation:
    """What one generation produced."""

    text: str
    tokens: int
    finish: Finish
    prompt_tokens: int  # evaluated for this call (a cached shared prefix is not)
    confidence: float | None = None  # geometric mean of the model's own token probabilities


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
        self._prefixes: OrderedDict[str, tuple[list[int], bytes]] = OrderedDict()

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
        prefix: str = "",
        confidence: bool = False,
    ) -> Generation:
        """Append `prefix + text` to the session's context and generate until end of
        turn, grammar completion, `max_tokens` or `cancelled()` (checked every token).

        A `prefix` that sessions share (the tools block of a first prompt) is evaluated
        once and its state kept: the next session that starts with it skips it.
        """
        new_tokens = self.tokenize(text)
        with self.lock:
            self._restore(memory)
            evaluated_prefix = self._start_from_prefix(memory, prefix) if prefix else 0
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
            logprobs: list[float] = []
            for token in stream:
                if confidence:
                    logprobs.append(self._logprob(token))
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
            self._owner = memory
            return Generation(
                "".join(pieces),
                len(produced),
                finish,
                evaluated_prefix + len(new_tokens),
                math.exp(sum(logprobs) / len(logprobs)) if logprobs else None,
            )

    def _logprob(self, token: int) -> float:
        """log p(token) under the model's own (unconstrained) distribution at the position
        that produced it: the grammar narrows the choice, this says how sure it was."""
        n_vocab = self.llm.n_vocab()
        logits = np.ctypeslib.as_array(
            self._lib.llama_get_logits_ith(self.llm.ctx, -1), shape=(n_vocab,)
        )
        top = float(logits.max())
        return float(logits[token]) - top - math.log(float(np.exp(logits - top).sum()))

    def _start_from_prefix(self, memory: SessionMemory, prefix: str) -> int:
        """Put the shared `prefix` in `memory`'s (empty) context, from cache if held;
        returns how many tokens had to be evaluated for it."""
        cached = self._prefixes.get(prefix)
        if cached is not None:  # held: neither tokenized nor evaluated again
            tokens, snapshot = cached
            self._prefixes.move_to_end(prefix)
            self._load_seq(snapshot, tokens)
            memory.tokens = list(tokens)
            return 0
        tokens = self.tokenize(prefix)
        self.llm.eval(tokens)
        self._prefixes[prefix] = (tokens, self._save_seq())
        memory.tokens = list(tokens)
        while len(self._prefixes) > PREFIX_CACHE_SIZE:
            self._prefixes.popitem(last=False)
        return len(tokens)

    def _save_seq(self) -> bytes:
        lib, ctx = self._lib, self.llm.ctx
        size = lib.llama_state_seq_get_size(ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        used = lib.llama_state_seq_get_data(ctx, buf, size, 0)
        return bytes(memoryview(buf)[:used])

    def _load_seq(self, snapshot: bytes, tokens: list[int]) -> None:
        self.llm.reset()
        self.llm._ctx.kv_cache_seq_rm(-1, 0, -1)  # nothing of the previous session stays
        data = (ctypes.c_uint8 * len(snapshot)).from_buffer_copy(snapshot)
        if self._lib.llama_state_seq_set_data(self.llm.ctx, data, len(snapshot), 0) == 0:
            raise HearthError(ErrorCode.INTERNAL, "could not restore a saved model state")
        self.llm.n_tokens = len(tokens)
        self.llm.input_ids[: len(tokens)] = tokens

    def _restore(self, memory: SessionMemory) -> None:
        """Give the context to `memory`'s session, snapshotting the session that held it.

        Snapshots are taken only when sessions take turns, and hold the sequence's
        state alone (not llama-cpp-python's logits buffer, which is n_batch x n_vocab).
        """
        if self._owner is memory and self.llm.n_tokens == len(memory.tokens):
            return  # the context already holds this session
        if self._owner is not None and self._owner.tokens:
            self._owner.snapshot = self._save_seq()
        if memory.snapshot is not None:
            self._load_seq(memory.snapshot, memory.tokens)
        else:
            self.llm.reset()
            self.llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        self._owner = memory


_FILE_TYPES = {0: "F32", 1: "F16", 7: "Q8_0", 15: "Q4_K_M", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}
