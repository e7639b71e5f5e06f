"""The hostile bench as a pytest fixture (`tests/conftest.py` registers this module).

`hostile_bench` is a phone home paired with the hostile home (`harness.start_bench`), one
for each test module that asks for it and kept for the module's tests: a module's runs
never share a hostile home with another module's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from ..conftest import Processes

if TYPE_CHECKING:  # the harness loads with the first module that asks for a bench
    from .harness import Bench


@pytest.fixture(scope="module")
def hostile_bench(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Bench]:
    """The module's phone home and the hostile home serving it (stopped, by PID, after the
    module's last test)."""
    from .harness import start_bench

    processes = Processes()
    module = request.module.__name__.rpartition(".")[2]
    try:
        yield start_bench(processes, tmp_path_factory.mktemp(f"hostile-{module}"))
    finally:
        processes.cleanup()
