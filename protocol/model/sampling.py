"""The per-generation sampler: llama.cpp's own sampler chain, its (lazy) grammar
sampler checked before use, and valid UTF-8 only.

A token whose bytes would break UTF-8 after what was written is never emitted: it
is taken out of the candidates and the choice made again. A grammar llama.cpp
cannot parse is `invalid_input`, never a null sampler handed on (a crash).
"""

from __future__ import annotations

import codecs
import ctypes
import math
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .grammar import ToolGrammar
from .limits import Sampling
from .toolcalls import ModelOutputError

__all__ = [
    "GrammarCache",
    "LastLogits",
    "Sampling",
    "TokenSampler",
    "Utf8Guard",
    "Utf8Shapes",
    "compile_grammar",
    "first_rejected",
]

MAX_RESAMPLES = 32  # candidates taken out for one position before giving up
GRAMMAR_CACHE_SIZE = 16  # compiled grammars kept per model (a few tool sets in use)


def _completable(started: bytes) -> bool:
    """Whether some continuation bytes finish the character `started` begins (the
    decoder holds `\\xed\\xa0`, a surrogate's start, without complaint)."""
    if not started:
        return True
    total = 2 if started[0] < 0xE0 else 3 if started[0] < 0xF0 else 4
    fill = b"\x80" * (total - len(started) - 1)
    for nxt in (0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF):
        try:
            (started + bytes([nxt]) + fill).decode("utf-8")
        except UnicodeDecodeError:
            continue
        return True
    return False


