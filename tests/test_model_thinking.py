"""Thinking per request on the home node: off by default, bounded by its own budget,
sent as progress (tokens flagged `thinking`), never parsed as a call."""

from __future__ import annotations

from hearth.protocol.wire.messages import ChatMessage, Limits, PlanRequest

from .test_node import TOOLS, node, phone, plan  # noqa: F401  (fixtures)


def ask(thinking: bool) -> PlanRequest:
    return PlanRequest(
        request_id=f"think-{thinking}".lower(),
        tool_choice="required",
        tools=TOOLS,
        thinking=thinking,
        conversation=[ChatMessage(role="user", content="note milk")],
        limits=Limits(
            max_rounds=2, max_steps=1, max_tokens=200, max_thinking_tokens=6, max_value_chars=20
        ),
    )


def test_thinking_is_flagged_progress_within_its_budget(node, phone) -> None:  # noqa: F811
    for thinking in (False, True):
        tokens: list = []

        async def on_token(token, seen=tokens) -> None:  # type: ignore[no-untyped-def]
            seen.append(token)

        outcome = plan(phone, node, ask(thinking), on_token=on_token)
        thought = [t.text for t in tokens if t.thinking]
        if not thinking:
            assert thought == []  # off by default: the template closed the block
            continue
        blocks = "".join(thought)  # streamed as it comes, each round's block closed
        assert thought and blocks.rstrip().endswith("</think>")
        assert blocks.count("</think>") == len(outcome.plans) + 1  # every round thinks once
        assert outcome.plans and outcome.plans[0].steps  # the calls come after the block
