"""A home directory (the phone's or the node's): where it is, and why one cannot be written."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

from hearth.protocol.wire.errors import ErrorCode, HearthError


def resolve_home(option: Path | None, env_var: str, app_name: str, *, create: bool = False) -> Path:
    """`--home`, else `$env_var`, else the platform's per-user data directory. Only the
    commands that set a home up (`create`: init, join, a model download) make it; for the
    others a home that does not exist is `invalid_input` (a typo creates nothing)."""
    if option is not None:
        home = option
    elif os.environ.get(env_var):
        home = Path(os.environ[env_var])
    else:
        import platformdirs

        home = Path(platformdirs.user_data_dir(app_name))
    home = home.expanduser().resolve()
    if create:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
    elif not home.is_dir():
        raise HearthError(
            ErrorCode.INVALID_INPUT,
            f"no home at {home}: check --home (or ${env_var}), or run `{app_name} init` first",
        )
    return home


def storage_problem(exc: BaseException) -> HearthError | None:
    """A home that cannot be written (read-only, full, not ours, a file) as a clear error;
    None for anything else."""
    reasons = {
        errno.EROFS: "is on a read-only file system",
        errno.ENOSPC: "is on a full disk",
        errno.EDQUOT: "is over its disk quota",
        errno.EACCES: "is not writable by this user",
        errno.EEXIST: "is a file where a directory belongs",
        errno.ENOTDIR: "lies under a file, not a directory",
    }
    if isinstance(exc, OSError) and exc.errno in reasons:
        where = exc.filename or "the home directory"
        return HearthError(
            ErrorCode.INVALID_INPUT, f"cannot write {where}: it {reasons[exc.errno]}"
        )
    text = str(exc).lower()
    signs = ("readonly", "disk", "unable to open")
    if isinstance(exc, sqlite3.OperationalError) and any(s in text for s in signs):
        return HearthError(
            ErrorCode.INVALID_INPUT,
            f"the home's database cannot be written ({exc}): is the home read-only or full?",
        )
    return None
