"""What both command lines share: homes, `--json` output and the error-to-exit mapping."""

from __future__ import annotations

import errno
import json
import logging
import os
import secrets
import sqlite3
import sys
import tomllib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError

M = TypeVar("M", bound=BaseModel)


def resolve_home(option: Path | None, env_var: str, app_name: str) -> Path:
    """`--home`, else `$env_var`, else the platform's per-user data directory."""
    if option is not None:
        home = option
    elif os.environ.get(env_var):
        home = Path(os.environ[env_var])
    else:
        import platformdirs

        home = Path(platformdirs.user_data_dir(app_name))
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    return home


def read_toml(path: Path) -> dict[str, Any]:
    """A settings file as a dict (empty when there is none); `invalid_input` if unparsable."""
    if not path.exists():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:  # its message names the line and column
        raise HearthError(ErrorCode.INVALID_INPUT, f"{path}: {exc}") from exc


def validated(model: type[M], data: dict[str, Any], path: Path) -> M:
    """`model` from settings read from `path`; `invalid_input` naming the key and its line."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        lines = path.read_text().splitlines() if path.exists() else []
        line = next(
            (
                i
                for i, text in enumerate(lines, 1)
                if err["loc"] and text.strip().startswith(str(err["loc"][0]))
            ),
            None,
        )
        where = f"line {line}: " if line else ""
        raise HearthError(ErrorCode.INVALID_INPUT, f"{path}: {where}{key}: {err['msg']}") from exc


def emit(as_json: bool, payload: dict[str, Any], render: Callable[[], None]) -> None:
    """Print exactly one JSON object with `--json`, else the human rendering."""
    if as_json:
        sys.stdout.write(json.dumps(payload) + "\n")
    else:
        render()


@contextmanager
def reporting(as_json: bool) -> Iterator[None]:
    """Turn a `HearthError` into its JSON object or message, and its exit status."""
    try:
        with single_error():  # a task group's lone HearthError is reported as itself
            yield
    except HearthError as exc:
        _fail(as_json, exc)
    except KeyboardInterrupt:
        _fail(as_json, HearthError(ErrorCode.CANCELLED, "cancelled by the user"))
    except (OSError, sqlite3.OperationalError) as exc:
        if (problem := storage_problem(exc)) is None:
            _internal(as_json)
        else:
            _fail(as_json, problem)
    except Exception:
        _internal(as_json)


def storage_problem(exc: BaseException) -> HearthError | None:
    """A home that cannot be written (read-only, full, not ours) as a clear error;
    None for anything else."""
    reasons = {
        errno.EROFS: "is on a read-only file system",
        errno.ENOSPC: "is on a full disk",
        errno.EDQUOT: "is over its disk quota",
        errno.EACCES: "is not writable by this user",
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


def _internal(as_json: bool) -> None:
    trace = secrets.token_hex(4)
    logging.getLogger("hearth").exception("internal error (trace %s)", trace)
    _fail(as_json, HearthError(ErrorCode.INTERNAL, f"internal error (trace {trace})"))


def _fail(as_json: bool, exc: HearthError) -> None:
    if as_json:
        sys.stdout.write(json.dumps(exc.to_json()) + "\n")
    else:
        from rich.console import Console

        Console(stderr=True).print(f"[bold red]error[/] ({exc.code.value}): {exc.message}")
    raise SystemExit(exc.exit_status)
