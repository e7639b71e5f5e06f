"""`python -m hearth.protocol.transport.probe`: a connectivity probe for a Hearth home.

    probe serve HOME --listen MADDR [--ready-file F]   answer /hearth/health/1
    probe ping HOME PEER_ID ADDR [--count N]           connect, exchange health frames
    probe watch HOME PEER_ID ADDR [--bound S]          connect, report when the peer dies
    probe demo DIR                                     the demo's multi-process walk-through

Every command prints JSON lines. A home holds `identity.key`, `swarm.key`,
`roster.signed` and `founder`; the gate admits the roster's members.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

import trio

from hearth.protocol.wire.errors import HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import Health, HealthRequest
from hearth.protocol.wire.roster import Member, Role

from .host import HearthHost, quiet_libp2p
from .keepalive import watch
from .keys import SwarmKeys, create_identity, load_identity
from .membership import add_member, found_swarm, load_roster

HEALTH_PROTOCOL = "/hearth/health/1"


def host_for(home: Path) -> HearthHost:
    """A host with `home`'s identity, swarm keys and roster gate."""
    roster, _ = load_roster(home)
    keys = SwarmKeys.load(home)
    return HearthHost(
        load_identity(home),
        lambda: keys.accepted(time.time()),
        lambda peer: roster.admits(peer, time.time()),
    )


def say(**event: object) -> None:
    print(json.dumps(event), flush=True)


async def serve(home: Path, listen: list[str], ready_file: Path | None) -> None:
    host = host_for(home)

    async def health(stream):  # type: ignore[no-untyped-def]
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
    host = host_for(home)
    async with host.run(["/ip4/127.0.0.1/tcp/0"]):
        t0 = time.perf_counter()
        try:
            await host.connect(peer_id, [addr], timeout)
            stream = await host.open(peer_id, HEALTH_PROTOCOL)
        except HearthError as exc:
            say(
                event="error",
                code=exc.code.value,
                message=exc.message,
                ms=(time.perf_counter() - t0) * 1000,
            )
            return
        connect_ms = (time.perf_counter() - t0) * 1000
        rtts = []
        for _ in range(count):
            t1 = time.perf_counter()
            await stream.send(HealthRequest())
            await stream.receive()
            rtts.append((time.perf_counter() - t1) * 1000)
        say(event="pong", connect_ms=connect_ms, rtt_ms_median=median(rtts), count=count)


async def watch_peer(home: Path, peer_id: str, addr: str, bound: float) -> None:
    host = host_for(home)
    async with host.run(["/ip4/127.0.0.1/tcp/0"]):
        await host.connect(peer_id, [addr])
        say(event="watching", peer_id=peer_id)
        quiet = await watch(host, peer_id, bound)
        say(event="dead", peer_id=peer_id, quiet_s=quiet, at=time.time())


def _probe(*args: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "hearth.protocol.transport.probe", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)


def _wait_ready(ready_file: Path, proc: subprocess.Popen[str], timeout: float) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready_file.exists():
            ready: dict[str, str] = json.loads(ready_file.read_text())
            return ready
        if proc.poll() is not None:
            raise RuntimeError(f"probe server exited with status {proc.returncode}")
        time.sleep(0.05)
    raise TimeoutError("probe server did not become ready")


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
            add_member(homes["node"], member)
        _share(homes["node"], homes[name], "roster.signed", "founder", "swarm.key")
    SwarmKeys.new().save(homes["stranger"])
    return homes


def serve_in_background(
    home: Path, ready_file: Path
) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """Start `probe serve` for `home`; wait (bounded) until it listens."""
    server = _probe("serve", str(home), "--ready-file", str(ready_file))
    try:
        return server, _wait_ready(ready_file, server, 30)
    except BaseException:
        server.kill()
        server.wait()
        raise


def demo(directory: Path) -> None:
    """An admitted phone, a wrong-key device and an off-roster one dial the node, each
    from its own process; then the node is killed and the phone's keepalive notices."""
    homes = lay_out_homes(directory)
    node, phone, stranger, outsider = homes.values()
    server, ready = serve_in_background(node, directory / "ready.json")
    try:
        addr = ready["addrs"][0]
        for home, step in (
            (phone, "phone (member)"),
            (stranger, "wrong swarm key"),
            (outsider, "right key, off the roster"),
        ):
            out, _ = _probe("ping", str(home), ready["peer_id"], addr, "--count", "20").communicate(
                timeout=60
            )
            event = json.loads(out.splitlines()[-1])
            if event["event"] == "pong":
                say(
                    step=step,
                    outcome="connected",
                    detail=(
                        f"{event['connect_ms']:.1f} ms to connect, "
                        f"{event['rtt_ms_median']:.2f} ms median frame round trip"
                    ),
                )
            else:
                say(
                    step=step,
                    outcome=event["code"],
                    detail=(f"after {event['ms']:.1f} ms: {event['message']}"),
                )
        watcher = _probe("watch", str(phone), ready["peer_id"], addr, "--bound", "3")
        assert watcher.stdout is not None
        watcher.stdout.readline()  # watching
        time.sleep(0.5)
        killed_at = time.time()
        os.kill(server.pid, signal.SIGKILL)
        dead = json.loads(watcher.stdout.readline())
        watcher.wait(timeout=10)
        say(
            step="node killed (kill -9)",
            outcome="noticed",
            detail=f"by the phone after {dead['at'] - killed_at:.2f} s",
        )
    finally:
        server.kill()
        server.wait()


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
    p = sub.add_parser("demo")
    p.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "demo":
        demo(args.directory)
    elif args.cmd == "serve":
        trio.run(serve, args.home, args.listen or ["/ip4/127.0.0.1/tcp/0"], args.ready_file)
    elif args.cmd == "ping":
        trio.run(ping, args.home, args.peer_id, args.addr, args.count, args.timeout)
    else:
        trio.run(watch_peer, args.home, args.peer_id, args.addr, args.bound)


if __name__ == "__main__":
    main()
