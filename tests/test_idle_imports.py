"""What an idle process keeps in memory: modules only some configurations use load when
they are used (measured in bench/README.md, idle RSS)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(120)


def test_httpx_loads_only_with_the_upstream_backend_or_searxng(tmp_path) -> None:
    """httpx (with the rich/pygments/click its `__init__` pulls in) serves only the upstream
    model backend and the SearXNG search exit. (py-libp2p 0.8.1 still imports it itself, for
    AutoTLS: bench/README.md has what a lazy import there saves.)"""
    code = (
        "import sys\nimport hearth.node.backends.upstream, hearth.search.searxng\n"
        "print('httpx' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=100, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_the_thin_ask_client_loads_only_the_standard_library(tmp_path) -> None:
    """`hearth ask` served by a companion (companion/entry.py, thin.py, streaming.py) loads
    no event loop, no pydantic, no command-line framework and no rich before it draws on a
    terminal: its first token must come before a fresh Python's `import httpx` (issue 34)."""
    code = (
        "import sys\nimport hearth.companion.entry, hearth.companion.thin\n"
        "import hearth.companion.streaming\n"
        "heavy = {'trio', 'anyio', 'pydantic', 'typer', 'click', 'rich', 'libp2p', 'httpx'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=100, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
