"""Protocol selection that does not wait a round trip for the greeting.

py-libp2p 0.8.1's multistream-select dialer writes `/multistream/1.0.0`, waits for
the listener's echo, then proposes a protocol and waits again: two round trips for
the security upgrade, two for the muxer and two for every stream. The spec lets the
dialer send the greeting with its first proposal (go-libp2p and js-libp2p do); a
listener reads them in order and answers both. Through a relay each round trip
crosses two hops, and a relayed connect negotiates six times (relay: security,
muxer, HOP; relay to home: STOP; inside the circuit: security, muxer) before its
first stream.

With a single protocol to propose, the dialer need not wait at all (the spec's
optimistic, "lazy" negotiation, go-libp2p's `SelectProtoOrFail` with one protocol):
the greeting and the proposal ride with the first message written, and the
listener's two answers are checked before the first read returns anything. A
relayed connect so sends its HOP CONNECT, its Noise first message, its Yamux
opening and its first stream's request without a round trip of negotiation each.

A listener (`PipelinedListener`) answers the greeting and the proposal that came
with it in one write, where py-libp2p's writes each on its own: one Noise message,
Yamux frame and relayed chunk fewer per negotiation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol

import trio
from libp2p.abc import IMultiselectCommunicator
from libp2p.custom_types import StreamHandlerFn, TProtocol
from libp2p.exceptions import ParseError
from libp2p.host.basic_host import BasicHost
from libp2p.io.abc import Reader
from libp2p.io.exceptions import IOException
from libp2p.network.swarm import Swarm
from libp2p.protocol_muxer.exceptions import (
    MultiselectClientError,
    MultiselectCommunicatorError,
    MultiselectError,
    ProtocolNotSupportedError,
)
from libp2p.protocol_muxer.multiselect import Multiselect
from libp2p.protocol_muxer.multiselect_client import (
    DEFAULT_NEGOTIATE_TIMEOUT,
    MULTISELECT_PROTOCOL_ID,
    PROTOCOL_NOT_FOUND_MSG,
    MultiselectClient,
    is_valid_handshake,
)
from libp2p.protocol_muxer.multiselect_communicator import MultiselectCommunicator
from libp2p.utils import encode_delim
from libp2p.utils.varint import decode_varint_with_size, read_varint_prefixed_bytes_limited

MAX_MESSAGE = 1024  # a multistream message: a protocol id, "na", "ls" or the greeting


class NotServed(IOException):
    """The listener refused the protocol proposed optimistically (its answer came
    with the first read)."""

    def __init__(self, protocol: str) -> None:
        super().__init__(f"protocol not supported: {protocol}")
        self.protocol = protocol


class Optimistic:
    """A proposal not yet sent on `target` (a raw connection, a secured one or a
    stream): it goes with the first write, and the first read checks the answers.

    Both are put in place as `target`'s own `read` and `write`, and removed once
    done, so after the first exchange every call goes straight to `target`'s class.

    The answers are read with `read(None)`, whatever has arrived, never a counted
    read: py-libp2p's Yamux fails a counted read on a stream reset even with data
    buffered before the reset, so a listener's "na" followed at once by its reset
    would read as a stream gone, not as a protocol refused. What arrived past the
    answers is kept for the next reads.
    """

    def __init__(self, target: ReadWriter, protocol: TProtocol) -> None:
        self._target = target
        self._protocol = protocol
        self._write = target.write
        self._read = target.read
        self._pending = encode_delim(MULTISELECT_PROTOCOL_ID.encode()) + encode_delim(
            protocol.encode()
        )
        self._sending = trio.Lock()  # the proposal leaves once, ahead of anything else
        self._checking = trio.Lock()  # the answers are read once, by the first reader
        self._answers = _Arrived(self._read)
        self.answered = False
        target.write = self.write  # type: ignore[method-assign]
        target.read = self.read  # type: ignore[method-assign]

    async def write(self, data: bytes) -> None:
        async with self._sending:
            data, self._pending = self._pending + data, b""
            if data:
                await self._write(data)
            vars(self._target).pop("write", None)

    async def read(self, n: int | None = None) -> bytes:
        if self._pending:
            await self.write(b"")  # a listener that speaks first still needs the proposal
        if not self.answered:
            async with self._checking:
                if not self.answered:
                    await self._check_answers()
        rest = self._answers.take(n)
        if not self._answers.buffered:
            vars(self._target).pop("read", None)
        return rest if rest else await self._read(n)

    async def _check_answers(self) -> None:
        greeting = await read_message(self._answers)
        if not is_valid_handshake(greeting):
            raise IOException(f"multiselect greeting mismatch: {greeting!r}")
        answer = await read_message(self._answers)
        if answer == PROTOCOL_NOT_FOUND_MSG:
            raise NotServed(self._protocol)
        if answer != self._protocol:
            raise IOException(f"unexpected answer {answer!r} to {self._protocol}")
        self.answered = True


async def read_message(reader: Reader) -> str:
    """One multistream message, bounded: a peer cannot make us buffer a length it claims
    past `MAX_MESSAGE` (`MessageTooLarge`, an `IOException`)."""
    data = await read_varint_prefixed_bytes_limited(reader, MAX_MESSAGE)
    if not data.endswith(b"\n"):
        raise IOException(f"multiselect message not delimited: {data[:64]!r}")
    return data[:-1].decode()


def unanswered(target: object) -> bool:
    """Whether `target` still waits for the answers to an optimistic proposal: a
    connection whose listener closed it right after authentication (a gate refusing
    us) never answered its muxer proposal."""
    proposal = getattr(getattr(target, "__dict__", {}).get("read"), "__self__", None)
    return isinstance(proposal, Optimistic) and not proposal.answered


class ReadWriter(Protocol):
    async def read(self, n: int | None = None) -> bytes: ...

    async def write(self, data: bytes) -> None: ...


class _Arrived(Reader):
    """A peer's multistream messages as they arrive: each fill takes whatever the
    target has (`read(None)`), and `read(n)` serves up to `n` of it, for `read_message`."""

    def __init__(self, read: Callable[[int | None], Awaitable[bytes]]) -> None:
        self._read = read
        self.buffered = b""

    async def read(self, n: int | None = None) -> bytes:
        if not self.buffered:
            self.buffered = await self._read(None)
        return self.take(n)

    def take(self, n: int | None) -> bytes:
        """Up to `n` of what is buffered (all of it for `None`), without reading."""
        size = len(self.buffered) if n is None or n < 0 else n
        out, self.buffered = self.buffered[:size], self.buffered[size:]
        return out

    def holds_message(self) -> bool:
        """Whether a whole length-prefixed message is buffered (reading it will not wait)."""
        length, size = decode_varint_with_size(self.buffered[:10])
        return bool(size) and self.buffered[size - 1] < 0x80 and len(self.buffered) >= size + length


def _serve_first(target: ReadWriter, arrived: _Arrived) -> None:
    """Make `target`'s next reads return what `arrived` still holds, then its own."""
    if not arrived.buffered:
        return

    async def read(n: int | None = None) -> bytes:
        rest = arrived.take(n)
        if not arrived.buffered:
            vars(target).pop("read", None)
        return rest

    target.read = read  # type: ignore[method-assign]


