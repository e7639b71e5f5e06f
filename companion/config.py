"""The phone's home directory: identity and settings (`config.toml`)."""

from __future__ import annotations

import json
from pathlib import Path

from hearth.protocol.transport.keys import create_identity
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of

CONFIG_FILE = "config.toml"


def init_phone(home: Path, model: Path | None) -> str:
    """Create the phone's identity and config; returns its peer id."""
    if model is not None and not model.is_file():
        raise HearthError(ErrorCode.INVALID_INPUT, f"no model file at {model}")
    key = create_identity(home)
    model_path = str(model.resolve()) if model else ""
    (home / CONFIG_FILE).write_text(f"model = {json.dumps(model_path)}\n")
    return peer_id_of(key)
