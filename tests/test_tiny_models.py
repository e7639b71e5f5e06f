"""The tiny qwen35 models: real files, real llama.cpp, real tokenizer and template."""

from __future__ import annotations

import hashlib

import gguf

from hearth.protocol.model.loader import load_llama
from hearth.protocol.model.tiny import make_tiny, write_bf16


def test_both_tiny_models_load_and_generate(tiny_models) -> None:
    for path in tiny_models:
        llm = load_llama(path, n_ctx=512)
        out = llm.create_completion("Hello", max_tokens=8, temperature=0.0)
        assert out["usage"]["completion_tokens"] == 8


def test_tiny_models_are_qwen35_with_tool_tokens_and_template(tiny_models) -> None:
    bf16, q4 = tiny_models
    reader = gguf.GGUFReader(str(bf16))
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "qwen35"
    llm = load_llama(q4, n_ctx=512)
    for special in ("<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>"):
        assert len(llm.tokenize(special.encode(), add_bos=False, special=True)) == 1
    assert "<tool_call>" in llm.metadata["tokenizer.chat_template"]
    assert q4.stat().st_size < bf16.stat().st_size / 2


def test_chat_template_renders_tools_and_xml_tool_calls(tiny_models) -> None:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    llm = load_llama(tiny_models[1], n_ctx=512)
    formatter = Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"],
        eos_token="<|im_end|>",
        bos_token="<|endoftext|>",
    )
    tool = {"type": "function", "function": {"name": "notes_create", "parameters": {}}}
    messages = [
        {"role": "user", "content": "note milk"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"function": {"name": "notes_create", "arguments": {"text": "milk"}}}],
        },
        {"role": "tool", "content": "saved"},
    ]
    prompt = formatter(messages=messages, tools=[tool]).prompt
    assert '"name": "notes_create"' in prompt
    assert "<tool_call>\n<function=notes_create>\n<parameter=text>\nmilk\n</parameter>" in prompt
    assert "<tool_response>\nsaved\n</tool_response>" in prompt
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_same_seed_same_file(tmp_path) -> None:
    a, b = write_bf16(tmp_path / "a.gguf", seed=7), write_bf16(tmp_path / "b.gguf", seed=7)
    c = write_bf16(tmp_path / "c.gguf", seed=8)
    digest = [hashlib.sha256(p.read_bytes()).hexdigest() for p in (a, b, c)]
    assert digest[0] == digest[1] != digest[2]


def test_make_tiny_keeps_existing_files(tiny_models) -> None:
    before = [p.stat().st_mtime_ns for p in tiny_models]
    make_tiny(tiny_models[0].parent)
    assert [p.stat().st_mtime_ns for p in tiny_models] == before