class PipelinedListener(Multiselect):
    """A multistream-select listener that holds its greeting back while the dialer's
    proposal has already arrived, and writes it with the answer: a pipelining dialer
    (Hearth's, go-libp2p's, js-libp2p's) gets both in one write. A dialer that waits
    for the greeting before proposing has sent nothing more, so the listener finds no
    whole message buffered and writes the greeting before it reads on, as py-libp2p's
    does. What arrived past the chosen protocol's name is left for its handler."""

    async def negotiate(
        self,
        communicator: IMultiselectCommunicator,
        negotiate_timeout: int = DEFAULT_NEGOTIATE_TIMEOUT,
    ) -> tuple[TProtocol | None, StreamHandlerFn | None]:
        if not isinstance(communicator, MultiselectCommunicator):
            return await super().negotiate(communicator, negotiate_timeout)
        target = communicator.read_writer
        arrived = _Arrived(target.read)
        held = encode_delim(MULTISELECT_PROTOCOL_ID.encode())
        with trio.move_on_after(negotiate_timeout):
            try:
                greeting = await read_message(arrived)
                if not is_valid_handshake(greeting):
                    raise MultiselectError(f"multiselect protocol ID mismatch: {greeting!r}")
                if not arrived.holds_message():
                    await target.write(held)
                    held = b""
                while True:
                    command = await read_message(arrived)
                    protocol = TProtocol(command) if command else None
                    if command != "ls" and protocol in self.handlers:
                        await target.write(held + encode_delim(command.encode()))
                        _serve_first(target, arrived)
                        return protocol, self.handlers[protocol]
                    answer = PROTOCOL_NOT_FOUND_MSG
                    if command == "ls":
                        answer = "\n".join(p for p in self.handlers if p is not None) + "\n"
                    await target.write(held + encode_delim(answer.encode()))
                    held = b""
            except (IOException, ParseError, UnicodeDecodeError) as error:
                raise MultiselectError(f"protocol negotiation failed: {error}") from error
        raise MultiselectError("handshake read timeout")


