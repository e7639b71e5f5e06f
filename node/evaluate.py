"""How well a model plans the phone's built-in requests, measured as the node plans:

    python -m hearth.node.evaluate [--model PATH ...] [--count 200] [--seed 0]

Each held-out request of the micro-planner's generator (phrasings and slot values the
training never saw, `micro.requests`) goes through the node's own path: the
conversation with the phone's time (`Conversation.now`), the model's chat template, the
grammar of the tools the request offers, sampling (the model's own recommended
settings, with `--seed`), the parser of the model's call format and the schema check
(`planner.model_round`). A plan is exact when its calls (tools and arguments) are the
request's; a question is answered exactly when the text is the expected answer, and in
words when no tool is called. Without `--model` it measures the micro-planner's BF16
and Q4_K_M files, each apart. Prints `NN% exact` per model; `--json` prints the figures.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio

from hearth.protocol.model.chat import phone_time
from hearth.protocol.model.micro.files import kept, tool_specs
from hearth.protocol.model.micro.requests import Example, examples
from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.messages import ChatMessage, Limits, ToolSpec

from .backends import Conversation, GenerationSettings
from .backends.llamacpp import LlamaCppBackend
from .planner import RoundSettings, model_round

MAX_TOKENS = 256  # a plan of two calls, or a sentence, with room to spare


@dataclass(frozen=True)
class Score:
    """One model's figures on the held-out set."""

    model: str
    requests: int
    exact: int  # plans and answers exactly as expected
    plans: int
    plans_exact: int
    plans_right_tools: int  # the right tools in the right order, whatever their arguments
    questions: int
    questions_in_words: int  # answered without calling a tool
    questions_exact: int
    errors: int  # a typed error instead of a plan or an answer
    seed: int
    temperature: float

    @property
    def share(self) -> float:
        return self.exact / max(self.requests, 1)

    def line(self) -> str:
        """The figures in one line, led by `NN% exact`."""
        return (
            f"{self.model}: {self.share:.0%} exact ({self.exact}/{self.requests} held-out "
            f"requests: plans {self.plans_exact}/{self.plans} (the right tools "
            f"{self.plans_right_tools}), questions answered in words "
            f"{self.questions_in_words}/{self.questions}, exactly {self.questions_exact}; "
            f"{self.errors} typed errors), seed {self.seed}, temperature {self.temperature:g}"
        )


@dataclass(frozen=True)
class Seen:
    """What the model did with one request."""

    exact: bool
    right_tools: bool
    in_words: bool


async def outcome(backend: LlamaCppBackend, ex: Example, seed: int) -> Seen:
    """How the model planned one request, through the node's round."""
    specs = {s["function"]["name"]: ToolSpec.model_validate(s) for s in tool_specs()}
    tools = [specs[name] for name in ex.tools]
    conv = Conversation(
        messages=[ChatMessage(role="user", content=ex.request)],
        tools=tools,
        now=phone_time(ex.now),
    )
    schemas = {t.function.name: dict(t.function.parameters) for t in tools}
    sampling = backend.runtime.recommended.model_copy(update={"seed": seed})
    _, parsed = await model_round(
        backend,
        conv,
        schemas,
        RoundSettings("auto", 8, Limits(max_tokens=MAX_TOKENS)),
        GenerationSettings(MAX_TOKENS, sampling),
    )
    got = [(c.name, c.arguments) for c in parsed.calls]
    wanted = [(c.name, dict(c.arguments)) for c in ex.calls]
    right = [name for name, _ in got] == [name for name, _ in wanted]
    if ex.calls:
        return Seen(got == wanted, right, False)
    return Seen(not got and parsed.text.strip() == ex.answer, right, not got)


async def score(path: Path, count: int, seed: int) -> Score:
    """`path`'s figures on the first `count` held-out requests of `seed`."""
    backend = await anyio.to_thread.run_sync(LlamaCppBackend, path, 2048)
    held = list(examples("held-out", count, seed))
    exact = plans_exact = right_tools = in_words = questions_exact = errors = 0
    for ex in held:
        try:
            seen = await outcome(backend, ex, seed)
        except HearthError:
            errors += 1
            continue
        exact += seen.exact
        if ex.calls:
            plans_exact += seen.exact
            right_tools += seen.right_tools
        else:
            in_words += seen.in_words
            questions_exact += seen.exact
    plans = sum(bool(ex.calls) for ex in held)
    return Score(
        path.name,
        len(held),
        exact,
        plans,
        plans_exact,
        right_tools,
        len(held) - plans,
        in_words,
        questions_exact,
        errors,
        seed,
        backend.runtime.recommended.temperature,
    )


def main(argv: Sequence[str] | None = None) -> None:
    doc = __doc__ or ""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--model", type=Path, action="append", help="a GGUF (repeatable)")
    parser.add_argument("--count", type=int, default=200, help="held-out requests")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    args = parser.parse_args(argv)
    models: list[Path] = args.model or list(kept())

    async def run() -> None:
        for path in models:
            found = await score(path, args.count, args.seed)
            text = json.dumps(asdict(found) | {"share": found.share}) if args.json else None
            print(text or found.line(), flush=True)

    anyio.run(run, backend="trio")


if __name__ == "__main__":
    main()
