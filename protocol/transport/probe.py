"""`python -m hearth.protocol.transport.probe`: a connectivity probe for a Hearth home.

    probe serve HOME --listen MADDR [--ready-file F]   answer /hearth/health/1
    probe ping HOME PEER_ID ADDR [--count N]           connect, exchange health frames
    probe watch HOME PEER_ID ADDR [--bound S]          connect, report when the peer dies

Every command prints JSON lines. A home holds `identity.key`, `swarm.key`,
`roster.signed` and `founder`; the gate admits the roster's members.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from statistics import median

import trio

from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import Health, HealthRequest
from hearth.protocol.wire.roster import Member, Role

from .health import HEALTH_PROTOCOL
from .host import host_for_home, quiet_libp2p
from .keepalive import watch
from .keys import SwarmKeys, create_identity
from .membership import RosterHolder, found_swarm
from .streams import FrameStream


def say(**event: object) -> None:
    print(json.dumps(event), flush=True)


async def serve(home: Path, listen: list[str], ready_file: Path | None) -> None:
    host = host_for_home(home).host

    async def health(stream: FrameStream) -> None:
        while True:
            request = await stream.receive()
            if isinstance(request, HealthRequest):
                await stream.send(Health(peer_id=host.peer_id, name="probe"))

    host.handle(HEALTH_PROTOCOL, health)
    async with host.run(listen):
        ready = {"peer_id": host.peer_id, "addrs": host.addrs()}
        if ready_file is not None:
            tmp = ready_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(ready))
            tmp.replace(ready_file)
        say(event="ready", **ready)
        await trio.sleep_forever()


async def ping(home: Path, peer_id: str, addr: str, count: int, timeout: float) -> None:
    host = host_for_home(home).host
    async with host.run(["/ip4/127.0.0.1/tcp/0"]):
        t0 = time.perf_counter()
        try:
            await host.connect(peer_id, [addr], timeout)
            stream = await host.open(peer_id, HEALTH_PROTOCOL)
            await stream.send(HealthRequest())  # the protocol is proposed with it: a
            await stream.receive()  # refusal (gate, protocol) comes with the answer
        except HearthError as exc:
            say(
                event="error",
                code=exc.code.value,
                message=exc.message,
                ms=(time.perf_counter() - t0) * 1000,
            )
            return
        connect_ms = (time.perf_counter() - t0) * 1000  # dial, first stream, first answer
        rtts = []
        for _ in range(count):
            t1 = time.perf_counter()
            await stream.send(HealthRequest())
            await stream.receive()
            rtts.append((time.perf_counter() - t1) * 1000)
        say(event="pong", connect_ms=connect_ms, rtt_ms_median=median(rtts), count=count)


async def watch_peer(home: Path, peer_id: str, addr: str, bound: float) -> None:
    host = host_for_home(home).host
    async with host.run(["/ip4/127.0.0.1/tcp/0"]):
        await host.connect(peer_id, [addr])
        say(event="watching", peer_id=peer_id)
        quiet = await watch(host, peer_id, bound)
        say(event="dead", peer_id=peer_id, quiet_s=quiet, at=time.time())


def _share(src: Path, dst: Path, *names: str) -> None:
    """What pairing hands a new member: copies of the founder's files (mode kept)."""
    for name in names:
        shutil.copy(src / name, dst / name)


def lay_out_homes(directory: Path) -> dict[str, Path]:
    """Homes for a walk-through: a founding `node`, a `phone` on its roster, a
    `stranger` with another swarm key and an `outsider` with the right key but off
    the roster (both hold copies of the roster, so only the key or the gate stops them)."""
    homes = {name: directory / name for name in ("node", "phone", "stranger", "outsider")}
    found_swarm(homes["node"], "home")
    for name in ("phone", "stranger", "outsider"):
        key = create_identity(homes[name])
        if name == "phone":
            member = Member(peer_id=peer_id_of(key), name=name, roles=frozenset({Role.PHONE}))
            RosterHolder(homes["node"]).add(member)
        _share(homes["node"], homes[name], "roster.signed", "founder", "swarm.key")
    SwarmKeys.new().save(homes["stranger"])
    return homes


def main(argv: list[str] | None = None) -> None:
    quiet_libp2p()
    parser = argparse.ArgumentParser(prog="hearth-probe", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("serve")
    p.add_argument("home", type=Path)
    p.add_argument("--listen", action="append", default=[])
    p.add_argument("--ready-file", type=Path)
    p = sub.add_parser("ping")
    p.add_argument("home", type=Path)
    p.add_argument("peer_id")
    p.add_argument("addr")
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--timeout", type=float, default=2.0, help="connect deadline (s)")
    p = sub.add_parser("watch")
    p.add_argument("home", type=Path)
    p.add_argument("peer_id")
    p.add_argument("addr")
    p.add_argument("--bound", type=float, default=3.0)
    args = parser.parse_args(argv)
    if args.cmd == "serve":
        trio.run(serve, args.home, args.listen or ["/ip4/127.0.0.1/tcp/0"], args.ready_file)
    elif args.cmd == "ping":
        trio.run(ping, args.home, args.peer_id, args.addr, args.count, args.timeout)
    else:
        trio.run(watch_peer, args.home, args.peer_id, args.addr, args.bound)


if __name__ == "__main__":
    main()
