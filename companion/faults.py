"""The one fault-injection point the crash tests use (tests/test_exactly_once.py, tests/chaos/).

`HEARTH_FAULT_PAUSE_AFTER=<folder>/<file glob>#<n>` makes the process stop, for good,
right after its n-th atomic write of a file matching the glob (`data/notes.json#2`: the
second note written): the window in which a kill must find an effect done and its
record not yet made. Unset (always, outside those tests) it costs one environment
lookup per write.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from fnmatch import fnmatch
from pathlib import Path

PAUSE_ENV = "HEARTH_FAULT_PAUSE_AFTER"
_writes: Counter[str] = Counter()


def pause_after_write(path: Path) -> None:
    """Stop here for good if the environment names this write (see the module docstring)."""
    wanted = os.environ.get(PAUSE_ENV)
    if not wanted:
        return
    pattern, _, nth = wanted.partition("#")
    if fnmatch(f"{path.parent.name}/{path.name}", pattern):
        _writes[pattern] += 1
        if _writes[pattern] == int(nth or 1):
            while True:  # the test kills the process here
                time.sleep(60)
