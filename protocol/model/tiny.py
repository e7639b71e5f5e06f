"""Tiny random-weight models of the Qwen3.5 architecture (`qwen35`), for tests and the demo.

They carry a real byte-level BPE tokenizer (256 byte tokens, merges learned from a
small built-in corpus, ChatML / tool-call / thinking special tokens) and Hearth's
Qwen3.5-style chat template, so prompt rendering, tokenisation, grammar-constrained
decoding and tool-call parsing all run for real. Their weights are random: their
output is well-formed under a grammar but not sensible. Deterministic per seed.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

BF16_NAME = "tiny-bf16.gguf"
Q4_NAME = "tiny-q4_k_m.gguf"
LLAMA_FTYPE_MOSTLY_Q4_K_M = 15

SPECIAL_TOKENS = [
    ("<|endoftext|>", 3),  # CONTROL
    ("<|im_start|>", 3),
    ("<|im_end|>", 3),
    ("<tool_call>", 4),  # USER_DEFINED: they come out as text
    ("</tool_call>", 4),
    ("<think>", 4),
    ("</think>", 4),
    ("<tool_response>", 4),
    ("</tool_response>", 4),
]

# special-token strings stay out of the corpus, so no merge rebuilds one
_CORPUS = """
<function=calendar_create>\n<parameter=title>\nDentist\n</parameter>\n</function>
{"name": "send_message", "arguments": {"to": "Alice", "body": "See you at 6"}}
The meeting with the team is on Tuesday at ten. Remind me to call my mother tomorrow.
What is the weather like in Berlin? Search the web for the best pizza near the station.
Create a note with the shopping list: milk, eggs, bread, coffee and apples.
You have access to the following functions. If you choose to call a function ONLY reply
in the following format. The answer is that the event was moved to Friday afternoon.
"""


@dataclass(frozen=True)
class TinySpec:
    """Shape of a tiny `qwen35` model (row sizes are multiples of 256 for K-quants)."""

    n_embd: int = 256
    n_layer: int = 4
    full_attention_interval: int = 4  # layers 0-2 linear (gated delta net), 3 full
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_ff: int = 512
    n_ctx: int = 4096
    ssm_d_state: int = 64
    ssm_n_group: int = 2
    ssm_dt_rank: int = 8  # 8 rows: llama.cpp CPU repacking of quantized rows needs multiples of 8
    ssm_d_conv: int = 4
    n_merges: int = 320


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable character map."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = list(bs)
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def learn_merges(pieces: Iterable[str], count: int) -> list[tuple[str, str]]:
    """A small deterministic byte-level BPE: the `count` most useful merges within
    `pieces` (the words a pre-tokenizer cut)."""
    table = bytes_to_unicode()
    words = Counter(tuple(table[b] for b in word.encode()) for word in pieces if word)
    merges: list[tuple[str, str]] = []
    while len(merges) < count:
        pairs: Counter[tuple[str, str]] = Counter()
        for word, freq in words.items():
            for pair in itertools.pairwise(word):
                pairs[pair] += freq
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]
        merges.append(best)
        merged: Counter[tuple[str, ...]] = Counter()
        for word, freq in words.items():
            out: list[str] = []
            i = 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += freq
        words = merged
    return merges


def chat_template() -> str:
    """Hearth's Qwen3.5-style chat template (XML tool calls)."""
    return resources.files(__package__).joinpath("chat_template.jinja").read_text()


def _vocab(spec: TinySpec) -> tuple[list[str], list[int], list[str]]:
    return vocabulary_of(learn_merges(_CORPUS.replace("\n", " \n ").split(" "), spec.n_merges))


def vocabulary_of(merges: list[tuple[str, str]]) -> tuple[list[str], list[int], list[str]]:
    """(tokens, their types, merges as GGUF keeps them): the 256 bytes, what `merges`
    make, the special tokens, padding."""
    table = bytes_to_unicode()
    tokens = [table[b] for b in range(256)]
    seen = set(tokens) | {text for text, _ in SPECIAL_TOKENS}
    for a, b in merges:
        if a + b not in seen:
            tokens.append(a + b)
            seen.add(a + b)
    types = [1] * len(tokens)
    for text, kind in SPECIAL_TOKENS:
        tokens.append(text)
        types.append(kind)
    # pad to a multiple of 64 with unused control tokens (as real vocabularies are padded)
    while len(tokens) % 64:
        tokens.append(f"<|reserved_{len(tokens)}|>")
        types.append(3)
    return tokens, types, [f"{a} {b}" for a, b in merges]


