"""A command run on a pseudo-terminal, as a person runs it: stdin and stderr (and stdout,
unless a test keeps it apart as a script would) are the terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from dataclasses import dataclass, field


@dataclass
class OnTerminal:
    proc: subprocess.Popen[bytes]
    master: int
    seen: bytearray = field(default_factory=bytearray)

    def read(self, timeout: float = 0.2) -> None:
        """Take what the terminal shows within `timeout`."""
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            ready, _, _ = select.select([self.master], [], [], left)
            if not ready:
                return
            try:
                chunk = os.read(self.master, 65536)
            except OSError:  # the command closed the terminal
                return
            if not chunk:
                return
            self.seen += chunk

    def expect(self, text: str, timeout: float = 60.0) -> None:
        """Wait (bounded) until the terminal has shown `text`."""
        end = time.monotonic() + timeout
        while text.encode() not in self.seen:
            assert time.monotonic() < end, f"never shown: {text!r}\n{self.text()}"
            done = self.proc.poll() is not None
            self.read()
            assert not done or text.encode() in self.seen, f"exited: {self.text()}"

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\r")

    def finish(self, timeout: float = 60.0) -> int:
        end = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < end, f"still running: {self.text()}"
            self.read()
        self.read()
        os.close(self.master)
        return self.proc.returncode

    def text(self) -> str:
        return self.seen.decode(errors="replace")


def on_terminal(*args: str, stdout: int | None = None, env: dict[str, str] | None = None):
    """Start `args` with the terminal as stdin and stderr, and as stdout unless `stdout`
    (say `subprocess.PIPE`) is given; 100 columns by 30 rows."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    proc = subprocess.Popen(
        args,
        stdin=slave,
        stdout=slave if stdout is None else stdout,
        stderr=slave,
        env={**os.environ, "TERM": "xterm", **(env or {})},
        close_fds=True,
    )
    os.close(slave)
    return OnTerminal(proc, master)