class Utf8Guard:
    """An incremental strict UTF-8 decoder over token bytes."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("strict")

    def fits(self, data: bytes) -> bool:
        """Whether `data` may follow what was decoded so far and leaves a character
        that can still be finished (nothing is consumed)."""
        state = self._decoder.getstate()
        if not state[0] and data.isascii():  # whole characters after whole characters
            return True
        try:
            self._decoder.decode(data)
            return _completable(self._decoder.getstate()[0])
        except UnicodeDecodeError:
            return False
        finally:
            self._decoder.setstate(state)

    def decode(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def need(self) -> int:
        """How many continuation bytes the character started last still needs."""
        started = self._decoder.getstate()[0]
        if not started:
            return 0
        total = 2 if started[0] < 0xE0 else 3 if started[0] < 0xF0 else 4
        return max(0, total - len(started))


def _decodes(data: bytes) -> bool:
    """Valid UTF-8, allowing a character cut at the end."""
    try:
        codecs.getincrementaldecoder("utf-8")("strict").decode(data)
    except UnicodeDecodeError:
        return False
    return True


class Utf8Shapes:
    """Which tokens can follow a text that waits for `need` continuation bytes: a
    mask per `need` (0-3), from each token's leading continuation bytes and whether
    the rest is valid UTF-8. Narrows the candidates before sampling; `Utf8Guard`
    still has the last word (a lead byte's exact ranges)."""

    def __init__(self, token_bytes: list[bytes], end_of_generation: list[int]) -> None:
        self.end_of_generation = frozenset(end_of_generation)
        lead = np.array(
            [len(b) - len(b.lstrip(bytes(range(0x80, 0xC0)))) for b in token_bytes],
            dtype=np.int32,
        )
        size = np.array([len(b) for b in token_bytes], dtype=np.int32)
        rest_ok = np.array([_decodes(b.lstrip(bytes(range(0x80, 0xC0)))) for b in token_bytes])
        self._fits: list[np.ndarray] = []
        self._refused: list[np.ndarray] = []
        for need in range(4):
            fits = (lead == min(need, 4)) & rest_ok
            if need:
                fits |= (lead == size) & (size > 0) & (size < need)  # all continuation bytes
            fits[end_of_generation] = True
            self._fits.append(fits)
            self._refused.append(np.flatnonzero(~fits))

    def refused(self, need: int) -> np.ndarray:
        """The refused token ids (an index list: setting a few ids beats a vocabulary-wide mask)."""
        return self._refused[need]

    def fits(self, need: int, token: int) -> bool:
        return bool(self._fits[need][token])


class LastLogits:
    """The context's last row of logits as a numpy view, made again only when llama.cpp
    has moved its output buffer: a view per token costs more than checking a token."""

    def __init__(self, lib: Any, ctx: Any, n_vocab: int) -> None:
        self._lib = lib
        self.ctx = ctx
        self.n_vocab = n_vocab
        self._address = 0
        self._view = np.empty(0, dtype=np.single)
        self._scratch = np.empty(n_vocab, dtype=np.single)

    def __call__(self) -> np.ndarray:
        row = self._lib.llama_get_logits_ith(self.ctx, -1)
        address = ctypes.addressof(row.contents)
        if address != self._address:
            self._view = np.ctypeslib.as_array(row, shape=(self.n_vocab,))
            self._address = address
        return self._view

    def logprob(self, token: int) -> float:
        """log p(token) under the row's own (unconstrained) distribution: the grammar
        narrows the choice, this says how sure the model was. Worked in one kept buffer
        (two vocabulary-sized temporaries per token before)."""
        logits, scratch = self(), self._scratch
        top = float(logits.max())
        np.subtract(logits, top, out=scratch)
        np.exp(scratch, out=scratch)
        return float(logits[token]) - top - math.log(float(scratch.sum()))


class GrammarCache:
    """Compiled grammar samplers for one model, by grammar text, least recently used
    first out: parsing a tool grammar costs milliseconds per generation, a clone of
    the parsed one (rules and start state copied, nothing parsed) microseconds."""

    def __init__(self, lib: Any, llm: Any, size: int = GRAMMAR_CACHE_SIZE) -> None:
        self._lib = lib
        self._llm = llm
        self._vocab = lib.llama_model_get_vocab(llm.model)
        self._size = size
        self._lock = threading.Lock()
        self._compiled: OrderedDict[tuple[str, str | None], Any] = OrderedDict()

    def sampler(self, grammar: ToolGrammar | str) -> Any:
        """A fresh sampler for `grammar` in its start state, owned by the caller (who
        frees it); `invalid_input` when llama.cpp cannot parse it (nothing is cached)."""
        key = self._key(grammar)
        with self._lock:
            compiled = self._compiled.get(key)
            if compiled is None:
                compiled = compile_grammar(self._lib, self._vocab, grammar, self._llm)
                self._compiled[key] = compiled
                while len(self._compiled) > self._size:
                    self._lib.llama_sampler_free(self._compiled.popitem(last=False)[1])
            self._compiled.move_to_end(key)
            return self._lib.llama_sampler_clone(compiled)

    @staticmethod
    def _key(grammar: ToolGrammar | str) -> tuple[str, str | None]:
        """The grammar's text, and its trigger when it is lazy."""
        lazy = isinstance(grammar, ToolGrammar) and grammar.lazy
        return str(grammar), grammar.trigger if isinstance(grammar, ToolGrammar) and lazy else None

    def __contains__(self, grammar: ToolGrammar | str) -> bool:
        return self._key(grammar) in self._compiled

    def __len__(self) -> int:
        return len(self._compiled)

    def __del__(self) -> None:
        for compiled in self._compiled.values():
            self._lib.llama_sampler_free(compiled)
        self._compiled.clear()


class TokenSampler:
    """One generation's sampler chain (penalties, top-k, top-p, min-p, temperature,
    then a seeded draw, or greedy), with an optional grammar started on demand."""

    def __init__(
        self,
        lib: Any,
        logits: LastLogits,
        sampling: Sampling,
        grammar: ToolGrammar | str | None,
        shapes: Utf8Shapes,
        grammars: GrammarCache,
    ) -> None:
        self._lib = lib
        self._shapes = shapes
        self._logits = logits
        self._n_vocab = logits.n_vocab
        # parsed first: a grammar llama.cpp refuses ends the request before any work
        self._grammar: Any = grammars.sampler(grammar) if grammar else None
        self._constrained = False
        params = lib.llama_sampler_chain_default_params()
        self._chain = lib.llama_sampler_chain_init(params)

        def add(sampler: Any) -> None:
            lib.llama_sampler_chain_add(self._chain, sampler)

        # the binding declares a leading n_vocab the C function lacks: the first int is
        # what llama.cpp reads as penalty_last_n, so both ints carry it
        last_n = sampling.repeat_last_n
        add(
            lib.llama_sampler_init_penalties(
                last_n,
                last_n,
                sampling.repeat_penalty,
                sampling.frequency_penalty,
                sampling.presence_penalty,
            )
        )
        if sampling.temperature == 0:
            add(lib.llama_sampler_init_greedy())
        else:
            if sampling.top_k:
                add(lib.llama_sampler_init_top_k(sampling.top_k))
            add(lib.llama_sampler_init_top_p(sampling.top_p, 1))
            add(lib.llama_sampler_init_min_p(sampling.min_p, 1))
            add(lib.llama_sampler_init_temp(sampling.temperature))
            add(lib.llama_sampler_init_dist(sampling.seed))
        # greedy with neutral penalties is the argmax, which llama.cpp finds from the
        # context's logits itself; the candidates are built here only when it is refused
        greedy = sampling.temperature == 0 and sampling.neutral_penalties
        self._argmax = lib.llama_sampler_init_greedy() if greedy else None
        self._data = np.zeros(
            (self._n_vocab,),
            dtype=np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True),
        )
        self._ids = np.arange(self._n_vocab, dtype=np.intc)
        self._array = lib.llama_token_data_array(
            data=self._data.ctypes.data_as(lib.llama_token_data_p), size=self._n_vocab
        )
        self._id, self._logit, self._p = (self._data[f] for f in ("id", "logit", "p"))
        self._one = (lib.llama_token_data * 1)()
        self._one_array = lib.llama_token_data_array(data=self._one, size=1, selected=-1)
        self._candidate = self._one[0]  # a view into `_one`, made once
        self._array_ref, self._one_ref = ctypes.byref(self._array), ctypes.byref(self._one_array)

    def start_grammar(self) -> None:
        """Constrain from now on (a lazy grammar from its trigger on)."""
        self._constrained = self._grammar is not None

    def sample(self, allowed: Any, need: int) -> int:
        """The next token for the context's last logits that `allowed(token)` accepts,
        among those that fit a text waiting for `need` UTF-8 continuation bytes; the
        chain and the grammar are told it was taken."""
        logits = self._logits()
        banned: list[int] = []
        whole_vocabulary = False  # checking only the chosen token is llama.cpp's fast path
        attempts = MAX_RESAMPLES
        if self._argmax is not None:  # the loop's first choice, when the argmax fits
            token = self._lib.llama_sampler_sample(self._argmax, self._logits.ctx, -1)
            if self._shapes.fits(need, token) and math.isfinite(logits[token]):
                attempts -= 1
                if self._constrained and not self._grammar_allows(token):
                    whole_vocabulary = True
                elif allowed(token):
                    return self._accept(token)
                else:
                    banned.append(token)
        for _ in range(attempts):
            token, logit = self._choose(logits, need, banned, whole_vocabulary)
            if not math.isfinite(logit):
                raise ModelOutputError("no token can continue the output within its grammar")
            if self._constrained and not whole_vocabulary and not self._grammar_allows(token):
                whole_vocabulary = True  # the grammar narrows every candidate from now on
                continue
            if allowed(token):
                return self._accept(token)
            banned.append(token)
        raise ModelOutputError("the model keeps choosing invalid UTF-8")

    def _accept(self, token: int) -> int:
        """Tell the chain and the grammar `token` was taken."""
        if self._constrained:
            self._lib.llama_sampler_accept(self._grammar, token)
        self._lib.llama_sampler_accept(self._chain, token)
        return token

    def _choose(
        self, logits: np.ndarray, need: int, banned: list[int], with_grammar: bool
    ) -> tuple[int, float]:
        lib = self._lib
        self._id[:] = self._ids
        np.copyto(self._logit, logits)
        self._logit[self._shapes.refused(need)] = -np.inf
        if banned:
            self._logit[banned] = -np.inf
        self._p.fill(0)
        self._array.size = self._n_vocab
        self._array.selected = -1
        self._array.sorted = False
        if with_grammar and self._constrained:
            lib.llama_sampler_apply(self._grammar, self._array_ref)
        lib.llama_sampler_apply(self._chain, self._array_ref)
        chosen = self._array.data[self._array.selected]  # samplers may move the data
        return int(chosen.id), float(chosen.logit)

    def _grammar_allows(self, token: int) -> bool:
        candidate = self._candidate
        candidate.id, candidate.logit, candidate.p = token, 0.0, 0.0
        self._one_array.size = 1
        self._lib.llama_sampler_apply(self._grammar, self._one_ref)
        return math.isfinite(candidate.logit)

    def close(self) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
        if self._chain is not None:
            self._lib.llama_sampler_free(self._chain)
            self._chain = None
        if self._argmax is not None:
            self._lib.llama_sampler_free(self._argmax)
            self._argmax = None


