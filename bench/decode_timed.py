"""Run a Hearth command with every `llama_decode` call timed, for the bench.

    python bench/decode_timed.py DECODE_FILE /path/to/bin/hearth serve ...

The process CPU (`time.process_time`: every thread, llama.cpp's own included) spent
inside `llama_decode` is summed; on SIGUSR1 the total so far (seconds) is written to
DECODE_FILE. The bench reads the command's whole process CPU from outside (psutil) and
takes this from it: what is left is the CPU a request costs beyond the model's own
decode (issue 34). Measuring only: the call is the same one, timed.
"""

from __future__ import annotations

import runpy
import signal
import sys
import time
from pathlib import Path
from typing import Any

import llama_cpp
import llama_cpp.llama_cpp as low

decode_file = Path(sys.argv[1])
spent = [0.0]
real_decode = low.llama_decode


def timed_decode(ctx: Any, batch: Any) -> int:
    start = time.process_time()
    try:
        return real_decode(ctx, batch)
    finally:
        spent[0] += time.process_time() - start


def report(_signum: int, _frame: object) -> None:
    partial = decode_file.with_suffix(".partial")
    partial.write_text(repr(spent[0]))
    partial.replace(decode_file)  # whole or not at all


# the runtime calls `llama_cpp.llama_decode`, Llama.eval the one in `llama_cpp.llama_cpp`
llama_cpp.llama_decode = low.llama_decode = timed_decode
signal.signal(signal.SIGUSR1, report)
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
