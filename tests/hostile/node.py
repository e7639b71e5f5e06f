"""A compromised home PC: `python -m tests.hostile.node HOME --script F --log F [--listen
MADDR] [--ready-file F]`.

It holds the home's real identity and swarm key (pair a phone with `hearth-node`,
stop that daemon, start this on the same home) and answers `/hearth/plan/1` from the
phones on the roster with correctly signed, correctly bound plans read from the
script file at the start of each session. Every frame a phone sends it (requests,
observations, errors) is appended to the log as one JSON line: what a hostile home
learns.

With `--search` it also serves `/hearth/search/1` as the real home does (the node's own
`SearchService`: onion keys, the directory members gossip through, relaying as the
roster allows), so a soak's phone can search through it (tests/soak.py).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import trio

from hearth.node.planner import sign_plan
from hearth.node.search import SearchService
from hearth.protocol.transport.host import host_for_home, quiet_libp2p
from hearth.protocol.transport.plans import PLAN_PROTOCOL
from hearth.protocol.transport.streams import FrameStream
from hearth.protocol.wire.frames import FrameError
from hearth.protocol.wire.messages import ActionPlan, Final, Message, Observations, PlanRequest
from hearth.protocol.wire.roster import Role
from hearth.protocol.wire.session import PlanSession, Side

from .script import Script, plan_for


class _Session:
    """The node's end of one plan session, frame by frame."""

    def __init__(self, stream: FrameStream, log: Path) -> None:
        self.stream = stream
        self.log = log
        self.session = PlanSession(Side.NODE, stream.max_frame)
        self.pending: list[Message | FrameError] = []

    async def receive(self) -> Message:
        while not self.pending:
            data = await self.stream.read_some()
            self.pending += self.session.receive_data(data) if data else self.session.receive_eof()
        event = self.pending.pop(0)
        if isinstance(event, FrameError):
            raise event.error
        with self.log.open("a") as out:
            out.write(json.dumps({"frame": event.TYPE, **event.model_dump(mode="json")}) + "\n")
        return event

    async def send(self, message: Message) -> None:
        await self.stream.write(self.session.send(message))


async def serve(
    home: Path, script: Path, log: Path, listen: list[str], ready: Path | None, search: bool
) -> None:
    quiet_libp2p()
    host, roster, _keys, key = host_for_home(home)
    searching = SearchService(key, host, roster, host.addrs, None) if search else None

    async def plan_session(stream: FrameStream) -> None:
        conv = _Session(stream, log)
        request = await conv.receive()
        assert isinstance(request, PlanRequest)  # the session state machine allows nothing else
        # "{request_id}" in the script stands for this session's request id (tests/chaos/)
        text = script.read_text().replace("{request_id}", request.request_id)
        rounds = Script.model_validate_json(text)
        for round_no, round_ in enumerate(rounds.rounds, 1):
            assert conv.session.request_hash is not None
            plan = plan_for(
                round_,
                round_no=round_no,
                signer=host.peer_id,
                audience=stream.peer_id,
                session_id=request.request_id,
                request_hash=conv.session.request_hash,
                transcript_hash=conv.session.transcript_hash,
            )
            await conv.send(ActionPlan(request_id=request.request_id, plan=sign_plan(plan, key)))
            if not isinstance(await conv.receive(), Observations):
                return  # the phone ended the session (error or cancel): logged above
        if rounds.hold_final:
            await conv.receive()  # whatever the phone sends next (its cancel), or never
            return
        await conv.send(  # unchecked: a hostile node sends what it likes
            Final.model_construct(
                request_id=request.request_id,
                answer=rounds.answer,
                rounds=len(rounds.rounds),
                untrusted_inputs=rounds.read,
            )
        )

    host.handle(PLAN_PROTOCOL, plan_session, allow=lambda peer: Role.PHONE in roster.roles_of(peer))
    async with host.run(listen), trio.open_nursery() as nursery:
        if searching is not None:
            nursery.start_soon(searching.gossip)
        if ready is not None:
            tmp = ready.with_suffix(".tmp")
            tmp.write_text(json.dumps({"peer_id": host.peer_id, "addrs": host.addrs()}))
            tmp.replace(ready)
        await trio.sleep_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("home", type=Path)
    parser.add_argument("--script", type=Path, required=True)
    parser.add_argument("--log", type=Path, required=True)
    parser.add_argument("--listen", action="append", default=[])
    parser.add_argument("--ready-file", type=Path)
    parser.add_argument("--search", action="store_true", help="serve /hearth/search/1 too")
    args = parser.parse_args()
    trio.run(
        serve,
        args.home,
        args.script,
        args.log,
        args.listen or ["/ip4/127.0.0.1/tcp/0"],
        args.ready_file,
        args.search,
    )


if __name__ == "__main__":
    main()
