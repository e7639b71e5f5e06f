"""Train the micro-planner and write its GGUF files (by hand, never in CI):

    python -m hearth.protocol.model.micro.train [--steps N] [--out DIR]

JAX on CPU (`pip install -e '.[train]'`). Every example is rendered by the product's own
chat-template path (`ChatTemplate` with the model's template, the phone's time as
`date_string`) and tokenised by llama.cpp's own tokenizer from the GGUF being made, so
the model learns exactly the token sequences it will read and write: the first round
(the prompt, then its calls or its answer in words) and, after calls, the second (the
tool results as the node renders them, then the answer in words). Only what the model
writes is scored. The forward pass is llama.cpp's `llama` graph: RMSNorm, rotary
positions on adjacent pairs (`LLAMA_ROPE_TYPE_NORM`), causal softmax attention,
SwiGLU, tied output embedding. Deterministic per seed: 1.3 s a step of 16 examples on
2 quiet cores. The kept files: 2,400 steps with the generator of commit cc57585 (its
values from closed lists), then `--more` that file `--steps 1500 --examples 30000
--seed 1 --peak 2e-3` with this one (65 + 30 minutes on 2 busy cores).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..chat import ChatTemplate, Message, phone_time, split_shared
from ..inert import Inert
from ..tiny import quantize_q4_k_m
from .requests import Call, Example, examples
from .weights import (
    NAME,
    Shape,
    Vocabulary,
    Weights,
    init,
    read_gguf,
    template,
    vocabulary,
    write_gguf,
)

BF16_FILE = "micro-planner-bf16.gguf"
Q4_FILE = "micro-planner-q4_k_m.gguf"
HERE = Path(__file__).parent
INERT = Inert()
# tensor names: shared ones, then each layer's
_LAYER = (
    "attn_norm", "attn_q", "attn_k", "attn_v", "attn_output",
    "ffn_norm", "ffn_gate", "ffn_up", "ffn_down",
)  # fmt: skip


def tool_json(name: str) -> dict[str, Any]:
    """A tool as the phone offers it (the template shows its name only)."""
    return {"type": "function", "function": {"name": name, "description": "", "parameters": {}}}


def call_text(call: Call) -> str:
    """A call as the grammar writes it (Qwen3.5 XML, parameters in schema order)."""
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in call.arguments.items())
    return f"<tool_call>\n<function={call.name}>\n{params}</function>\n</tool_call>"


@dataclass(frozen=True)
class Rendered:
    """An example as text: (text, written by the model?) pieces in order."""

    pieces: tuple[tuple[str, bool], ...]


def render(chat: ChatTemplate, ex: Example) -> Rendered:
    """`ex` through the product's template path: the first round, and the second after
    calls (a continuation of the first, as a plan session's model state is)."""
    now = phone_time(ex.now)
    tools = [tool_json(t) for t in ex.tools]
    first: list[Message] = [{"role": "user", "content": ex.request}]
    prompt = chat.render(first, tools, now=now)
    prefix, rest = split_shared(prompt, now)  # as the runtime cuts it
    if not ex.calls:
        return Rendered(((prefix, False), (rest, False), (ex.answer, True), ("<|im_end|>", True)))
    written = "\n".join(call_text(c) for c in ex.calls)
    history = [*first, {"role": "assistant", "content": written}]
    results: list[Message] = [
        {"role": "tool", "tool_call_id": f"s{i}", "content": INERT(json.dumps(r))}
        for i, r in enumerate(ex.results, 1)
    ]
    after = chat.continuation(history, results, tools, now=now)
    assert after is not None and after.startswith("<|im_end|>")
    return Rendered(
        (
            (prefix, False),
            (rest, False),
            (written, True),
            ("<|im_end|>", True),
            (after.removeprefix("<|im_end|>"), False),
            (ex.answer, True),
            ("<|im_end|>", True),
        )
    )


class Tokenizer:
    """llama.cpp's tokenizer of a GGUF (its vocabulary only)."""

    def __init__(self, path: Path) -> None:
        import llama_cpp

        self.llm = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)

    def __call__(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=True))


def encode(tok: Tokenizer, r: Rendered) -> tuple[np.ndarray, np.ndarray]:
    """(tokens, scored): scored[i] says token i is one the model writes."""
    ids: list[int] = []
    scored: list[bool] = []
    for text, written in r.pieces:
        piece = tok(text)
        ids += piece
        scored += [written] * len(piece)
    return np.array(ids, np.int32), np.array(scored, bool)


# --- the model (JAX) ------------------------------------------------------------------


