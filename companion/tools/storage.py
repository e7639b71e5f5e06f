"""Where the built-in tools keep the phone's data (under the companion's home).

Every file is written 0600 and every folder made 0700, whatever the umask."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hearth.protocol.wire.errors import ErrorCode, HearthError

from ..faults import pause_after_write


@dataclass(frozen=True)
class PhoneData:
    """Paths of the phone's data; `sandbox` is the only folder the file tools touch."""

    root: Path

    @property
    def sandbox(self) -> Path:
        return self.root / "files"

    def path(self, name: str) -> Path:
        private_dir(self.root)
        return self.root / name

    def done(self, key: str) -> dict[str, Any] | None:
        """The recorded result of the write with idempotency key `key`, if it ran."""
        path = self._done_path(key)
        if not path.exists():
            return None
        result: dict[str, Any] = json.loads(path.read_text())  # written by `record`
        return result

    def record(self, key: str, result: dict[str, Any]) -> dict[str, Any]:
        """Remember `result` under `key` (atomically), so a rerun returns it."""
        write_atomic(self._done_path(key), json.dumps(result))
        return result

    def intend(self, key: str, result: dict[str, Any]) -> None:
        """Remember, before acting, what the write with key `key` is about to do: a rerun
        that finds the effect in place knows this write made it."""
        write_atomic(self._done_path(key, ".intent"), json.dumps(result))

    def intended(self, key: str) -> dict[str, Any] | None:
        """What `intend` remembered for `key`, if anything."""
        path = self._done_path(key, ".intent")
        if not path.exists():
            return None
        result: dict[str, Any] = json.loads(path.read_text())
        return result

    def _done_path(self, key: str, suffix: str = "") -> Path:
        name = hashlib.sha256(key.encode()).hexdigest()[:32] + suffix
        return private_dir(self.path("done")) / name

    def inside_sandbox(self, relative: str) -> Path:
        """`relative` resolved inside the sandbox; a path outside it is refused."""
        base = private_dir(self.sandbox).resolve()
        target = (base / relative).resolve()
        if target != base and base not in target.parents:
            raise HearthError(ErrorCode.PLAN_REJECTED, "path: outside the sandbox")
        return target


def private_dir(path: Path) -> Path:
    """`path` and its missing parents made as folders only the owner can open (0700)."""
    for folder in reversed([path, *path.parents]):
        if not folder.exists():
            folder.mkdir(mode=0o700, exist_ok=True)
            folder.chmod(0o700)
    return path


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text` atomically, readable by the owner only (0600)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # an older temporary file may have had another mode
        f.write(text)
    os.replace(tmp, path)
    pause_after_write(path)  # tests only: see faults.py
