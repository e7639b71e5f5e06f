"""Results of pure functions of tool schemas, kept by the schemas' digest: the same tools
come with every request, and checking them or building their grammar costs about a
millisecond each time (issue 34: before the first token, and CPU)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def digest(values: Any) -> bytes | None:
    """SHA-256 of `values` as JSON; None when they are not plain JSON values."""
    try:
        text = json.dumps(values)
    except (TypeError, ValueError, RecursionError):
        return None
    return hashlib.sha256(text.encode()).digest()


class ByDigest(Generic[T]):
    """What `compute` returned for the same values and settings, the last `size` kept
    (least recently used out); a call that raises keeps nothing. Thread-safe."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._kept: OrderedDict[tuple[bytes, Hashable], T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, values: Any, settings: Hashable, compute: Callable[[], T]) -> T:
        key = digest(values)
        if key is None:
            return compute()
        with self._lock:
            if (key, settings) in self._kept:
                self._kept.move_to_end((key, settings))
                return self._kept[(key, settings)]
        result = compute()
        with self._lock:
            self._kept[(key, settings)] = result
            while len(self._kept) > self.size:
                self._kept.popitem(last=False)
        return result

    def __contains__(self, key: tuple[Any, Hashable]) -> bool:
        """Whether the result for (values, settings) is kept."""
        values, settings = key
        with self._lock:
            return (digest(values), settings) in self._kept

    def __len__(self) -> int:
        return len(self._kept)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
