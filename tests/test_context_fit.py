"""A request longer than the model's context is a typed error before any decoding
(a tools block of 50 real tools once made llama_decode fail: `internal`), and the
model serves the next request as before."""

from __future__ import annotations

import pytest

from hearth.protocol.model.runtime import LlamaRuntime, SessionMemory
from hearth.protocol.wire.errors import ErrorCode, HearthError


@pytest.fixture(scope="module")
def runtime(tiny_models) -> LlamaRuntime:
    return LlamaRuntime(tiny_models[1], n_ctx=256)


@pytest.mark.parametrize("where", ["prefix", "prompt"])
def test_a_prompt_past_the_context_is_invalid_input_and_the_model_goes_on(
    runtime: LlamaRuntime, where: str
) -> None:
    long = "<|im_start|>system\n" + "tool schema text " * 400
    prefix, text = (long, "<|im_start|>user\nhi") if where == "prefix" else ("", long)
    with pytest.raises(HearthError) as refused:
        runtime.generate(SessionMemory(), text, prefix=prefix, grammar=None, max_tokens=4)
    assert refused.value.code == ErrorCode.INVALID_INPUT
    assert "the model's context is 256" in refused.value.message
    after = runtime.generate(SessionMemory(), "<|im_start|>user\nhi", grammar=None, max_tokens=4)
    assert after.tokens >= 1 and after.finish in ("stop", "length")


@pytest.mark.parametrize("value", [5e-324, 1e-300, 0.4, 17.0])
def test_a_node_cannot_report_a_token_size_that_breaks_the_phones_count(value: float) -> None:
    """A hostile home saying one token holds 1e-300 characters made the phone's count
    overflow (`internal`) or refuse every request."""
    from pydantic import ValidationError

    from hearth.protocol.wire.messages import ModelInfo

    with pytest.raises(ValidationError):
        ModelInfo(name="m", n_ctx=8192, chars_per_token=value)
