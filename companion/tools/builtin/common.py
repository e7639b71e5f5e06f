"""What the built-in tools share: their annotations, argument types and small helpers."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import uuid
from typing import Annotated, Any

from pydantic import Field

from hearth.protocol.wire.errors import ErrorCode, HearthError

from ..registry import Annotations, ToolContext
from ..storage import PhoneData, write_atomic

READ = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)
WRITE = Annotations(read_only=False, destructive=False, idempotent=True, open_world=False)
CHANGE = Annotations(read_only=False, destructive=True, idempotent=True, open_world=False)
SEND = Annotations(read_only=False, destructive=False, idempotent=True, open_world=True)

Text = Annotated[str, Field(min_length=1, max_length=2000)]
Short = Annotated[str, Field(min_length=1, max_length=200)]
When = Annotated[str, Field(description="ISO 8601 date-time, e.g. 2026-12-24T18:00")]


def when(text: str, name: str) -> dt.datetime:
    """`text` as a date-time; `plan_rejected` naming the argument `name` otherwise."""
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise HearthError(ErrorCode.PLAN_REJECTED, f"{name}: not an ISO 8601 date-time") from exc


def key_id(ctx: ToolContext, chars: int) -> str:
    """The id of what a write makes: derived from its step's idempotency key."""
    return uuid.uuid5(uuid.NAMESPACE_URL, ctx.idempotency_key).hex[:chars]


def load_list(data: PhoneData, name: str) -> list[dict[str, Any]]:
    """The JSON list in the file `name` of the phone's data (empty if there is none)."""
    path = data.path(name)
    items: list[dict[str, Any]] = json.loads(path.read_text()) if path.exists() else []
    return items


def append_once(data: PhoneData, name: str, item: dict[str, Any]) -> dict[str, Any]:
    """Append `item` to the list in `name`, unless one with its `id` is there already (a
    rerun of the step that wrote it: its id comes from the step's key); the item kept."""
    items = load_list(data, name)
    done = next((kept for kept in items if kept.get("id") == item["id"]), None)
    if done is not None:
        return done
    write_atomic(data.path(name), json.dumps([*items, item], indent=1))
    return item


def termux(*cmd: str) -> str | None:
    """Output of a Termux API command, or None where Termux is not here."""
    if shutil.which(cmd[0]) is None:
        return None
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
