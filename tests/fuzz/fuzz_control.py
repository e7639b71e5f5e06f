"""Coverage-guided fuzzing of the control socket's request parser (atheris): any line
a local client sends, raw bytes or JSON of any shape, ends in a typed request or an
`invalid_input` error, never another exception.

    python tests/fuzz/fuzz_control.py -atheris_runs=1000000   # a longer run
"""

import json
import sys

import atheris

from hearth.node.control import parse_request
from hearth.protocol.wire.errors import ErrorCode, HearthError

OPS = ["status", "grant", "deny", "revoke", "invite", "", "STATUS", None]
FIELDS = ["op", "peer", "role", "grant", "ttl", "extra"]


def value(fdp: atheris.FuzzedDataProvider, depth: int = 0) -> object:
    """A JSON value of any type (nested a little)."""
    kind = fdp.ConsumeIntInRange(0, 7 if depth < 2 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return fdp.ConsumeBool()
    if kind == 2:
        return fdp.ConsumeInt(8)
    if kind == 3:
        return fdp.ConsumeRegularFloat()
    if kind == 4:
        return fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 64))
    if kind == 5:
        return fdp.PickValueInList(OPS)
    if kind == 6:
        return [value(fdp, depth + 1) for _ in range(fdp.ConsumeIntInRange(0, 3))]
    return {
        fdp.PickValueInList(FIELDS): value(fdp, depth + 1)
        for _ in range(fdp.ConsumeIntInRange(0, 4))
    }


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    if fdp.ConsumeBool():
        line = fdp.ConsumeBytes(fdp.remaining_bytes())
    else:
        request = {"op": fdp.PickValueInList(OPS)}
        request.update(
            (fdp.PickValueInList(FIELDS), value(fdp)) for _ in range(fdp.ConsumeIntInRange(0, 4))
        )
        line = json.dumps(request).encode()
    try:
        parse_request(line)
    except HearthError as exc:
        if exc.code is not ErrorCode.INVALID_INPUT:
            raise


if __name__ == "__main__":
    atheris.instrument_all()  # the editable install hides imports from instrument_imports
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
