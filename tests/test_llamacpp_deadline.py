"""A plan session's deadline (a friend's: how long it may hold a friends' slot) stops
the model's generation, not only the waiting for it: the worker thread is told to stop."""

from __future__ import annotations

import anyio
import pytest

from hearth.node.backends import Conversation, GenerationSettings
from hearth.node.backends.llamacpp import LlamaCppBackend
from hearth.protocol.model.grammar import ToolGrammar
from hearth.protocol.model.limits import Sampling
from hearth.protocol.wire.messages import ChatMessage

pytestmark = pytest.mark.hostile

MAX_TOKENS = 3000


@pytest.mark.timeout(180)
def test_a_deadline_mid_generation_stops_the_generation(tiny_models) -> None:
    """Before: the deadline's cancellation waited for the worker thread, which generated
    on to `max_tokens` holding the model and the session's slot."""
    backend = LlamaCppBackend(tiny_models[1], n_ctx=4096)
    conv = Conversation(messages=[ChatMessage(role="user", content="hi")])
    sampling = Sampling(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=3)

    async def main() -> None:
        with anyio.CancelScope() as deadline:  # passes once the answer has begun

            async def on_text(_: str) -> None:
                deadline.cancel()

            await backend.generate(
                conv,
                grammar=ToolGrammar("root ::= [a-w ] root"),  # never complete: on to max_tokens
                settings=GenerationSettings(MAX_TOKENS, sampling),
                on_text=on_text,
                cancel=anyio.Event(),
            )
        assert deadline.cancelled_caught

    anyio.run(main, backend="trio")
    prompt = len(backend.runtime.tokenize(backend.render(conv)))
    assert len(conv.memory.tokens) - prompt < MAX_TOKENS // 10
