"""The message tool: an SMS on Termux (`termux-sms-send`), a file in the outbox on a PC."""

from __future__ import annotations

import dataclasses
import json
import shutil
from typing import Any

from ..registry import Registry, Tier, ToolContext
from ..storage import PhoneData, private_dir, write_atomic
from .common import SEND, Short, Text, key_id, termux


def message_send(registry: Registry, data: PhoneData) -> None:
    outbox = data.path("outbox")
    sms = shutil.which("termux-sms-send") is not None  # a sent SMS cannot be checked
    send = dataclasses.replace(SEND, idempotent=not sms)

    @registry.tool(tier=Tier.IRREVERSIBLE, annotations=send, control=("to",))
    async def message_send(ctx: ToolContext, to: Short, body: Text) -> dict[str, Any]:
        """Send a text message (SMS on Termux; into the outbox on a PC)."""
        if (done := data.done(ctx.idempotency_key)) is not None:
            return done
        if sms:
            termux("termux-sms-send", "-n", to, body)
            return data.record(ctx.idempotency_key, {"sent": True, "to": to, "channel": "sms"})
        message = private_dir(outbox) / f"{key_id(ctx, 16)}.json"
        if not message.exists():  # else a rerun: this step put it there already
            write_atomic(message, json.dumps({"to": to, "body": body}))
        return {"sent": True, "to": to, "channel": "outbox"}