def stacked(weights: Weights, shape: Shape) -> dict[str, Any]:
    """Weights as JAX arrays, each layer's tensors stacked for `lax.scan`."""
    import jax.numpy as jnp

    layers = {
        name: jnp.stack([weights[f"blk.{i}.{name}.weight"] for i in range(shape.n_layer)])
        for name in _LAYER
    }
    return {
        "embd": jnp.asarray(weights["token_embd.weight"]),
        "out_norm": jnp.asarray(weights["output_norm.weight"]),
        "layers": layers,
    }


def unstacked(params: dict[str, Any], shape: Shape) -> Weights:
    """JAX parameters back under llama.cpp's tensor names."""
    out: Weights = {
        "token_embd.weight": np.asarray(params["embd"], np.float32),
        "output_norm.weight": np.asarray(params["out_norm"], np.float32),
    }
    for name in _LAYER:
        for i in range(shape.n_layer):
            out[f"blk.{i}.{name}.weight"] = np.asarray(params["layers"][name][i], np.float32)
    return out


def logits_fn(shape: Shape) -> Any:
    """`logits(params, tokens[B, T]) -> [B, T, vocab]`, llama.cpp's `llama` graph."""
    import jax
    import jax.numpy as jnp

    h, d = shape.n_head, shape.head_dim
    inv = shape.rope_base ** (-np.arange(0, d, 2, dtype=np.float32) / d)

    def rms(x: Any, weight: Any) -> Any:
        return x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + shape.rms_eps) * weight

    def rope(x: Any, cos: Any, sin: Any) -> Any:  # x: [B, T, H, D], adjacent pairs
        even, odd = x[..., 0::2], x[..., 1::2]
        return jnp.stack([even * cos - odd * sin, even * sin + odd * cos], -1).reshape(x.shape)

    def logits(params: dict[str, Any], tokens: Any) -> Any:
        b, t = tokens.shape
        angle = jnp.arange(t, dtype=jnp.float32)[:, None] * inv[None, :]
        cos, sin = jnp.cos(angle)[None, :, None, :], jnp.sin(angle)[None, :, None, :]
        causal = jnp.tril(jnp.ones((t, t), bool))
        x = params["embd"][tokens]

        def layer(x: Any, p: dict[str, Any]) -> tuple[Any, None]:
            a = rms(x, p["attn_norm"])
            q = rope((a @ p["attn_q"].T).reshape(b, t, h, d), cos, sin)
            k = rope((a @ p["attn_k"].T).reshape(b, t, h, d), cos, sin)
            v = (a @ p["attn_v"].T).reshape(b, t, h, d)
            s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(d)
            s = jnp.where(causal, s, -1e30)
            o = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v).reshape(b, t, h * d)
            x = x + o @ p["attn_output"].T
            f = rms(x, p["ffn_norm"])
            x = x + (jax.nn.silu(f @ p["ffn_gate"].T) * (f @ p["ffn_up"].T)) @ p["ffn_down"].T
            return x, None

        x, _ = jax.lax.scan(layer, x, params["layers"])
        return rms(x, params["out_norm"]) @ params["embd"].T

    return logits


# --- batches --------------------------------------------------------------------------

BUCKETS = (96, 128, 160, 192, 256, 320, 384, 512)


