"""The llama.cpp runtime: one loaded model, its own token loop, per-session state.

llama-cpp-python's streaming stalls after a token that is not valid UTF-8 and
overruns `max_tokens` while output ends inside a UTF-8 sequence; this loop decodes
incrementally and enforces its own limit. For hybrid recurrent models (`qwen35`)
llama-cpp-python re-reads the whole prompt on every call, so a session keeps its
own saved state and each round evaluates only the new tokens.

Calls block: run them in a worker thread. One lock serialises the shared context.
"""

from __future__ import annotations

import ctypes
import functools
import math
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .chat import ChatTemplate
from .checkpoints import Checkpoints
from .loader import default_threads, load_llama
from .sampling import GrammarCache, LastLogits, Sampling, TokenSampler, Utf8Guard, Utf8Shapes

__all__ = ["Finish", "Generation", "LlamaRuntime", "Sampling", "SessionMemory"]

Finish = Literal["stop", "length", "cancelled"]
PREFIX_CACHE_SIZE = 8
DEFAULT_TURN_END = "<|im_end|>"
DEFAULT_SAMPLING = Sampling()


@dataclass
class Generation:
    """What one generation produced."""

    text: str
    tokens: int
    finish: Finish
    prompt_tokens: int  # evaluated for this call (a cached shared prefix is not)
    confidence: float | None = None  # geometric mean of the model's own token probabilities
    thinking: str = ""  # the thinking block's text, when the request asked for one
    prompt_total: int = 0  # the whole prompt, a cached prefix included (0: not known)
    thinking_tokens: int = 0  # of the thinking block (not in `tokens`)

    @property
    def prompt_counted(self) -> int:
        """The prompt's tokens as a usage report counts them (all of them, when known)."""
        return self.prompt_total or self.prompt_tokens

    @property
    def completion_counted(self) -> int:
        """The answer's tokens as a usage report counts them (thinking included)."""
        return self.tokens + self.thinking_tokens


@dataclass
class SessionMemory:
    """A plan session's model state: the tokens its context holds, and a snapshot."""

    tokens: list[int] = field(default_factory=list)
    snapshot: Any = None
    scope: str = ""  # who asks: kept prompt states serve only their own scope (`Checkpoints`)


SPECIAL_ATTRS = 1 | 8 | 16  # llama.cpp's LLAMA_TOKEN_ATTR_UNKNOWN | CONTROL | USER_DEFINED


def context_exceeded(needed: int, n_ctx: int) -> HearthError:
    """The typed error of a request longer than the model's context (before decoding)."""
    return HearthError(
        ErrorCode.INVALID_INPUT, f"request needs {needed} tokens; the model's context is {n_ctx}"
    )


