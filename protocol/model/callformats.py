"""The tool-call formats Hearth reads, and which one a model's own chat template teaches.

The grammar forces, and the parser reads, the format the model learned:

- `qwen-xml` (Qwen3.5): `<tool_call>\\n<function=NAME>\\n<parameter=KEY>\\nVALUE…`
  `</parameter>\\n</function>\\n</tool_call>`
- `hermes-json` (Qwen2.5, Qwen3, most small open models, and Hearth's default for a
  model without a template): `<tool_call>\\n{"name": NAME, "arguments": {…}}\\n</tool_call>`
- `llama3-json` (Llama 3.x): `{"name": NAME, "parameters": {…}}`, one call per turn

A template is judged by rendering one probe conversation with one tool through it
(sandboxed, as every render): a template that never shows the tool to the model, or
shows it without one of these formats, teaches nothing Hearth can read, and the
model is refused when it is loaded (`UnsupportedModel`), never at the first request.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Literal

from hearth.protocol.wire.errors import ErrorCode, HearthError

FormatName = Literal["qwen-xml", "hermes-json", "llama3-json"]


@dataclass(frozen=True)
class CallFormat:
    """How a model writes a tool call: its opening text (the lazy grammar's trigger),
    its closing text ("" when the JSON object itself ends the call), whether the body
    is XML or JSON, the JSON key that holds the arguments, and how many calls a turn
    may hold (None: as many as the request allows)."""

    name: FormatName
    open: str
    close: str
    json_body: bool
    arguments_key: str = "arguments"
    max_calls: int | None = None


QWEN_XML = CallFormat("qwen-xml", "<tool_call>", "</tool_call>", json_body=False)
HERMES_JSON = CallFormat("hermes-json", "<tool_call>", "</tool_call>", json_body=True)
LLAMA3_JSON = CallFormat(
    "llama3-json", '{"name": "', "", json_body=True, arguments_key="parameters", max_calls=1
)
FORMATS: dict[str, CallFormat] = {f.name: f for f in (QWEN_XML, HERMES_JSON, LLAMA3_JSON)}

PROBE_TOOL = "hearth_probe_tool"


def default_template() -> str:
    """The template a GGUF without one gets: ChatML turns, Hermes-style JSON calls."""
    return resources.files(__package__).joinpath("default_template.jinja").read_text()


class UnsupportedModel(HearthError):
    """A model whose own template teaches no tool-call format Hearth reads."""

    def __init__(self, model: str, why: str) -> None:
        super().__init__(
            ErrorCode.MODEL_NOT_LOADED,
            f"model {model!r} cannot plan here: {why}. Serve it with a server that renders "
            "its own template and parses its calls (llama-server --jinja) and point the node "
            "at it with `hearth-node serve --upstream URL`, or use a model whose template "
            "writes Qwen3.5 XML, Hermes JSON or Llama 3.x JSON calls",
        )


def format_of(rendered_probe: str, source: str) -> CallFormat | None:
    """The call format a template teaches, judged from `rendered_probe` (the probe
    conversation as the template renders it) and the template's `source`; None when
    it teaches none Hearth reads."""
    if PROBE_TOOL not in rendered_probe:
        return None  # the model never sees the tools it is offered
    if "<function=" in source:
        return QWEN_XML
    if "<tool_call>" in source:
        return HERMES_JSON
    if "<|python_tag|>" in source or ("<|eot_id|>" in source and "parameters" in source):
        return LLAMA3_JSON
    return None