def batches(
    encoded: Sequence[tuple[np.ndarray, np.ndarray]], size: int, rng: random.Random
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Endless (inputs, targets, weights) batches of examples of like length, padded."""
    by_bucket: dict[int, list[int]] = {}
    for i, (ids, _) in enumerate(encoded):
        bucket = next((b for b in BUCKETS if len(ids) <= b), None)
        if bucket is not None:
            by_bucket.setdefault(bucket, []).append(i)
    order = [b for b, members in by_bucket.items() for _ in range(len(members) // size)]
    while True:
        rng.shuffle(order)
        for bucket in order:
            chosen = rng.sample(by_bucket[bucket], size)
            inputs = np.zeros((size, bucket), np.int32)
            targets = np.zeros((size, bucket), np.int32)
            weights = np.zeros((size, bucket), np.float32)
            for row, i in enumerate(chosen):
                ids, scored = encoded[i]
                n = len(ids) - 1
                inputs[row, :n], targets[row, :n] = ids[:-1], ids[1:]
                weights[row, :n] = scored[1:]
            yield inputs, targets, weights


def train(
    shape: Shape, vocab: Vocabulary, data: Sequence[tuple[np.ndarray, np.ndarray]],
    held: Sequence[tuple[np.ndarray, np.ndarray]], steps: int, seed: int, batch: int,
    start: Weights | None = None, peak: float = 3e-3,
) -> Weights:  # fmt: skip
    """AdamW with warm-up and cosine decay to a tenth of `peak`, from `start` (weights
    trained before) or fresh ones; the held-out share of examples whose every written
    token is the model's first choice is printed as it goes."""
    import jax
    import jax.numpy as jnp
    import optax

    logits = logits_fn(shape)
    params = stacked(start or init(shape, len(vocab.tokens), seed), shape)
    warmup = min(150, steps // 4)
    schedule = optax.warmup_cosine_decay_schedule(0.0, peak, warmup, steps, peak / 10)
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=0.01))
    state = opt.init(params)

    def loss(p: Any, x: Any, y: Any, w: Any) -> Any:
        lp = jax.nn.log_softmax(logits(p, x), -1)
        picked = jnp.take_along_axis(lp, y[..., None], -1)[..., 0]
        return -(picked * w).sum() / jnp.maximum(w.sum(), 1.0)

    def one_step(p: Any, s: Any, x: Any, y: Any, w: Any) -> tuple[Any, Any, Any]:
        value, grads = jax.value_and_grad(loss)(p, x, y, w)
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s, value

    def all_first_choice(p: Any, x: Any, y: Any, w: Any) -> Any:
        wrong = (jnp.argmax(logits(p, x), -1) != y) & (w > 0)
        return ~wrong.any(-1)

    step, exact = jax.jit(one_step), jax.jit(all_first_choice)  # compiled once per shape

    def held_share() -> float:
        hits = total = 0
        for x, y, w in _fixed(held, 16):
            hits += int(np.asarray(exact(params, x, y, w)).sum())
            total += int((w.sum(-1) > 0).sum())
        return hits / max(total, 1)

    rng = random.Random(seed)
    feed = batches(data, batch, rng)
    started = time.monotonic()
    for i in range(1, steps + 1):
        x, y, w = next(feed)
        params, state, value = step(params, state, x, y, w)
        if i % 50 == 0 or i == steps:
            line = f"step {i}/{steps} loss {float(value):.4f} {time.monotonic() - started:.0f} s"
            if i % 250 == 0 or i == steps:
                line += f" held-out exact {held_share():.1%}"
            print(line, flush=True)
    return unstacked(params, shape)


def _fixed(
    encoded: Sequence[tuple[np.ndarray, np.ndarray]], size: int
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """`encoded` once, in batches padded to the longest bucket they need."""
    for start in range(0, len(encoded), size):
        chunk = encoded[start : start + size]
        n = max(len(ids) for ids, _ in chunk)
        width = next((b for b in BUCKETS if n <= b), n)
        x = np.zeros((len(chunk), width), np.int32)
        y = np.zeros_like(x)
        w = np.zeros(x.shape, np.float32)
        for row, (ids, scored) in enumerate(chunk):
            x[row, : len(ids) - 1], y[row, : len(ids) - 1] = ids[:-1], ids[1:]
            w[row, : len(ids) - 1] = scored[1:]
        yield x, y, w


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2400)
    parser.add_argument("--examples", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--more", type=Path, help="train this GGUF on (its vocabulary kept)")
    parser.add_argument("--peak", type=float, default=3e-3, help="the peak learning rate")
    args = parser.parse_args(argv)
    shape = Shape()
    chat = ChatTemplate.for_model(template(), NAME)
    train_set = list(examples("train", args.examples, args.seed))
    held_set = list(examples("held-out", 400, 0))
    rendered = [render(chat, ex) for ex in train_set]
    args.out.mkdir(parents=True, exist_ok=True)
    bf16 = args.out / BF16_FILE
    start = None
    if args.more is not None:
        vocab, start = read_gguf(args.more)
    else:
        corpus = ["".join(text for text, _ in r.pieces) for r in rendered[:4000]]
        vocab = vocabulary(corpus, shape)
    write_gguf(bf16, shape, vocab, start or init(shape, len(vocab.tokens), args.seed))
    tok = Tokenizer(bf16)
    data = [encode(tok, r) for r in rendered]
    held = [encode(tok, render(chat, ex)) for ex in held_set]
    lengths = sorted(len(ids) for ids, _ in data)
    print(
        f"{len(vocab.tokens)} tokens, {len(data)} examples, length median "
        f"{lengths[len(lengths) // 2]} max {lengths[-1]}",
        flush=True,
    )
    weights = train(shape, vocab, data, held, args.steps, args.seed, args.batch, start, args.peak)
    write_gguf(bf16, shape, vocab, weights)
    quantize_q4_k_m(bf16, args.out / Q4_FILE)
    print(f"wrote {bf16} and {args.out / Q4_FILE}")


if __name__ == "__main__":
    main()
