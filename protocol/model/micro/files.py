"""Where the micro-planner's GGUF files are kept (beside this module, in the package)
and how a command hands them out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from hearth.protocol.wire.errors import ErrorCode, HearthError

HERE = Path(__file__).parent
BF16_FILE = "micro-planner-bf16.gguf"  # the node's
Q4_FILE = "micro-planner-q4_k_m.gguf"  # the phone's, quantised from it by llama.cpp
TOOLS_FILE = "tools.json"  # the tools a request for it offers: the phone's built-ins, web_search


def kept() -> tuple[Path, Path]:
    """The BF16 and Q4_K_M files in the package; `model_not_loaded` if one is missing
    (rebuild with `python -m hearth.protocol.model.micro.train`)."""
    bf16, q4 = HERE / BF16_FILE, HERE / Q4_FILE
    for path in (bf16, q4):
        if not path.is_file():
            raise HearthError(
                ErrorCode.MODEL_NOT_LOADED,
                f"the micro-planner's {path.name} is missing from {HERE}: rebuild it with "
                "`python -m hearth.protocol.model.micro.train`",
            )
    return bf16, q4


def copy_to(directory: Path) -> tuple[Path, Path]:
    """Both files copied into `directory` (a file already there with the same size is
    kept); their paths there."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for src in kept():
        dst = directory / src.name
        if not dst.is_file() or dst.stat().st_size != src.stat().st_size:
            tmp = dst.with_name(f".{dst.name}.tmp")
            shutil.copyfile(src, tmp)
            tmp.replace(dst)
        out.append(dst)
    return out[0], out[1]


def tool_specs() -> list[dict[str, Any]]:
    """The tools a request for the micro-planner offers, in OpenAI's function form."""
    specs: list[dict[str, Any]] = json.loads((HERE / TOOLS_FILE).read_text())
    return specs
