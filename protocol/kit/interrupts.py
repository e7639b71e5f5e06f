"""Ctrl-C while a command line is still loading: noted, reported once it can be.

This module imports nothing but `signal`, so a command line can call `hold()` as its
very first statement; `console.run_cli` then turns a held Ctrl-C into the contract's
exit 130 (no traceback from a half-loaded program).
"""

from __future__ import annotations

import signal

_held: list[int] = []


def hold() -> None:
    """Note a Ctrl-C instead of raising, until `held()` is asked."""
    signal.signal(signal.SIGINT, lambda signum, _frame: _held.append(signum))


def held() -> bool:
    """Whether a Ctrl-C came while interrupts were held."""
    return bool(_held)
