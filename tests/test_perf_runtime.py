"""The token loop's hot path: prompts are evaluated on the runtime's own threads (not
every core), and compiled grammars are reused per grammar text with results equal to
uncached work: every generation starts from the grammar's start state, the cache
stays bounded, and a refused grammar is not kept."""

from __future__ import annotations

import pytest
import trio

from hearth.companion.local_model import LocalModel
from hearth.protocol.model.grammar import Mode, tool_grammar
from hearth.protocol.model.limits import Sampling
from hearth.protocol.model.runtime import LlamaRuntime, SessionMemory
from hearth.protocol.model.sampling import GRAMMAR_CACHE_SIZE, GrammarCache
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ToolSpec

pytestmark = pytest.mark.timeout(300)

SCHEMAS = {
    "notes_create": {
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 30}},
        "required": ["text"],
    }
}
PROMPT = "<|im_start|>user\nnote milk<|im_end|>\n<|im_start|>assistant\n"
SAMPLING = Sampling(temperature=0.9, top_k=0, top_p=1.0, min_p=0.0, seed=7)


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[1], n_ctx=2048)


def test_prompts_are_evaluated_on_the_generation_threads(tiny_models) -> None:
    """llama-cpp-python evaluates prompts on every core by default; on a busy machine a
    batch split across a core another process holds ran 3-10x slower (before: 2)."""
    runtime = LlamaRuntime(tiny_models[1], n_ctx=512, n_threads=1)
    assert runtime.llm.context_params.n_threads == 1
    assert runtime.llm.context_params.n_threads_batch == 1


@pytest.mark.parametrize("choice", ["required", "auto"])
def test_a_cached_grammar_starts_each_generation_from_its_start_state(
    runtime: LlamaRuntime, choice: str
) -> None:
    """The second generation reuses the compiled grammar (not parsed again) and writes
    exactly what the first wrote: the first one's accepted tokens left no state."""
    grammar = tool_grammar(SCHEMAS, choice, max_calls=1)
    before = len(runtime.grammars)
    texts = [
        runtime.generate(
            SessionMemory(), PROMPT, grammar=grammar, max_tokens=80, sampling=SAMPLING
        ).text
        for _ in range(3)
    ]
    assert len(runtime.grammars) == before + 1
    assert texts[0] == texts[1] == texts[2]
    if choice == "required":
        assert texts[0].startswith("<tool_call>")


def test_the_grammar_cache_is_bounded_least_recently_used_first_out(
    runtime: LlamaRuntime,
) -> None:
    cache = GrammarCache(runtime._lib, runtime.llm, size=3)
    kept = 'root ::= "kept"'
    for n in range(8):
        runtime._lib.llama_sampler_free(cache.sampler(kept))  # used between every other
        runtime._lib.llama_sampler_free(cache.sampler(f'root ::= "g{n}"'))
    assert len(cache) == 3
    assert kept in cache and 'root ::= "g7"' in cache and 'root ::= "g5"' not in cache
    assert GRAMMAR_CACHE_SIZE >= 4  # a few tool sets in use stay compiled


def test_a_refused_grammar_is_not_cached(runtime: LlamaRuntime) -> None:
    cache = GrammarCache(runtime._lib, runtime.llm)
    for _ in range(2):
        with pytest.raises(HearthError) as caught:
            cache.sampler('root ::= "a"{2500,120}')
        assert caught.value.code == ErrorCode.INVALID_INPUT
    assert len(cache) == 0


@pytest.mark.parametrize("mode", ["auto", "required"])  # an answer; a plan
def test_a_warm_local_model_reuses_its_prompt_prefix_with_the_same_answers(
    tiny_models, mode: Mode
) -> None:
    """The phone's model evaluated its whole prompt (3828 tokens with every phone tool)
    on every request; the system and tools part is now evaluated once per process and
    the plan and answer stay what a fresh model gives (greedy)."""
    tools = [
        ToolSpec.model_validate(
            {"function": {"name": name, "description": "Keep a note", "parameters": schema}}
        )
        for name, schema in SCHEMAS.items()
    ]

    async def ask(model: LocalModel) -> tuple[str, list[tuple[str, dict]], int]:
        result = await model.plan("note milk", tools, "phone", mode=mode)
        steps = [(s.tool, s.arguments) for s in result.plan.steps] if result.plan else []
        return result.answer, steps, result.prompt_evaluated

    async def go() -> list[tuple[str, list[tuple[str, dict]], int]]:
        warm = LocalModel(tiny_models[1], n_ctx=2048, sampling=Sampling())
        fresh = LocalModel(tiny_models[1], n_ctx=2048, sampling=Sampling())
        return [await ask(warm), await ask(warm), await ask(fresh)]

    first, second, fresh = trio.run(go)
    assert bool(first[1]) == (mode == "required")
    assert first[:2] == second[:2] == fresh[:2]
    assert first[2] == fresh[2] > second[2] > 0
