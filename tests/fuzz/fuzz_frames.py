"""Coverage-guided fuzzing of the frame decoder (atheris): any bytes, fed in any
chunks, give messages or typed `FrameError` events, never an exception.

    python tests/fuzz/fuzz_frames.py -atheris_runs=1000000   # a longer run
"""

import sys

import atheris

from hearth.protocol.wire.frames import FrameDecoder


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    decoder = FrameDecoder(max_frame=fdp.ConsumeIntInRange(1, 4096))
    while fdp.remaining_bytes():
        decoder.feed(fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 512)))
    decoder.feed_eof()


if __name__ == "__main__":
    atheris.instrument_all()  # the editable install hides imports from instrument_imports
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
