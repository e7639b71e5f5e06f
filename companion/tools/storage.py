"""Where the built-in tools keep the phone's data (under the companion's home)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hearth.protocol.wire.errors import ErrorCode, HearthError


@dataclass(frozen=True)
class PhoneData:
    """Paths of the phone's data; `sandbox` is the only folder the file tools touch."""

    root: Path

    @property
    def sandbox(self) -> Path:
        return self.root / "files"

    def path(self, name: str) -> Path:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        return self.root / name

    def done(self, key: str) -> Any | None:
        """The recorded result of the write with idempotency key `key`, if it ran."""
        path = self._done_path(key)
        return json.loads(path.read_text()) if path.exists() else None

    def record(self, key: str, result: Any) -> Any:
        """Remember `result` under `key` (atomically), so a rerun returns it."""
        write_atomic(self._done_path(key), json.dumps(result))
        return result

    def _done_path(self, key: str) -> Path:
        folder = self.path("done")
        folder.mkdir(exist_ok=True)
        return folder / hashlib.sha256(key.encode()).hexdigest()[:32]

    def inside_sandbox(self, relative: str) -> Path:
        """`relative` resolved inside the sandbox; a path outside it is refused."""
        base = self.sandbox.resolve()
        base.mkdir(parents=True, exist_ok=True)
        target = (base / relative).resolve()
        if target != base and base not in target.parents:
            raise HearthError(ErrorCode.PLAN_REJECTED, f"path {relative!r} is outside the sandbox")
        return target


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
