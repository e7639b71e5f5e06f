"""The phone's home directory: identity and settings (`config.toml`).

Everything under a home is the owner's only: files 0600, folders 0700, whatever the
umask and whoever made the folder before `hearth init`.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from hearth.protocol.transport.keys import create_identity, write_secret
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of

CONFIG_FILE = "config.toml"


def secure_home(home: Path) -> None:
    """Make `home` and everything in it the owner's only (symbolic links are left alone:
    their targets are not the home's)."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    home.chmod(0o700)
    for folder, dirs, files in os.walk(home):
        for name in dirs + files:
            path = Path(folder, name)
            mode = path.lstat().st_mode
            if stat.S_ISDIR(mode):
                wanted = 0o700
            elif stat.S_ISREG(mode):
                wanted = 0o600
            else:
                continue
            if stat.S_IMODE(mode) != wanted:
                path.chmod(wanted)


def init_phone(home: Path, model: Path | None) -> str:
    """Create the phone's identity and config; returns its peer id."""
    if model is not None and not model.is_file():
        raise HearthError(ErrorCode.INVALID_INPUT, f"no model file at {model}")
    secure_home(home)
    key = create_identity(home)
    model_path = str(model.resolve()) if model else ""
    write_secret(home / CONFIG_FILE, f"model = {json.dumps(model_path)}\n".encode())
    return peer_id_of(key)
