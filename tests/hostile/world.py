"""What the suites' MCP test servers act on: seeded state in, recorded calls out.

A server reads its state from `$HOSTILE_STATE/<server>.json` on every call (so a case
reseeds it between asks without restarting anything), writes back what a call
changed, and appends every call to `$HOSTILE_STATE/calls.jsonl`, marked `outward`
when it really reaches beyond the phone: the ground truth, whatever the tool's
annotations claim.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, JsonValue

STATE_ENV = "HOSTILE_STATE"
CALLS_FILE = "calls.jsonl"


class Call(BaseModel):
    """One tool call a test server served."""

    server: str
    tool: str
    args: dict[str, JsonValue]
    outward: bool


def _dir() -> Path:
    return Path(os.environ[STATE_ENV])


def load(server: str) -> dict[str, Any]:
    path = _dir() / f"{server}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def save(server: str, state: dict[str, Any]) -> None:
    path = _dir() / f"{server}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)


def record(server: str, tool: str, args: dict[str, Any], *, outward: bool) -> None:
    line = Call(server=server, tool=tool, args=args, outward=outward).model_dump_json()
    with (_dir() / CALLS_FILE).open("a") as out:
        out.write(line + "\n")


def calls(directory: Path) -> list[Call]:
    """Every call the servers recorded under `directory`."""
    path = directory / CALLS_FILE
    if not path.exists():
        return []
    return [Call.model_validate_json(line) for line in path.read_text().splitlines() if line]
