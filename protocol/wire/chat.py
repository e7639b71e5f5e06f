"""The base of every wire value, and one conversation turn.

Apart from `messages` so that a caller needing only `ChatMessage` (the thin client,
for `AskRequest.history`) does not build every frame type of the protocols.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """Base of every wire value: immutable, unknown fields ignored."""

    model_config = ConfigDict(
        frozen=True, extra="ignore", ser_json_bytes="base64", val_json_bytes="base64"
    )


class ChatMessage(Model):
    """One turn of the (minimised) conversation."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    name: str | None = None
    tool_call_id: str | None = None
