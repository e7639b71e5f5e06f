"""Protocol selection that does not wait a round trip for the greeting.

py-libp2p 0.8.1's multistream-select dialer writes `/multistream/1.0.0`, waits for
the listener's echo, then proposes a protocol and waits again: two round trips for
the security upgrade, two for the muxer and two for every stream. The spec lets the
dialer send the greeting with its first proposal (go-libp2p and js-libp2p do); a
listener reads them in order and answers both. Through a relay each round trip
crosses two hops, and a relayed connect negotiates six times (relay: security,
muxer, HOP; relay to home: STOP; inside the circuit: security, muxer) before its
first stream.
"""

from __future__ import annotations

from collections.abc import Sequence

import trio
from libp2p.abc import IMultiselectCommunicator
from libp2p.custom_types import TProtocol
from libp2p.host.basic_host import BasicHost
from libp2p.io.exceptions import IOException
from libp2p.network.swarm import Swarm
from libp2p.protocol_muxer.exceptions import (
    MultiselectClientError,
    MultiselectCommunicatorError,
    ProtocolNotSupportedError,
)
from libp2p.protocol_muxer.multiselect_client import (
    DEFAULT_NEGOTIATE_TIMEOUT,
    MULTISELECT_PROTOCOL_ID,
    PROTOCOL_NOT_FOUND_MSG,
    MultiselectClient,
    is_valid_handshake,
)
from libp2p.protocol_muxer.multiselect_communicator import MultiselectCommunicator
from libp2p.utils import encode_delim


class PipelinedSelect(MultiselectClient):
    """A multistream-select dialer that sends the greeting and its first proposal in
    one write, then reads both answers; later proposals go one at a time."""

    async def select_one_of(
        self,
        protocols: Sequence[TProtocol],
        communicator: IMultiselectCommunicator,
        negotiate_timeout: int = DEFAULT_NEGOTIATE_TIMEOUT,
    ) -> TProtocol:
        if not protocols or not isinstance(communicator, MultiselectCommunicator):
            return await super().select_one_of(protocols, communicator, negotiate_timeout)
        first = protocols[0]
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
    """Make `host` select protocols with `PipelinedSelect`: its streams, and the
    security and muxer upgrades of its connections (relayed ones included)."""
    select = PipelinedSelect()
    host.multiselect_client = select
    for multistream in (swarm.upgrader.security_multistream, swarm.upgrader.muxer_multistream):
        multistream._selector.multiselect_client = select
