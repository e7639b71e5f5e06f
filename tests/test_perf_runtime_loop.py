"""The token loop's own work per token: one decode through a reused batch, not
`Llama.eval` (which rebuilt its batch and walked the whole cache on every call), with
the same tokens `Llama.eval` gives and the state later rounds and sessions rely on;
greedy choices taken from llama.cpp's own argmax when it passes every check, else
made by the candidate loop, with the same result."""

from __future__ import annotations

import dataclasses

import llama_cpp.llama_cpp as llama_c
import numpy as np
import pytest

from hearth.protocol.model.grammar import tool_grammar
from hearth.protocol.model.limits import Sampling
from hearth.protocol.model.runtime import Generation, LlamaRuntime, SessionMemory
from hearth.protocol.model.sampling import TokenSampler, Utf8Guard

pytestmark = pytest.mark.timeout(300)

PROMPT = "<|im_start|>user\nnote milk<|im_end|>\n<|im_start|>assistant\n"
NEXT = "<|im_end|>\n<|im_start|>user\nand eggs<|im_end|>\n<|im_start|>assistant\n"
GRAMMAR = tool_grammar(
    {"notes_create": {"type": "object", "properties": {"text": {"type": "string"}}}},
    "required",
    max_calls=1,
)
CASES = {
    "greedy": (None, Sampling()),
    "sampled": (None, Sampling(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=7)),
    "greedy with a grammar": (GRAMMAR, Sampling()),
    "sampled with a grammar": (GRAMMAR, Sampling(temperature=0.8, seed=3)),
}


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[0], n_ctx=2048, n_threads=1)


def test_a_generated_token_is_one_decode_without_a_cache_walk(
    runtime: LlamaRuntime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: every token went through `Llama.eval`, which cleared the cache past the
    end (`llama_memory_seq_rm`, a walk over all n_ctx cells) first: 64 tokens, 64 walks."""
    walks: list[tuple[object, ...]] = []
    seq_rm = llama_c.llama_memory_seq_rm

    def counted(*args: object) -> bool:  # the real call, counted
        walks.append(args)
        return bool(seq_rm(*args))

    monkeypatch.setattr(llama_c, "llama_memory_seq_rm", counted)
    result = runtime.generate(SessionMemory(), PROMPT, grammar=None, max_tokens=64)
    assert result.tokens >= 32
    assert len(walks) <= 2  # the session's start and its prompt, not one per token


@pytest.mark.parametrize("case", list(CASES))
def test_the_loop_generates_what_llama_eval_gives_token_for_token(
    runtime: LlamaRuntime, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """Two rounds of one session, with another session between them (its state saved and
    restored), give the same text, token counts and confidence as decoding each token
    through llama-cpp-python's own `Llama.eval`; the context's bookkeeping matches."""
    grammar, sampling = CASES[case]

    def session() -> list[Generation]:
        memory, other = SessionMemory(), SessionMemory()
        rounds = []
        for text in (PROMPT, NEXT):
            rounds.append(
                runtime.generate(
                    memory,
                    text,
                    grammar=grammar,
                    max_tokens=48,
                    sampling=sampling,
                    confidence=True,
                )
            )
            assert list(runtime.llm.input_ids[: runtime.llm.n_tokens]) == memory.tokens
            runtime.generate(other, PROMPT, grammar=None, max_tokens=4)
        return rounds

    ours = session()
    monkeypatch.setattr(runtime, "_append", lambda token: runtime.llm.eval([token]))
    assert session() == ours
    assert ours[0].tokens > 0 and ours[1].prompt_tokens > 0


@pytest.mark.parametrize("grammar", [None, GRAMMAR], ids=["free", "grammar"])
@pytest.mark.parametrize("seed_text", ["note milk", "Grüße, 東京 🚀 ok"])
def test_greedy_generation_is_the_same_with_llama_cpp_choosing_the_argmax(
    runtime: LlamaRuntime, monkeypatch: pytest.MonkeyPatch, grammar: str | None, seed_text: str
) -> None:
    """Greedy sampling takes llama.cpp's own argmax when it fits (UTF-8, grammar); the
    text, counts and confidence are those of building every token's candidates here."""
    prompt = f"<|im_start|>user\n{seed_text}<|im_end|>\n<|im_start|>assistant\n"

    def generate() -> Generation:
        return runtime.generate(
            SessionMemory(), prompt, grammar=grammar, max_tokens=96, confidence=True
        )

    fast = generate()
    init = TokenSampler.__init__

    def candidates_only(sampler: TokenSampler, *args: object, **kwargs: object) -> None:
        init(sampler, *args, **kwargs)  # type: ignore[arg-type]
        runtime._lib.llama_sampler_free(sampler._argmax)
        sampler._argmax = None

    monkeypatch.setattr(TokenSampler, "__init__", candidates_only)
    again = generate()
    assert again.prompt_tokens == 1  # the same prompt: held since `fast` but its last token
    assert dataclasses.replace(again, prompt_tokens=fast.prompt_tokens) == fast
    assert fast.tokens > 0


# (argmax token, bytes written so far, constrained by GRAMMAR): the argmax a lead byte
# that fits; a continuation byte where none is awaited (refused by the UTF-8 shapes); an
# ASCII letter inside a character; a continuation that fits the shape but not the lead
# byte (E0 80 is overlong: the guard's last word); a token the grammar refuses
ARGMAX_CASES = [
    (b"\xe6", b"", False),
    (b"\x80", b"", False),
    (b"a", b"\xe6", False),
    (b"\x80", b"\xe0", False),
    (b"a", b"", True),
    (b"<tool_call>", b"", True),
]


@pytest.mark.parametrize(("argmax", "written", "constrained"), ARGMAX_CASES)
def test_an_argmax_the_checks_refuse_is_chosen_again_as_the_candidate_loop_would(
    runtime: LlamaRuntime, argmax: bytes, written: bytes, constrained: bool
) -> None:
    """The context's logits are set so the argmax is `argmax`: the greedy sampler that
    asks llama.cpp for it takes the token the candidate loop takes, and leaves the
    grammar in the same state (the next choice agrees too)."""
    lib = runtime._lib
    vocabulary = [runtime.token_bytes(t) for t in range(runtime.llm.n_vocab())]
    runtime.generate(SessionMemory(), PROMPT, grammar=None, max_tokens=1)
    logits = runtime.logits()
    logits[:] = np.random.default_rng(5).normal(size=logits.shape)
    logits[vocabulary.index(argmax)] = 40.0
    chosen = []
    for fast in (True, False):
        sampler = TokenSampler(
            lib, runtime.logits, Sampling(), GRAMMAR, runtime._shapes(), runtime.grammars
        )
        if not fast:
            lib.llama_sampler_free(sampler._argmax)
            sampler._argmax = None
        if constrained:
            sampler.start_grammar()
        guard = Utf8Guard()
        guard.decode(written)
        fits = [guard.fits(token) for token in vocabulary]
        try:
            picks = [sampler.sample(fits.__getitem__, guard.need())]
            picks.append(sampler.sample(lambda _token: True, 0))
        finally:
            sampler.close()
        chosen.append(picks)
    assert chosen[0] == chosen[1]