class LlamaRuntime:
    """One GGUF model in memory, shared by every session."""

    def __init__(self, path: Path, *, n_ctx: int = 8192, n_threads: int | None = None) -> None:
        import llama_cpp

        self._lib = llama_cpp
        self.path = path
        # prompts too on `threads` (llama-cpp-python's default is every core): a batch
        # split over a core another process holds waits on it, 3-10x slower when busy
        threads = n_threads or default_threads()
        self.llm = load_llama(path, n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads)
        self.lock = threading.Lock()
        self._vocab = llama_cpp.llama_model_get_vocab(self.llm.model)
        self._ctx = self.llm.ctx
        self._one = _OneToken(llama_cpp)
        self.logits = LastLogits(llama_cpp, self._ctx, self.llm.n_vocab())
        meta = self.llm.metadata
        self.name = meta.get("general.name", path.stem)
        self.quant = _FILE_TYPES.get(int(meta.get("general.file_type", -1)), "")
        self.n_ctx = self.llm.n_ctx()
        self.chat_template = meta.get("tokenizer.chat_template", "")
        self.recommended = Sampling.from_gguf(meta)  # the model card's own settings, if any
        # its own template and call format, or the default one; refused here if unreadable
        self.template = ChatTemplate.for_model(
            self.chat_template, self.name, bos_token=self._bos_text()
        )
        if not self.chat_template:  # the default's turn end may be plain text to this model
            self.recommended = self.recommended.model_copy(update={"stop": (DEFAULT_TURN_END,)})
        self._owner: weakref.ref[SessionMemory] | None = None  # a dropped session: gone
        self._prefixes: OrderedDict[str, tuple[list[int], bytes]] = OrderedDict()
        self._checkpoints = Checkpoints()  # where recent prompts ended, to go on from
        self._token_bytes: list[bytes] | None = None
        self._utf8_shapes: Utf8Shapes | None = None
        self.grammars = GrammarCache(llama_cpp, self.llm)

    def _bos_text(self) -> str:
        """The text of the model's begin-of-sequence token when its vocabulary asks for
        one (the prompt is tokenized without adding it), for a template's `bos_token`."""
        lib, vocab = self._lib, self._vocab
        bos = lib.llama_vocab_bos(vocab)
        if bos < 0 or not lib.llama_vocab_get_add_bos(vocab):
            return ""
        return bytes(self.llm.detokenize([bos], special=True)).decode("utf-8", "replace")

    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=True))

    @functools.cached_property
    def special_texts(self) -> list[str]:
        """The texts of this model's special tokens (control, user-defined, unknown):
        what `Inert` must break in text this model reads, beside the common markers."""
        vocab = self._lib.llama_model_get_vocab(self.llm.model)
        return [
            bytes(self.llm.detokenize([t], special=True)).decode("utf-8", "replace")
            for t in range(self.llm.n_vocab())
            if self._lib.llama_vocab_get_attr(vocab, t) & SPECIAL_ATTRS
        ]

    def generate(
        self,
        memory: SessionMemory,
        text: str,
        *,
        grammar: str | None,
        max_tokens: int,
        sampling: Sampling = DEFAULT_SAMPLING,
        on_text: Callable[[str], None] = lambda _: None,
        cancelled: Callable[[], bool] = lambda: False,
        prefix: str = "",
        confidence: bool = False,
        thinking_budget: int | None = None,
        on_thinking: Callable[[str], None] = lambda _: None,
    ) -> Generation:
        """Append `prefix + text` to the session's context and generate until end of
        turn, grammar completion, `max_tokens` or `cancelled()` (checked every token).

        With `thinking_budget`, the prompt has opened a `<think>` block: tokens up to
        `</think>` go to `on_thinking` (at most the budget; then the block is closed
        for the model), and the grammar starts after it. Only valid UTF-8 is emitted.
        A `prefix` that sessions share (the tools block of a first prompt) is evaluated
        once and its state kept: the next session that starts with it skips it. A new
        session's prompt is kept too, short of its last token (`Checkpoints`): the same
        prompt again, or one that goes on from it, evaluates only what it adds.
        """
        new_tokens = self.tokenize(text)
        with self.lock:
            self._restore(memory)
            fresh = bool(prefix) or not memory.tokens  # a new context: its prompt is kept
            evaluated_prefix, held = self._start_fresh(memory, prefix, new_tokens)
            rest = new_tokens[held:]  # what no checkpoint holds
            if not memory.tokens and not rest:  # llama.cpp would have no logits to sample
                raise HearthError(ErrorCode.INVALID_INPUT, "the prompt renders to nothing")
            # a block closed at its budget also holds its closing tokens
            budget = thinking_budget + len(self.tokenize(THINK_CLOSE)) if thinking_budget else 0
            needed = len(memory.tokens) + len(rest) + max_tokens + budget
            if needed > self.n_ctx:
                raise context_exceeded(needed, self.n_ctx)
            sampler = TokenSampler(
                self._lib, self.logits, sampling, grammar, self._shapes(), self.grammars
            )
            loop = _TokenLoop(self, sampler, cancelled, confidence)
            try:
                if fresh and len(rest) > 1:  # kept short of its last token
                    self.llm.eval(rest[:-1])
                    memory.tokens = memory.tokens + rest[:-1]
                    self._checkpoints.keep(memory.scope, tuple(memory.tokens), self._save_seq())
                    rest = rest[-1:]
                if len(rest) == 1:
                    self._append(rest[0])  # one token: no batch built, no cache walk
                else:
                    self.llm.eval(rest)
                memory.tokens = memory.tokens + rest
                prompt_total = len(memory.tokens)
                thought = ""
                if thinking_budget:
                    thought = loop.think(thinking_budget, on_thinking)
                sampler.start_grammar()
                answer = loop.run(max_tokens, on_text, sampling.stop) if loop.finish is None else ""
            finally:
                sampler.close()
                memory.tokens = memory.tokens + loop.evaluated
                self._owner = weakref.ref(memory)
            return Generation(
                answer,
                loop.produced,
                loop.finish or "length",
                evaluated_prefix + len(new_tokens) - held,
                math.exp(sum(loop.logprobs) / len(loop.logprobs)) if loop.logprobs else None,
                thinking=thought,
                prompt_total=prompt_total,
                thinking_tokens=loop.thought,
            )

    def token_bytes(self, token: int) -> bytes:
        if self._token_bytes is None:
            self._token_bytes = [
                bytes(self.llm.detokenize([t], special=True)) for t in range(self.llm.n_vocab())
            ]
        return self._token_bytes[token]

    def _shapes(self) -> Utf8Shapes:
        if self._utf8_shapes is None:
            self.token_bytes(0)
            assert self._token_bytes is not None
            eog = [
                t
                for t in range(len(self._token_bytes))
                if self._lib.llama_vocab_is_eog(self._vocab, t)
            ]
            self._utf8_shapes = Utf8Shapes(self._token_bytes, eog)
        return self._utf8_shapes

    def _append(self, token: int) -> None:
        """Evaluate one token at the end of the context: the token loop's decode, through
        one reused batch. `Llama.eval` builds its batch again and clears the cache past
        the end on every call (an O(n_ctx) walk), which an appended token never needs."""
        llm, one = self.llm, self._one
        position = llm.n_tokens
        one.token[0] = token
        one.pos[0] = position
        status = self._lib.llama_decode(self._ctx, one.batch)
        if status != 0:
            raise HearthError(ErrorCode.INTERNAL, f"llama_decode failed ({status})")
        llm.input_ids[position] = token
        llm.n_tokens = position + 1

    def _start_fresh(
        self, memory: SessionMemory, prefix: str, prompt: list[int]
    ) -> tuple[int, int]:
        """Start a new session's context where the most of `prefix + prompt` is held: a
        checkpoint of an earlier prompt, else the shared prefix (a session going on is
        where it left off). Returns the prefix's tokens evaluated and how many of
        `prompt` are held."""
        if memory.tokens:
            return (self._start_from_prefix(memory, prefix) if prefix else 0), 0
        cached = self._prefixes.get(prefix) if prefix else ([], b"")
        found = (
            self._checkpoints.longest(memory.scope, cached[0], prompt)
            if cached is not None
            else None
        )
        if found is None:
            return (self._start_from_prefix(memory, prefix) if prefix else 0), 0
        assert cached is not None
        tokens, state = found
        if prefix:
            self._prefixes.move_to_end(prefix)
        self._load_seq(state, list(tokens))
        memory.tokens = list(tokens)
        return 0, len(tokens) - len(cached[0])

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
        if len(tokens) >= self.n_ctx:  # llama_decode would fail on it
            raise context_exceeded(len(tokens), self.n_ctx)
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
        state alone (not llama-cpp-python's logits buffer, which is n_batch x n_vocab);
        none of a session nobody holds any more (it cannot come back: the phone's rounds,
        a plan session that ended).
        """
        owner = self._owner() if self._owner is not None else None
        if owner is memory and self.llm.n_tokens == len(memory.tokens):
            return  # the context already holds this session
        if owner is not None and owner.tokens:
            owner.snapshot = self._save_seq()
        if memory.snapshot is not None:
            self._load_seq(memory.snapshot, memory.tokens)
        else:
            self.llm.reset()
            self.llm._ctx.kv_cache_seq_rm(-1, 0, -1)
        self._owner = weakref.ref(memory)


class _OneToken:
    """A `llama_batch` of one token in sequence 0 with its logits wanted, over arrays
    this object owns (nothing to free)."""

    def __init__(self, lib: Any) -> None:
        self.token = (lib.llama_token * 1)()
        self.pos = (lib.llama_pos * 1)()
        self._n_seq_id = (ctypes.c_int32 * 1)(1)
        self._seq = (lib.llama_seq_id * 1)(0)
        self._seq_id = (ctypes.POINTER(lib.llama_seq_id) * 1)(self._seq)
        self._logits = (ctypes.c_int8 * 1)(1)
        self.batch = lib.llama_batch(
            n_tokens=1,
            token=self.token,
            pos=self.pos,
            n_seq_id=self._n_seq_id,
            seq_id=self._seq_id,
            logits=self._logits,
        )


_FILE_TYPES = {0: "F32", 1: "F16", 7: "Q8_0", 15: "Q4_K_M", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}


THINK_END = "</think>"
THINK_CLOSE = "\n</think>\n\n"  # what closes a block whose budget ran out


class _TokenLoop:
    """Samples, checks and evaluates tokens one at a time for one generation."""

    def __init__(
        self,
        runtime: LlamaRuntime,
        sampler: TokenSampler,
        cancelled: Callable[[], bool],
        confidence: bool,
    ) -> None:
        self.runtime = runtime
        self.sampler = sampler
        self.cancelled = cancelled
        self.confidence = confidence
        self.utf8 = Utf8Guard()
        self._token_bytes = runtime.token_bytes
        self._end = runtime._shapes().end_of_generation
        self.finish: Finish | None = None
        self.produced = 0
        self.thought = 0  # tokens of the thinking block
        self.evaluated: list[int] = []
        self.logprobs: list[float] = []
        self._pending: int | None = None  # sampled, not yet evaluated

    def _fits(self, token: int) -> bool:
        """End of generation always fits (a started character is dropped)."""
        return token in self._end or self.utf8.fits(self._token_bytes(token))

    def _step(self) -> str | None:
        """One token: its text (maybe empty inside a character), or None at the end."""
        if self._pending is not None:
            self.runtime._append(self._pending)
            self.evaluated.append(self._pending)
            self._pending = None
        token = self.sampler.sample(self._fits, self.utf8.need())
        if self.confidence:
            self.logprobs.append(self.runtime.logits.logprob(token))
        if token in self._end:
            self.finish = "stop"
            return None
        self.produced += 1
        self._pending = token
        return self.utf8.decode(self._token_bytes(token))

    def think(self, budget: int, on_thinking: Callable[[str], None]) -> str:
        """The thinking block, up to `</think>` or `budget` tokens (then closed)."""
        pieces: list[str] = []
        for _ in range(budget):
            piece = self._step()
            if piece is None:
                return "".join(pieces)
            pieces.append(piece)
            on_thinking(piece)
            if self.cancelled():
                self.finish = "cancelled"
                return "".join(pieces)
            if THINK_END in "".join(pieces[-4:]):
                self.thought, self.produced = self.produced, 0
                return "".join(pieces)
        close = self.runtime.tokenize(THINK_CLOSE)
        if self._pending is not None:
            close = [self._pending, *close]
            self._pending = None
        self.runtime.llm.eval(close)
        self.evaluated += close
        self.thought, self.produced = self.produced, 0
        on_thinking(THINK_CLOSE)
        return "".join(pieces) + THINK_CLOSE

    def run(
        self, max_tokens: int, on_text: Callable[[str], None], stop: tuple[str, ...] = ()
    ) -> str:
        """The answer, up to end of generation, `max_tokens`, cancellation or the first
        `stop` string (not included: text that may begin one is held back until known)."""
        out = _StopText(stop, on_text)
        while self.produced < max_tokens:
            piece = self._step()
            if piece is None:
                break
            if piece and out.add(piece):
                self.finish = "stop"
                break
            if self.cancelled():
                self.finish = "cancelled"
                break
        self.finish = self.finish or "length"
        return out.end()


class _StopText:
    """Generated text passed on as it comes, ending before the first stop string."""

    def __init__(self, stop: tuple[str, ...], on_text: Callable[[str], None]) -> None:
        self.stop = [s for s in stop if s]
        self.hold = max((len(s) for s in self.stop), default=1) - 1
        self.on_text = on_text
        self.sent: list[str] = []
        self.held = ""

    def _send(self, text: str) -> None:
        if text:
            self.sent.append(text)
            self.on_text(text)

    def add(self, piece: str) -> bool:
        """Take `piece`; True when a stop string has appeared (the text ends before it)."""
        self.held += piece
        cuts = [i for i in (self.held.find(s) for s in self.stop) if i >= 0]
        if cuts:
            self._send(self.held[: min(cuts)])
            self.held = ""
            return True
        keep = min(self.hold, len(self.held))
        self._send(self.held[: len(self.held) - keep])
        self.held = self.held[len(self.held) - keep :]
        return False

    def end(self) -> str:
        self._send(self.held)
        self.held = ""
        return "".join(self.sent)