def compile_grammar(lib: Any, vocab: Any, grammar: ToolGrammar | str, llm: Any) -> Any:
    """llama.cpp's grammar sampler for `grammar` (lazy ones wait for their trigger, as a
    token or as text); `invalid_input` when llama.cpp cannot parse it."""
    text = str(grammar).encode()
    if isinstance(grammar, ToolGrammar) and grammar.lazy:
        trigger = grammar.trigger
        tokens = list(llm.tokenize(trigger.encode(), add_bos=False, special=True))
        token_ids = tokens if len(tokens) == 1 and not grammar.anchored else []
        pattern = ("^" if grammar.anchored else "") + _regex_escape(trigger)
        patterns = (ctypes.c_char_p * 1)(pattern.encode())
        ids = (lib.llama_token * len(token_ids))(*token_ids)
        sampler = lib.llama_sampler_init_grammar_lazy_patterns(
            vocab, text, b"root", patterns, 1, ids, len(token_ids)
        )
    else:
        sampler = lib.llama_sampler_init_grammar(vocab, text, b"root")
    if not sampler:
        raise HearthError(ErrorCode.INVALID_INPUT, "llama.cpp cannot parse the tool grammar")
    return sampler


def _regex_escape(text: str) -> str:
    return "".join("\\" + c if c in r"\^$.|?*+()[]{}" else c for c in text)


def first_rejected(lib: Any, llm: Any, grammar: ToolGrammar | str, tokens: list[int]) -> int | None:
    """Feed `tokens` through llama.cpp's own grammar sampler one at a time, as
    generation would: the index of the first token it refuses, `len(tokens)` if it
    would not let the output end there, or None when it accepts all and the end."""
    vocab = lib.llama_model_get_vocab(llm.model)
    sampler = compile_grammar(lib, vocab, grammar, llm)
    data = (lib.llama_token_data * 1)()
    array = lib.llama_token_data_array(data=data, size=1, selected=-1, sorted=False)
    try:
        for i, token in enumerate([*tokens, lib.llama_vocab_eos(vocab)]):
            data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
            array.size = 1
            lib.llama_sampler_apply(sampler, ctypes.byref(array))
            if not math.isfinite(data[0].logit):
                return i
            if i < len(tokens):
                lib.llama_sampler_accept(sampler, token)
        return None
    finally:
        lib.llama_sampler_free(sampler)
