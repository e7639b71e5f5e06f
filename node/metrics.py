"""Prometheus text-format metrics on an opt-in loopback port. A client that hangs
up early, or never reads, costs its connection and nothing more."""

from __future__ import annotations

from collections.abc import Callable

import anyio
from anyio.abc import SocketStream, TaskStatus

Gauges = Callable[[], dict[str, float]]


def render(values: dict[str, float]) -> str:
    lines = []
    for name, value in sorted(values.items()):
        kind = "counter" if name.endswith("_total") else "gauge"
        lines += [f"# TYPE {name} {kind}", f"{name} {value:g}"]
    return "\n".join(lines) + "\n"


async def serve_metrics(
    port: int, gauges: Gauges, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    """Answer any HTTP GET on 127.0.0.1:`port` with the current metrics."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    task_status.started()

    async def one(client: SocketStream) -> None:
        async with client:
            try:
                with anyio.move_on_after(5):
                    await client.receive(4096)
                body = render(gauges()).encode()
                with anyio.move_on_after(5):
                    await client.send(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
                        b"Content-Length: "
                        + str(len(body)).encode()
                        + b"\r\nConnection: close\r\n\r\n"
                        + body
                    )
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                pass  # the client went away: nothing to answer

    async with listener:
        await listener.serve(one)
