"""Would decoding sessions together pay? One `llama_decode` over several sequences,
against each sequence decoded alone, on the tiny GGUFs the bench uses.

    .venv/bin/python bench/batch_decode.py [--steps 150] [--repeats 7]

For each GGUF (bf16, Q4_K_M): whether a sequence's logits in a batch of 2 and 3
(one token per sequence per decode, greedy) are bit for bit its logits alone, and
the thread CPU of one decode step by sequences per decode (one thread, as the node
decodes on a 2-core machine). Thread CPU holds better than wall time on a busy
machine; the sides are run alternately and each figure is a median.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import llama_cpp as lib
import numpy as np

from hearth.protocol.model.loader import load_llama
from hearth.protocol.model.tiny import make_tiny

PROMPTS = (
    "<|im_start|>user\nWhat is the weather like in Berlin?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nSearch the web for the best pizza near the station.<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n",
)


class Contexts:
    """Fresh llama.cpp contexts over one loaded model, with room for `n_seq_max`
    sequences (a unified KV cache) and one decode thread."""

    def __init__(self, path: Path) -> None:
        self.llm = load_llama(path, n_ctx=512, n_threads=1)
        self.n_vocab = self.llm.n_vocab()
        self.batch = lib.llama_batch_init(512, 0, 8)

    def tokens(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode(), add_bos=False, special=True))

    def new(self, n_seq_max: int) -> Any:
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = 4096, 512, 512
        params.n_seq_max, params.kv_unified = n_seq_max, True
        params.n_threads = params.n_threads_batch = 1
        return lib.llama_init_from_model(self.llm.model, params)

    def decode(self, ctx: Any, items: list[tuple[int, int, int, bool]]) -> None:
        """One `llama_decode` of (token, position, sequence, logits wanted) items."""
        batch = self.batch
        batch.n_tokens = len(items)
        for i, (token, pos, seq, wanted) in enumerate(items):
            batch.token[i], batch.pos[i], batch.n_seq_id[i] = token, pos, 1
            batch.seq_id[i][0], batch.logits[i] = seq, wanted
        if lib.llama_decode(ctx, batch) != 0:
            raise RuntimeError("llama_decode failed")

    def logits(self, ctx: Any, row: int) -> np.ndarray:
        out = lib.llama_get_logits_ith(ctx, row)
        return np.ctypeslib.as_array(
            ctypes.cast(out, ctypes.POINTER(ctypes.c_float)), shape=(self.n_vocab,)
        ).copy()

    def greedy(self, prompts: list[list[int]], steps: int) -> list[list[np.ndarray]]:
        """Each prompt in its own sequence, then `steps` greedy tokens for all of them,
        one decode per step: every row of logits each sequence saw."""
        ctx = self.new(len(prompts))
        seen: list[list[np.ndarray]] = []
        for seq, prompt in enumerate(prompts):
            last = len(prompt) - 1
            self.decode(ctx, [(t, i, seq, i == last) for i, t in enumerate(prompt)])
            seen.append([self.logits(ctx, last)])
        for step in range(steps):
            tokens = [int(np.argmax(rows[-1])) for rows in seen]
            self.decode(
                ctx,
                [
                    (t, len(p) + step, seq, True)
                    for seq, (t, p) in enumerate(zip(tokens, prompts, strict=True))
                ],
            )
            for seq, rows in enumerate(seen):
                rows.append(self.logits(ctx, seq))
        lib.llama_free(ctx)
        return seen

    def step_cpu(self, sequences: int, prompt: list[int], steps: int) -> float:
        """Thread CPU of one decode step with `sequences` sequences in the batch (s)."""
        ctx = self.new(sequences)
        for seq in range(sequences):
            self.decode(ctx, [(t, i, seq, i == len(prompt) - 1) for i, t in enumerate(prompt)])
        start = time.thread_time()
        for step in range(steps):
            self.decode(ctx, [(5, len(prompt) + step, seq, True) for seq in range(sequences)])
        spent = time.thread_time() - start
        lib.llama_free(ctx)
        return spent / steps


def identical(contexts: Contexts, steps: int) -> None:
    prompts = [contexts.tokens(p) for p in PROMPTS]
    alone = [contexts.greedy([p], steps)[0] for p in prompts]
    for size in (2, 3):
        together = contexts.greedy(prompts[:size], steps)
        for seq in range(size):
            pairs = list(zip(alone[seq], together[seq], strict=True))
            same = all(np.array_equal(a, b) for a, b in pairs)
            tokens = all(np.argmax(a) == np.argmax(b) for a, b in pairs)
            diff = max(float(np.max(np.abs(a - b))) for a, b in pairs)
            print(
                f"  batch of {size}, sequence {seq}: logits bit for bit {same}"
                f" (largest difference {diff:.3g}), greedy tokens the same {tokens}"
            )


def costs(contexts: Contexts, steps: int, repeats: int) -> None:
    prompt = (contexts.tokens(" ".join(PROMPTS) * 8))[:250]
    spent: dict[int, list[float]] = {1: [], 2: [], 4: []}
    for _ in range(repeats):
        for sequences, runs in spent.items():
            runs.append(contexts.step_cpu(sequences, prompt, steps))
    for sequences, runs in spent.items():
        step = statistics.median(runs) * 1000
        print(
            f"  {sequences} sequence(s) a decode: {step:.3f} ms a step,"
            f" {step / sequences:.3f} ms a token"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for path in make_tiny(Path(tmp)):
            contexts = Contexts(path)
            print(path.name)
            identical(contexts, args.steps)
            costs(contexts, args.steps, args.repeats)


if __name__ == "__main__":
    main()
