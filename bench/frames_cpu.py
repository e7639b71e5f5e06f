"""CPU per small-frame round trip, both ends in this process: Hearth (spec pnet +
Noise + Yamux + roster gate, typed msgpack frames: HealthRequest → Health) against
plain py-libp2p (TCP + Noise + Yamux, a raw 32-byte echo). Also, for attribution,
the same bytes raw over Hearth's connection (`hearth_raw`: everything but the codec).

    .venv/bin/python bench/frames_cpu.py [--frames 300] [--batches 7]

Wall-clock round trips swing 30x on a shared, busy machine; CPU time does not: this
counts the process's CPU time (both peers, every layer) per round trip. Batches of
each alternate; prints medians and the ratio, writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import trio
from libp2p.peer.peerinfo import info_from_p2p_addr
from multiaddr import Multiaddr

from hearth.protocol.transport.health import HEALTH_PROTOCOL
from hearth.protocol.transport.host import host_for_home, quiet_libp2p
from hearth.protocol.transport.probe import lay_out_homes
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.frames import encode
from hearth.protocol.wire.messages import Health, HealthRequest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from plain_libp2p import ECHO, host  # noqa: E402

LOOPBACK = ["/ip4/127.0.0.1/tcp/0"]
RAW_PROTOCOL = "/hearth/bench-raw/1"


async def batches(frames: int, count: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"hearth": [], "hearth_raw": [], "reference": []}
    with tempfile.TemporaryDirectory() as tmp:
        homes = lay_out_homes(Path(tmp))
        node, phone = host_for_home(homes["node"]).host, host_for_home(homes["phone"]).host

        async def health(stream: FrameStream) -> None:
            while True:
                if isinstance(await stream.receive(), HealthRequest):
                    await stream.send(Health(peer_id=node.peer_id, name="probe"))

        node.handle(HEALTH_PROTOCOL, health)
        request = encode(HealthRequest())
        answer = encode(Health(peer_id=node.peer_id, name="probe"))

        async def raw(stream: FrameStream) -> None:
            while await stream.read_some():
                await stream.write(answer)

        node.handle(RAW_PROTOCOL, raw)
        server, client = host(), host()

        async def echo(stream) -> None:  # type: ignore[no-untyped-def]
            while data := await stream.read(65536):
                await stream.write(data)

        server.set_stream_handler(ECHO, echo)
        async with (
            node.run(LOOPBACK),
            phone.run(LOOPBACK),
            server.run([Multiaddr(LOOPBACK[0])]),
            client.run([Multiaddr(LOOPBACK[0])]),
        ):
            await phone.connect(node.peer_id, node.addrs())
            ours = await phone.open(node.peer_id, HEALTH_PROTOCOL)
            ours_raw = await phone.open(node.peer_id, RAW_PROTOCOL)
            info = info_from_p2p_addr(Multiaddr(f"{server.get_addrs()[0]}"))
            await client.connect(info)
            theirs = await client.new_stream(info.peer_id, [ECHO])
            payload = b"x" * 32

            async def hearth_trip() -> None:
                await ours.send(HealthRequest())
                await ours.receive()

            async def raw_trip() -> None:
                await ours_raw.write(request)
                got = 0
                while got < len(answer):
                    got += len(await ours_raw.read_some())

            async def plain_trip() -> None:
                await theirs.write(payload)
                got = b""
                while len(got) < len(payload):
                    got += await theirs.read(len(payload) - len(got))

            trips = {"hearth": hearth_trip, "hearth_raw": raw_trip, "reference": plain_trip}
            for _ in range(count):
                for name, trip in trips.items():
                    await trip()  # warm
                    start = time.process_time()
                    for _ in range(frames):
                        await trip()
                    out[name].append((time.process_time() - start) / frames * 1e6)
    return out


def main() -> None:
    quiet_libp2p()
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=300)
    parser.add_argument("--batches", type=int, default=7)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "frames_cpu.json")
    args = parser.parse_args()
    got = trio.run(batches, args.frames, args.batches)
    report = {name: {"median": median(v), "runs": len(v)} for name, v in got.items()}
    report["ratio"] = report["hearth"]["median"] / report["reference"]["median"]
    print(
        f"CPU per round trip (both ends): Hearth {report['hearth']['median']:.0f} us, "
        f"the same bytes raw over Hearth's connection {report['hearth_raw']['median']:.0f} us, "
        f"plain py-libp2p {report['reference']['median']:.0f} us, ratio {report['ratio']:.2f}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
