"""BFCL v4's AST categories as test data (tests/data/bfcl/, see its README).

for case in load("multiple"):
    case.messages, case.functions, case.calls, case.tools()
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

DATA = Path(__file__).parent / "data" / "bfcl"
CATEGORIES = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
)
MULTI_FUNCTION = ("multiple", "parallel_multiple", "live_multiple", "live_parallel_multiple")


class Function(BaseModel):
    """A tool as JSON Schema: name, description, parameters."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]


class Call(BaseModel):
    """One ground-truth call, with one acceptable value per argument."""

    model_config = ConfigDict(frozen=True)

    name: str
    arguments: dict[str, Any]


class Case(BaseModel):
    """One BFCL case: the request, the functions offered, the expected calls."""

    model_config = ConfigDict(frozen=True)

    id: str
    category: str
    messages: list[dict[str, str]]
    functions: list[Function]
    calls: list[Call]

    @property
    def request(self) -> str:
        """The user's text (the last user message)."""
        return next(m["content"] for m in reversed(self.messages) if m["role"] == "user")

    def tools(self) -> list[dict[str, Any]]:
        """The functions in OpenAI tool format."""
        return [{"type": "function", "function": f.model_dump()} for f in self.functions]


class Exclusion(BaseModel):
    """A case left out because its ground truth disagrees with its own schema."""

    id: str
    reason: str


def load(category: str) -> list[Case]:
    """The kept cases of one category, in BFCL's order."""
    with gzip.open(DATA / f"{category}.jsonl.gz", "rt", encoding="utf-8") as lines:
        return [Case.model_validate({**json.loads(line), "category": category}) for line in lines]


def excluded() -> list[Exclusion]:
    return [Exclusion.model_validate(e) for e in json.loads((DATA / "excluded.json").read_text())]
