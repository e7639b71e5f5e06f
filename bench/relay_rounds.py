"""Round trips and CPU of a connect through a relay friend, all three ends in this process.

    .venv/bin/python bench/relay_rounds.py [--runs 10]

Home, relay friend and phone are Hearth hosts on loopback in one process. For a direct
connect, a relayed one with a fresh phone host (cold) and a relayed one over a kept
connection to the relay (kept), each followed by one health exchange, it counts what
holds on a busy machine: the phone's socket switches from writing to reading (its
round trips, at most), its socket writes, the process CPU of all three ends and trio's
scheduler passes. Wall time is printed too, for a quiet machine. Medians of `--runs`.
"""

from __future__ import annotations

import argparse
import contextvars
import itertools
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import trio
from libp2p.io.trio import TrioTCPStream

from hearth.protocol.transport.health import HEALTH_PROTOCOL, ask_health
from hearth.protocol.transport.host import HearthHost, host_for_home, quiet_libp2p
from hearth.protocol.transport.keys import create_identity
from hearth.protocol.transport.membership import RosterHolder, found_swarm
from hearth.protocol.transport.relay import Relaying
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import Health, HealthRequest
from hearth.protocol.wire.roster import Member, Role

LOOPBACK = ["/ip4/127.0.0.1/tcp/0"]
PHONE: contextvars.ContextVar[bool] = contextvars.ContextVar("phone", default=False)
LOG: list[str] = []  # "w" / "r" on the phone's sockets


class Passes(trio.abc.Instrument):
    count = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        Passes.count += 1


def count_phone_sockets() -> None:
    """Log the writes and the reads that returned data on sockets opened by the phone."""
    init, read, write = TrioTCPStream.__init__, TrioTCPStream.read, TrioTCPStream.write

    def tagged(stream: TrioTCPStream, *args: object) -> None:
        init(stream, *args)  # type: ignore[arg-type]
        stream.phone = PHONE.get()  # type: ignore[attr-defined]

    async def logged_read(stream: TrioTCPStream, n: int | None = None) -> bytes:
        data = await read(stream, n)
        if data and stream.phone:  # type: ignore[attr-defined]
            LOG.append("r")
        return data

    async def logged_write(stream: TrioTCPStream, data: bytes) -> None:
        if stream.phone:  # type: ignore[attr-defined]
            LOG.append("w")
        await write(stream, data)

    TrioTCPStream.__init__ = tagged  # type: ignore[method-assign]
    TrioTCPStream.read = logged_read  # type: ignore[method-assign]
    TrioTCPStream.write = logged_write  # type: ignore[method-assign]


def lay_out(tmp: Path) -> dict[str, Path]:
    """A founding home, a friend holding `relay` and a phone, all on its roster."""
    homes = {name: tmp / name for name in ("home", "relay", "phone")}
    found_swarm(homes["home"], "home")
    for name, role in (("relay", Role.RELAY), ("phone", Role.PHONE)):
        peer = peer_id_of(create_identity(homes[name]))
        RosterHolder(homes["home"]).add(Member(peer_id=peer, name=name, roles=frozenset({role})))
    for name in ("relay", "phone"):  # the whole roster
        for file in ("roster.signed", "founder", "swarm.key"):
            shutil.copy2(homes["home"] / file, homes[name] / file)
    return homes


async def one(host: HearthHost, home: str, addrs: list[str]) -> dict[str, float]:
    LOG.clear()
    token = PHONE.set(True)
    cpu, passes, t0 = time.process_time(), Passes.count, time.perf_counter()
    await ask_health(host, home, addrs)
    wall = time.perf_counter() - t0
    PHONE.reset(token)
    return {
        "switches": sum(1 for pair in itertools.pairwise(LOG) if pair == ("w", "r")),
        "writes": LOG.count("w"),
        "cpu_ms": (time.process_time() - cpu) * 1000,
        "passes": Passes.count - passes,
        "wall_ms": wall * 1000,
    }


async def measure(tmp: Path, runs: int) -> dict[str, list[dict[str, float]]]:
    homes = lay_out(tmp)
    home, relay = host_for_home(homes["home"]).host, host_for_home(homes["relay"]).host

    async def health(stream: FrameStream) -> None:
        if isinstance(await stream.receive(), HealthRequest):
            await stream.send(Health(peer_id=home.peer_id, name="home"))

    home.handle(HEALTH_PROTOCOL, health)
    trio.lowlevel.add_instrument(Passes())
    out: dict[str, list[dict[str, float]]] = {"direct": [], "cold": [], "kept": []}
    async with (
        home.run(LOOPBACK),
        relay.run(LOOPBACK),
        Relaying(relay, relay.admit).run(),
        Relaying(home, lambda peer: False).run() as reserving,
    ):
        circuit = (await reserving.reserve(relay.peer_id, relay.addrs()))[0]
        for kind, addrs in (("direct", home.addrs()), ("cold", [circuit])):
            for i in range(runs + 1):  # the first is a warm-up
                phone = host_for_home(homes["phone"]).host
                async with phone.run([]):
                    sample = await one(phone, home.peer_id, addrs)
                out[kind] += [sample] if i else []
                await trio.sleep(0.2)  # the home lets the last phone connection go
        phone = host_for_home(homes["phone"]).host
        async with phone.run([]):
            await one(phone, home.peer_id, [circuit])  # the relay connection, kept from here
            for _ in range(runs):
                await phone.disconnect(home.peer_id)
                await trio.sleep(0.1)
                out["kept"].append(await one(phone, home.peer_id, [circuit]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    quiet_libp2p()
    count_phone_sockets()
    with tempfile.TemporaryDirectory() as tmp:
        samples = trio.run(measure, Path(tmp), args.runs)
    for kind, rows in samples.items():
        medians = {key: statistics.median(row[key] for row in rows) for key in rows[0]}
        print(
            f"{kind:6} phone switches {medians['switches']:.0f}, writes {medians['writes']:.0f}, "
            f"CPU of all ends {medians['cpu_ms']:.1f} ms, scheduler passes "
            f"{medians['passes']:.0f}, wall {medians['wall_ms']:.1f} ms"
        )


if __name__ == "__main__":
    main()
