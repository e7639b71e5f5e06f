"""A generation admitted as fitting the context never runs past its end: a thinking
block closed at its budget adds its closing tokens, which the admission must count."""

from __future__ import annotations

import pytest

from hearth.protocol.model.limits import Sampling
from hearth.protocol.model.runtime import LlamaRuntime, SessionMemory
from hearth.protocol.model.toolcalls import ModelOutputError
from hearth.protocol.wire.errors import ErrorCode, HearthError

pytestmark = pytest.mark.hostile

PROMPT = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[1], n_ctx=256)


@pytest.mark.timeout(120)
def test_a_request_that_exactly_fits_ends_by_length_not_a_decode_error(
    runtime: LlamaRuntime,
) -> None:
    """Before: a closed thinking block's tokens were not counted, the last tokens were
    decoded past the context's end and the request failed `internal` (llama_decode 1).
    The largest request the runtime admits must end typed."""
    budget = 20
    max_tokens = runtime.n_ctx - len(runtime.tokenize(PROMPT)) - budget
    finishes = []
    for seed in range(6):
        sampling = Sampling(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=seed)
        for _ in range(8):  # down to the largest admitted request
            try:
                result = runtime.generate(
                    SessionMemory(),
                    PROMPT,
                    grammar='root ::= [a-z ]+ "x"',  # ends only on "x": long answers
                    max_tokens=max_tokens,
                    sampling=sampling,
                    thinking_budget=budget,
                )
            except ModelOutputError:  # random weights may corner the grammar: not this bug
                break
            except HearthError as refused:
                assert refused.code == ErrorCode.INVALID_INPUT, refused
                max_tokens -= 1
                continue
            finishes.append(result.finish)
            break
    assert "length" in finishes  # the context's end was reached (and answered typed)