class PipelinedSelect(MultiselectClient):
    """A multistream-select dialer: a single protocol is proposed optimistically
    (`Optimistic`); of several, the greeting and the first proposal go in one write
    and both answers are read, later proposals one at a time."""

    async def select_one_of(
        self,
        protocols: Sequence[TProtocol],
        communicator: IMultiselectCommunicator,
        negotiate_timeout: int = DEFAULT_NEGOTIATE_TIMEOUT,
    ) -> TProtocol:
        if not protocols or not isinstance(communicator, MultiselectCommunicator):
            return await super().select_one_of(protocols, communicator, negotiate_timeout)
        first = protocols[0]
        if len(protocols) == 1:
            Optimistic(communicator.read_writer, first)
            return first
        with trio.move_on_after(negotiate_timeout):
            try:
                await communicator.read_writer.write(
                    encode_delim(MULTISELECT_PROTOCOL_ID.encode()) + encode_delim(first.encode())
                )
                greeting = await communicator.read()
                if not is_valid_handshake(greeting):
                    raise MultiselectClientError(f"multiselect greeting mismatch: {greeting!r}")
                answer = await communicator.read()
            except (IOException, MultiselectCommunicatorError) as error:
                raise MultiselectClientError(f"protocol negotiation failed: {error}") from error
            if answer == first:
                return first
            if answer != PROTOCOL_NOT_FOUND_MSG:
                raise MultiselectClientError(f"unexpected answer {answer!r} to {first}")
            for protocol in protocols[1:]:
                try:
                    return await self.try_select(communicator, protocol)
                except ProtocolNotSupportedError:
                    continue
            raise MultiselectClientError(f"protocols not supported: {list(protocols)}")
        raise MultiselectClientError(
            f"response timed out after {negotiate_timeout}s, protocols tried: {list(protocols)}"
        )


def pipeline_selection(host: BasicHost, swarm: Swarm) -> None:
    """Make `host` select protocols with `PipelinedSelect` and answer with
    `PipelinedListener`: its streams, and the security and muxer upgrades of its
    connections (relayed ones included), both ways."""
    select = PipelinedSelect()
    host.multiselect_client = select
    host.multiselect.__class__ = PipelinedListener  # the same handlers, answered pipelined
    for multistream in (swarm.upgrader.security_multistream, swarm.upgrader.muxer_multistream):
        multistream._selector.multiselect_client = select
        multistream._selector.multiselect.__class__ = PipelinedListener
