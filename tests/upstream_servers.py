"""The OpenAI-compatible servers users run, started on loopback with one GGUF:
llama.cpp's own server (embedded by xllamacpp) and llama-cpp-python's server.

    python -m tests.upstream_servers llama-server MODEL PORT   # serves until killed
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

SERVERS = ("llama-server", "llama-cpp-python")
ROOT = Path(__file__).parent.parent  # `python -m tests.upstream_servers` runs from here


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def command(kind: str, model: Path, port: int) -> list[str]:
    if kind == "llama-server":
        return [sys.executable, "-m", "tests.upstream_servers", kind, str(model), str(port)]
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
        "--n_threads",
        "1",
    ]


def wait_serving(proc: subprocess.Popen, port: int, timeout: float = 90.0) -> str:
    """The server's base URL once `/v1/models` answers; the process must stay up."""
    deadline = time.monotonic() + timeout
    while True:
        assert proc.poll() is None, f"{proc.args} exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"{proc.args} did not start"
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=1)
            return f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.1)


def serve_llama_server(model: str, port: int) -> None:
    """llama.cpp's C++ server (the one `llama-server` runs), in this process."""
    import threading

    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.n_ctx = 4096
    params.port = port
    params.hostnames = ["127.0.0.1"]
    params.use_jinja = True  # tools need the GGUF's own template, as `--jinja`
    params.cpuparams.n_threads = 1
    server = xllamacpp.Server(params)
    assert server.listening_address
    threading.Event().wait()  # serves from its own threads until the process is killed


if __name__ == "__main__":
    assert sys.argv[1] == "llama-server"
    serve_llama_server(sys.argv[2], int(sys.argv[3]))