def write_bf16(path: Path, spec: TinySpec = TinySpec(), seed: int = 0) -> Path:
    """Write the tiny BF16 model to `path`."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens, types, merges = _vocab(spec)
    n_vocab = len(tokens)
    tmp = path.with_name(f".{path.name}.tmp")
    w = gguf.GGUFWriter(str(tmp), "qwen35")
    w.add_name("hearth-tiny-qwen35")
    w.add_context_length(spec.n_ctx)
    w.add_embedding_length(spec.n_embd)
    w.add_block_count(spec.n_layer)
    w.add_feed_forward_length(spec.n_ff)
    w.add_head_count(spec.n_head)
    w.add_head_count_kv(spec.n_head_kv)
    w.add_key_length(spec.head_dim)
    w.add_value_length(spec.head_dim)
    w.add_rope_dimension_count(spec.head_dim // 4)  # partial rotary 0.25
    w.add_rope_dimension_sections([3, 3, 2, 0])
    w.add_rope_freq_base(10_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_ssm_conv_kernel(spec.ssm_d_conv)
    w.add_ssm_inner_size(spec.ssm_d_state * spec.ssm_dt_rank)
    w.add_ssm_state_size(spec.ssm_d_state)
    w.add_ssm_time_step_rank(spec.ssm_dt_rank)
    w.add_ssm_group_count(spec.ssm_n_group)
    w.add_full_attention_interval(spec.full_attention_interval)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen35")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(tokens.index("<|im_end|>"))
    w.add_pad_token_id(tokens.index("<|endoftext|>"))
    w.add_bos_token_id(tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(chat_template())

    def matrix(name: str, rows: int, cols: int) -> None:
        data = rng.normal(0.0, 0.02, size=(rows, cols)).astype(np.float32)
        bf16 = gguf.quants.quantize(data, gguf.GGMLQuantizationType.BF16)
        w.add_tensor(name, bf16, raw_dtype=gguf.GGMLQuantizationType.BF16)

    def vector(name: str, size: int, value: float | None = None) -> None:
        data = (
            np.full(size, value, dtype=np.float32)
            if value is not None
            else rng.normal(0.0, 0.1, size=size).astype(np.float32)
        )
        w.add_tensor(name, data)

    e = spec.n_embd
    matrix("token_embd.weight", n_vocab, e)
    vector("output_norm.weight", e, 1.0)
    key_dim = spec.ssm_d_state * spec.ssm_n_group
    value_dim = spec.ssm_d_state * spec.ssm_dt_rank
    for i in range(spec.n_layer):
        p = f"blk.{i}."
        vector(p + "attn_norm.weight", e, 1.0)
        vector(p + "post_attention_norm.weight", e, 1.0)
        if (i + 1) % spec.full_attention_interval == 0:
            matrix(p + "attn_q.weight", spec.head_dim * spec.n_head * 2, e)
            matrix(p + "attn_k.weight", spec.head_dim * spec.n_head_kv, e)
            matrix(p + "attn_v.weight", spec.head_dim * spec.n_head_kv, e)
            matrix(p + "attn_output.weight", e, spec.head_dim * spec.n_head)
            vector(p + "attn_q_norm.weight", spec.head_dim, 1.0)
            vector(p + "attn_k_norm.weight", spec.head_dim, 1.0)
        else:
            matrix(p + "attn_qkv.weight", key_dim * 2 + value_dim, e)
            matrix(p + "attn_gate.weight", value_dim, e)
            w.add_tensor(
                p + "ssm_conv1d.weight",
                rng.normal(0.0, 0.1, size=(key_dim * 2 + value_dim, spec.ssm_d_conv)).astype(
                    np.float32
                ),
            )
            vector(p + "ssm_dt.bias", spec.ssm_dt_rank)
            vector(p + "ssm_a", spec.ssm_dt_rank, -1.0)
            matrix(p + "ssm_beta.weight", spec.ssm_dt_rank, e)
            matrix(p + "ssm_alpha.weight", spec.ssm_dt_rank, e)
            vector(p + "ssm_norm.weight", spec.ssm_d_state, 1.0)
            matrix(p + "ssm_out.weight", e, value_dim)
        matrix(p + "ffn_gate.weight", spec.n_ff, e)
        matrix(p + "ffn_up.weight", spec.n_ff, e)
        matrix(p + "ffn_down.weight", e, spec.n_ff)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)
    return path


def quantize_q4_k_m(src: Path, dst: Path) -> Path:
    """Quantize with llama.cpp's own quantizer (through llama-cpp-python) to Q4_K_M."""
    import llama_cpp

    logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # no per-tensor chatter
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M
    params.nthread = max(1, (os.cpu_count() or 2) - 1)
    tmp = dst.with_name(f".{dst.name}.tmp")
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(tmp).encode(), ctypes.byref(params))
    if rc != 0:
        tmp.unlink(missing_ok=True)
        raise RuntimeError(f"llama.cpp quantizer failed with status {rc}")
    os.replace(tmp, dst)
    return dst


def make_tiny(directory: Path, seed: int = 0, *, force: bool = False) -> tuple[Path, Path]:
    """Write `tiny-bf16.gguf` and `tiny-q4_k_m.gguf` into `directory` (kept if present)."""
    directory.mkdir(parents=True, exist_ok=True)
    bf16, q4 = directory / BF16_NAME, directory / Q4_NAME
    if force or not bf16.exists():
        write_bf16(bf16, seed=seed)
    if force or not q4.exists():
        quantize_q4_k_m(bf16, q4)
    return bf16, q4
