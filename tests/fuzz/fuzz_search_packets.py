"""Coverage-guided fuzzing of the search packet parsers (atheris): any bytes given to
a hop, or to a sender as a reply, end in a result or a typed `Dropped`, never
another exception. A seed packet lets mutations reach past the size check.

    python tests/fuzz/fuzz_search_packets.py -atheris_runs=1000000   # a longer run
"""

import contextlib
import sys
import time

import atheris
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from hearth.search.packets import (
    PEER_ID_BYTES,
    REPLY_SIZE,
    REQUEST_SIZE,
    Dropped,
    Hop,
    build,
    open_reply,
    peel,
    raw_public,
)

KEY = X25519PrivateKey.generate()
PACKET, REPLY_KEYS = build("seed", [Hop(bytes(PEER_ID_BYTES), raw_public(KEY))], 2**40)


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    if fdp.ConsumeBool():  # the right size, a real packet's tail after mutated bytes
        head = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, REQUEST_SIZE))
        packet = head + PACKET[len(head) :]
    else:
        packet = fdp.ConsumeBytes(REQUEST_SIZE + 8)
    with contextlib.suppress(Dropped):
        peeled, _ = peel(packet, [KEY], time.time())
        peeled.query()
    with contextlib.suppress(Dropped):
        open_reply(REPLY_KEYS, fdp.ConsumeBytes(REPLY_SIZE).ljust(REPLY_SIZE, b"\0"))


if __name__ == "__main__":
    atheris.instrument_all()  # the editable install hides imports from instrument_imports
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
