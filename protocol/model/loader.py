"""Loading a GGUF with llama-cpp-python, with the settings Hearth needs.

`Llama()` builds its model parameters itself and exposes no switch for
llama.cpp's extra CPU buffer types (AMX, weight repacking). On AMX CPUs the AMX
matmul of this llama.cpp crashes (SIGSEGV in `ggml_backend_amx_mul_mat`) on
small quantized tensors such as the tiny test models', so loading can turn them
off; the defaults are swapped only for the duration of one load, under a lock.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hearth.protocol.wire.errors import ErrorCode, HearthError

_LOAD_LOCK = threading.Lock()
_llama_log: list[Any] = []  # the installed log callback, kept alive for llama.cpp


def _quiet_llama_log() -> None:
    """llama.cpp's own log goes to the `llama.cpp` logger at DEBUG, not the terminal:
    llama-cpp-python's callback reads this llama.cpp's levels wrongly and prints its
    warnings (`n_ctx_seq > n_ctx_train` on every load) even with `verbose=False`."""
    import ctypes

    import llama_cpp

    if _llama_log:
        return
    log = logging.getLogger("llama.cpp")

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]  # llama_cpp's ctypes callback type
    def to_logging(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        log.debug("%s", text.decode("utf-8", errors="replace").rstrip("\n"))

    _llama_log.append(to_logging)
    llama_cpp.llama_log_set(to_logging, ctypes.c_void_p(0))
    import llama_cpp._internals
    import llama_cpp.llama

    for module in (llama_cpp.llama, llama_cpp._internals):
        setattr(module, "suppress_stdout_stderr", _KeepStreams)  # noqa: B010


class _KeepStreams:
    """Stands in for llama-cpp-python's `suppress_stdout_stderr`, which points file
    descriptors 1 and 2 at /dev/null while a model loads (`verbose=False`). That is
    process-wide: a resident process loading its model in a worker thread lost whatever
    its other tasks printed meanwhile (an error report, its ready line). llama.cpp's log
    already goes to `logging` (above), so there is nothing left to silence."""

    def __init__(self, disable: bool = True) -> None:
        del disable

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def default_threads() -> int:
    """Leave a core free, so a busy model never starves the event loop's keepalive."""
    return max(1, (os.cpu_count() or 2) - 1)


@contextlib.contextmanager
def _model_defaults(**overrides: Any) -> Iterator[None]:
    import llama_cpp.llama_cpp as lib

    original = lib.llama_model_default_params

    def patched() -> Any:
        params = original()
        for name, value in overrides.items():
            setattr(params, name, value)
        return params

    with _LOAD_LOCK:
        lib.llama_model_default_params = patched
        try:
            yield
        finally:
            lib.llama_model_default_params = original


def load_llama(
    path: Path,
    *,
    n_ctx: int = 4096,
    n_threads: int | None = None,
    extra_buffers: bool = False,
    seed: int = 0,
    **kwargs: Any,
) -> Any:
    """A `llama_cpp.Llama` for `path`, memory-mapped, quiet, `n_threads = cores - 1`."""
    from llama_cpp import Llama

    _quiet_llama_log()

    if not path.is_file():
        raise HearthError(ErrorCode.INVALID_INPUT, f"no model file at {path}")
    with _model_defaults(use_extra_bufts=extra_buffers):
        return Llama(
            str(path),
            n_ctx=n_ctx,
            n_threads=n_threads or default_threads(),
            seed=seed,
            use_mmap=True,
            verbose=False,
            **kwargs,
        )
