"""Settings files: TOML read, then validated into a model with errors that name the line."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hearth.protocol.wire.errors import ErrorCode, HearthError

if TYPE_CHECKING:  # pydantic loads when settings are validated, not before
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")


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
    from pydantic import ValidationError

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
