"""The micro-planner's shape, vocabulary and GGUF file: llama.cpp's `llama` architecture
(RMSNorm, rotary positions on adjacent pairs, SwiGLU, tied embeddings) with the tiny
models' byte-level BPE tokenizer, its merges learned from the synthetic requests.

`Weights` holds the tensors as llama.cpp stores them (numpy, shape (out, in)); the
training code (`train`) computes exactly the forward pass llama.cpp runs on them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from ..tiny import SPECIAL_TOKENS, learn_merges, vocabulary_of

ARCH = "llama"
NAME = "hearth-micro-planner"
# the GPT-2 / Qwen split before BPE: words with their leading space, each digit alone
_PIECES = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d| ?[^\s\w]+|\s+(?!\S)|\s+")
_SPECIAL = re.compile("|".join(re.escape(text) for text, _ in SPECIAL_TOKENS))


@dataclass(frozen=True)
class Shape:
    """The model's size (row sizes are multiples of 256, as K-quants need)."""

    n_embd: int = 256
    n_layer: int = 4
    n_head: int = 4
    n_ff: int = 512
    n_ctx: int = 4096
    n_merges: int = 448
    rope_base: float = 10_000.0
    rms_eps: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


@dataclass(frozen=True)
class Vocabulary:
    """Tokens (GPT-2 byte characters), their types and the BPE merges."""

    tokens: list[str]
    types: list[int]
    merges: list[str]


def template() -> str:
    """The micro-planner's own chat template."""
    return resources.files(__package__).joinpath("template.jinja").read_text()


def words(corpus: Iterable[str]) -> Iterator[str]:
    """The pieces BPE merges within, special tokens taken out."""
    for text in corpus:
        for plain in _SPECIAL.split(text):
            yield from _PIECES.findall(plain)


def vocabulary(corpus: Iterable[str], shape: Shape) -> Vocabulary:
    """Bytes, the merges most useful for `corpus`, the special tokens, padding."""
    return Vocabulary(*vocabulary_of(learn_merges(list(words(corpus)), shape.n_merges)))


Weights = dict[str, np.ndarray]


def init(shape: Shape, n_vocab: int, seed: int) -> Weights:
    """Fresh weights under llama.cpp's tensor names."""
    rng = np.random.default_rng(seed)
    e, f = shape.n_embd, shape.n_ff

    def normal(rows: int, cols: int, scale: float) -> np.ndarray:
        return rng.normal(0.0, scale, size=(rows, cols)).astype(np.float32)

    out: Weights = {"token_embd.weight": normal(n_vocab, e, 0.02)}
    out["output_norm.weight"] = np.ones(e, np.float32)
    deep = 0.02 / np.sqrt(2 * shape.n_layer)  # residual branches start small
    for i in range(shape.n_layer):
        p = f"blk.{i}."
        out[p + "attn_norm.weight"] = np.ones(e, np.float32)
        out[p + "ffn_norm.weight"] = np.ones(e, np.float32)
        for name in ("attn_q", "attn_k", "attn_v"):
            out[p + name + ".weight"] = normal(e, e, 0.02)
        out[p + "attn_output.weight"] = normal(e, e, deep)
        out[p + "ffn_gate.weight"] = normal(f, e, 0.02)
        out[p + "ffn_up.weight"] = normal(f, e, 0.02)
        out[p + "ffn_down.weight"] = normal(e, f, deep)
    return out


def read_gguf(path: Path) -> tuple[Vocabulary, Weights]:
    """The vocabulary and the weights (F32) of a GGUF `write_gguf` wrote."""
    import gguf

    reader = gguf.GGUFReader(str(path))

    def strings(key: str) -> list[str]:
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode() for i in field.data]

    types = [int(field) for field in reader.fields["tokenizer.ggml.token_type"].contents()]
    vocab = Vocabulary(strings("tokenizer.ggml.tokens"), types, strings("tokenizer.ggml.merges"))
    weights: Weights = {}
    for tensor in reader.tensors:
        data = np.array(tensor.data)
        if tensor.tensor_type == gguf.GGMLQuantizationType.BF16:
            data = gguf.quants.dequantize(data, tensor.tensor_type)
        shape = [int(n) for n in reversed(tensor.shape)]
        weights[tensor.name] = data.reshape(shape).astype(np.float32)
    return vocab, weights


def write_gguf(path: Path, shape: Shape, vocab: Vocabulary, weights: Weights) -> Path:
    """The model as a BF16 GGUF (norms in F32), with its template and greedy sampling."""
    import gguf

    tmp = path.with_name(f".{path.name}.tmp")
    w = gguf.GGUFWriter(str(tmp), ARCH)
    w.add_name(NAME)
    w.add_context_length(shape.n_ctx)
    w.add_embedding_length(shape.n_embd)
    w.add_block_count(shape.n_layer)
    w.add_feed_forward_length(shape.n_ff)
    w.add_head_count(shape.n_head)
    w.add_head_count_kv(shape.n_head)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_rope_freq_base(shape.rope_base)
    w.add_layer_norm_rms_eps(shape.rms_eps)
    w.add_vocab_size(len(vocab.tokens))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    w.add_float32("general.sampling.temp", 0.0)  # greedy: the same plan on any seed
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(vocab.tokens)
    w.add_token_types(vocab.types)
    w.add_token_merges(vocab.merges)
    w.add_eos_token_id(vocab.tokens.index("<|im_end|>"))
    w.add_pad_token_id(vocab.tokens.index("<|endoftext|>"))
    w.add_bos_token_id(vocab.tokens.index("<|endoftext|>"))
    w.add_add_bos_token(False)
    w.add_chat_template(template())
    for name, value in weights.items():
        data = np.ascontiguousarray(value, dtype=np.float32)
        if data.ndim == 1:
            w.add_tensor(name, data)
        else:
            bf16 = gguf.quants.quantize(data, gguf.GGMLQuantizationType.BF16)
            w.add_tensor(name, bf16, raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)
    return path
