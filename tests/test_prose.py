"""A streamed answer's prose (protocol/model/prose.py): tool calls dropped, however the
pieces split their tags, and light enough for a command's streaming view."""

from __future__ import annotations

import subprocess
import sys

from hearth.protocol.model.prose import TAGS, ProseOnly
from hearth.protocol.model.toolcalls import CALL_CLOSE, CALL_OPEN


def test_prose_drops_the_tags_the_parser_reads() -> None:
    assert (CALL_OPEN, CALL_CLOSE) == TAGS
    text = f"Sure.{CALL_OPEN}{{}}{CALL_CLOSE} Done."
    for size in range(1, len(text) + 1):
        prose = ProseOnly()
        shown = "".join(prose.feed(text[i : i + size]) for i in range(0, len(text), size))
        assert shown == "Sure. Done.", size


def test_prose_loads_neither_the_parser_nor_the_wire_messages() -> None:
    code = (
        "import sys\nimport hearth.protocol.model.prose\n"
        "print(sorted(m for m in sys.modules if m.endswith(('toolcalls', 'wire.messages'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr
