"""The access token file: made once (mode 0600), read by every start after."""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

MIN_TOKEN_CHARS = 32  # a shorter token file (empty, truncated) is refused, never trusted


def load_token(path: Path) -> str:
    """The access token kept in `path`: read it, or create it (mode 0600) on first use.

    Created through a private temporary file linked into place, so a reader never sees a
    half-written token and two starters agree on one. A token shorter than
    `MIN_TOKEN_CHARS` or a file others may read is refused rather than used.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(32) + "\n")
                out.flush()
                os.fsync(out.fileno())
            with contextlib.suppress(FileExistsError):  # another starter won: use its token
                os.link(temp, path)
        finally:
            temp.unlink(missing_ok=True)
    if path.stat().st_mode & 0o077:
        raise PermissionError(f"{path} may be read by others; make it mode 0600")
    token = path.read_text(encoding="utf-8").strip()
    if len(token) < MIN_TOKEN_CHARS:
        raise ValueError(f"{path} holds no usable token (delete it to make a new one)")
    return token
