"""What both command lines share: homes, `--json` output and the error-to-exit mapping."""

from __future__ import annotations

import json
import logging
import os
import secrets
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import ErrorCode, HearthError


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
    except Exception:
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
