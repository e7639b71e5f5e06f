"""Real model download (BotPsy GGUFs) through huggingface_hub, with a rich progress bar."""

from __future__ import annotations

import socket
import warnings
from pathlib import Path
from urllib.parse import urlparse

from hearth.protocol.wire.errors import ErrorCode, HearthError

MODELS = {"botpsy-0.8b": "qvac/BotPsy-0.8B-GGUFs"}
QUANTS = ("q4_k_m", "q8_0", "bf16")


def pick_file(files: list[str], quant: str) -> str:
    """The GGUF in `files` for `quant` (case-insensitive match on the file name)."""
    matches = sorted(f for f in files if f.lower().endswith(".gguf") and quant in f.lower())
    if not matches:
        raise HearthError(ErrorCode.INVALID_INPUT, f"no {quant} GGUF in the repository")
    return matches[0]


def pull(name: str, quant: str, directory: Path) -> Path:
    """Download model `name` at `quant` into `directory`; `unreachable` when offline."""
    if name not in MODELS:
        raise HearthError(
            ErrorCode.INVALID_INPUT, f"unknown model {name!r}; known: {', '.join(MODELS)}"
        )
    if quant not in QUANTS:
        raise HearthError(ErrorCode.INVALID_INPUT, f"quant must be one of {', '.join(QUANTS)}")
    from huggingface_hub import HfApi, constants, hf_hub_download
    from tqdm import TqdmExperimentalWarning
    from tqdm.rich import tqdm as rich_tqdm

    repo = MODELS[name]
    host = urlparse(constants.ENDPOINT).hostname or ""
    try:
        socket.getaddrinfo(host, 443)  # the hub client retries DNS failures for ~25 s
    except OSError as exc:
        raise HearthError(
            ErrorCode.UNREACHABLE,
            f"cannot resolve {host}: offline? Copy a GGUF by hand and pass it with --model",
        ) from exc
    try:
        filename = pick_file(HfApi().list_repo_files(repo), quant)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TqdmExperimentalWarning)
            path = hf_hub_download(repo, filename, local_dir=directory, tqdm_class=rich_tqdm)
    except HearthError:
        raise
    except Exception as exc:  # requests/httpx errors, offline mode, DNS failures
        raise HearthError(
            ErrorCode.UNREACHABLE,
            f"cannot download {repo} from the Hugging Face Hub ({type(exc).__name__}): "
            "check the network, or copy a GGUF by hand and pass its path with --model",
        ) from exc
    return Path(str(path))
