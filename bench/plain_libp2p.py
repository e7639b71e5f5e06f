"""The reference peer for `bench/connect.py`: plain py-libp2p, TCP + Noise + Yamux,
no private network and no gate, dialling without the happy-eyeballs delay.

    python bench/plain_libp2p.py serve READY_FILE     echo on /bench/echo/1
    python bench/plain_libp2p.py ping ADDR COUNT      connect, echo 32-byte frames
"""

from __future__ import annotations

import json
import sys
import time
from statistics import median

import trio
from libp2p import new_host
from libp2p.custom_types import TProtocol
from libp2p.network.config import ConnectionConfig
from libp2p.peer.peerinfo import info_from_p2p_addr
from multiaddr import Multiaddr

ECHO = TProtocol("/bench/echo/1")


def host():  # type: ignore[no-untyped-def]
    return new_host(
        connection_config=ConnectionConfig(max_connections_per_peer=1), muxer_preference="YAMUX"
    )


async def serve(ready_file: str) -> None:
    h = host()

    async def echo(stream) -> None:  # type: ignore[no-untyped-def]
        while data := await stream.read(65536):
            await stream.write(data)

    h.set_stream_handler(ECHO, echo)
    async with h.run([Multiaddr("/ip4/127.0.0.1/tcp/0")]):
        addr = f"{h.get_addrs()[0]}"
        with open(ready_file + ".tmp", "w") as f:
            json.dump({"peer_id": str(h.get_id()), "addrs": [addr]}, f)
        import os

        os.replace(ready_file + ".tmp", ready_file)
        await trio.sleep_forever()


async def ping(addr: str, count: int) -> None:
    h = host()
    async with h.run([Multiaddr("/ip4/127.0.0.1/tcp/0")]):
        info = info_from_p2p_addr(Multiaddr(addr))
        t0 = time.perf_counter()
        await h.connect(info)
        stream = await h.new_stream(info.peer_id, [ECHO])
        connect_ms = (time.perf_counter() - t0) * 1000
        rtts = []
        payload = b"x" * 32
        for _ in range(count):
            t1 = time.perf_counter()
            await stream.write(payload)
            got = b""
            while len(got) < len(payload):
                got += await stream.read(len(payload) - len(got))
            rtts.append((time.perf_counter() - t1) * 1000)
        print(
            json.dumps(
                {
                    "event": "pong",
                    "connect_ms": connect_ms,
                    "rtt_ms_median": median(rtts),
                    "count": count,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        trio.run(serve, sys.argv[2])
    else:
        trio.run(ping, sys.argv[2], int(sys.argv[3]))
