"""Onion packets: constant sizes on every link, what each hop can see, tamper and
replay detection (property tests over queries, hop counts, positions and results)."""

from __future__ import annotations

import time

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hearth.search.onion import EpochKeys
from hearth.search.packets import (
    HEADER,
    MAX_QUERY_BYTES,
    PEER_ID_BYTES,
    REPLY_SIZE,
    REQUEST_SIZE,
    Drop,
    Dropped,
    Hop,
    Result,
    build,
    open_reply,
    peel,
    raw_public,
    seal_reply,
    wrap_reply,
)

KEYS = [X25519PrivateKey.generate() for _ in range(3)]
NOW = time.time()
queries = st.text(min_size=1, max_size=120).filter(lambda q: len(q.encode()) <= MAX_QUERY_BYTES)
results = st.lists(
    st.builds(
        Result, st.text(max_size=80), st.text(max_size=200), st.text(max_size=400), st.just("index")
    ),
    max_size=80,
)


def path_of(hops: int) -> list[Hop]:
    return [Hop(bytes([i + 1]) * PEER_ID_BYTES, raw_public(KEYS[i])) for i in range(hops)]


def walk(packet: bytes, hops: int) -> list:
    """Every hop's view, in order; asserts the size on every link."""
    views = []
    for i in range(hops):
        assert len(packet) == REQUEST_SIZE
        peeled, _ = peel(packet, [KEYS[i]], NOW)
        views.append(peeled)
        packet = peeled.packet
    return views


@settings(max_examples=40, deadline=None)
@given(query=queries, hops=st.integers(1, 3), found=results)
def test_sizes_are_constant_and_only_the_exit_sees_the_query(query, hops, found) -> None:
    packet, reply_keys = build(query, path_of(hops), int(NOW) + 60)
    views = walk(packet, hops)
    for i, view in enumerate(views[:-1]):
        assert view.next_hop == bytes([i + 2]) * PEER_ID_BYTES
        # a relay's view never holds the query: not where the exit finds it, nor anywhere
        assert view.packet[HEADER:] != views[-1].packet[HEADER:]
        assert len(query.encode()) < 8 or query.encode() not in view.packet
    assert views[-1].next_hop is None and views[-1].query() == (query, 10)
    reply, truncated = seal_reply(views[-1].reply_key, found)
    for view in reversed(views[:-1]):
        assert len(reply) == REPLY_SIZE
        reply = wrap_reply(view.reply_key, reply)
    assert len(reply) == REPLY_SIZE
    opened, flag = open_reply(reply_keys, reply)
    assert flag == truncated
    assert opened == found[: len(opened)]
    assert truncated or len(opened) == len(found)


def test_results_that_do_not_fit_are_cut_with_a_flag() -> None:
    big = [Result("t" * 300, "https://x/" + "u" * 900, "s" * 1000, "index")] * 40
    reply, truncated = seal_reply(bytes(32), big)
    assert truncated and len(reply) == REPLY_SIZE
    opened, flag = open_reply([bytes(32)], reply)
    assert flag and 0 < len(opened) < len(big)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hops=st.integers(1, 3), data=st.data())
def test_any_flipped_bit_is_detected_by_the_hop_that_receives_it(hops, data) -> None:
    packet, _ = build("private question", path_of(hops), int(NOW) + 60)
    link = data.draw(st.integers(0, hops - 1))  # flip on the link into this hop
    for i in range(link):
        packet = peel(packet, [KEYS[i]], NOW)[0].packet
    bit = data.draw(st.integers(0, REQUEST_SIZE * 8 - 1))
    flipped = bytearray(packet)
    flipped[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(Dropped) as info:
        peel(bytes(flipped), [KEYS[link]], NOW)
    assert info.value.reason is Drop.UNDECRYPTABLE


def test_replays_wrong_sizes_and_expired_packets_are_dropped() -> None:
    hop = EpochKeys(NOW)
    path = [Hop(bytes(PEER_ID_BYTES), raw_public(hop.current.key))]
    packet, _ = build("q", path, int(NOW) + 60)
    hop.peel(packet, NOW)
    with pytest.raises(Dropped) as replayed:
        hop.peel(packet, NOW)
    assert replayed.value.reason is Drop.REPLAYED
    with pytest.raises(Dropped) as short:
        hop.peel(packet[:-1], NOW)
    assert short.value.reason is Drop.WRONG_SIZE
    stale, _ = build("q", path, int(NOW) - 1)
    with pytest.raises(Dropped) as expired:
        hop.peel(stale, NOW)
    assert expired.value.reason is Drop.EXPIRED
    with pytest.raises(Dropped) as other:  # another node's packet (or a dropped epoch)
        peel(build("q", path_of(1), int(NOW) + 60)[0], [hop.current.key], NOW)
    assert other.value.reason is Drop.UNDECRYPTABLE


def test_a_new_epoch_keeps_the_old_key_for_the_grace_period_only() -> None:
    from hearth.search.onion import EPOCH_S, GRACE_S

    keys = EpochKeys(NOW)
    old = Hop(bytes(PEER_ID_BYTES), raw_public(keys.current.key))
    assert keys.rotate_if_due(NOW + EPOCH_S)
    keys.peel(build("q", [old], int(NOW + EPOCH_S) + 60)[0], NOW + EPOCH_S)  # still opens
    keys.rotate_if_due(NOW + EPOCH_S + GRACE_S + 1)
    with pytest.raises(Dropped):
        keys.peel(build("q", [old], int(NOW + EPOCH_S) + 999)[0], NOW + EPOCH_S + GRACE_S + 1)


def test_two_keys_for_one_epoch_drop_the_node_from_paths(tmp_path) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from hearth.protocol.wire.identity import peer_id_of
    from hearth.protocol.wire.roster import Member, Role, Roster
    from hearth.search.onion import Directory, OnionAnnouncement, announce

    node = Ed25519PrivateKey.generate()
    peer = peer_id_of(node)
    roster = Roster(
        version=1, founder=peer, issued_at=NOW, not_after=NOW + 99,
        members=(Member(peer_id=peer, roles=frozenset({Role.SEARCH_EXIT})),),
    )  # fmt: skip

    def signed(key: bytes, epoch: int = 7):  # type: ignore[no-untyped-def]
        return announce(
            node, OnionAnnouncement(peer_id=peer, key=key, epoch=epoch, expires=NOW + 60)
        )

    directory = Directory()
    assert directory.add(signed(bytes(32)), roster, NOW)
    assert peer in directory.usable(roster, NOW)
    assert not directory.add(signed(b"\1" * 32), roster, NOW)  # same epoch, another key
    assert peer in directory.equivocating and peer not in directory.usable(roster, NOW)
    forged = signed(bytes(32), 8).model_copy(
        update={"peer_id": peer_id_of(Ed25519PrivateKey.generate())}
    )
    assert not Directory().add(forged, roster, NOW)  # signature does not match the claimed node
    expired = announce(
        node, OnionAnnouncement(peer_id=peer, key=bytes(32), epoch=9, expires=NOW - 1)
    )
    assert not Directory().add(expired, roster, NOW)
