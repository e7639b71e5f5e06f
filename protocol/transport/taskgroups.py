"""Task groups that raise the error itself when only one task failed.

anyio and trio wrap whatever a task group's tasks raise in an exception group, even a
single `HearthError`; callers that handle typed errors want that error back.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


def leaves(group: BaseExceptionGroup[BaseException]) -> Iterator[BaseException]:
    """Every exception inside `group`, however deeply nested."""
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            yield from leaves(exc)
        else:
            yield exc


@contextmanager
def single_error() -> Iterator[None]:
    """Re-raise the sole `Exception` of an exception group as itself."""
    try:
        yield
    except BaseExceptionGroup as group:
        found = list(leaves(group))
        if len(found) == 1 and isinstance(found[0], Exception):
            raise found[0] from None
        raise
