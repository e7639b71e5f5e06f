"""Peer ids, domain-separated signatures and the signed roster."""

from __future__ import annotations

import msgpack
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import (
    peer_id_of,
    public_key_bytes,
    public_key_from_peer_id,
    sign,
    verify,
)
from hearth.protocol.wire.messages import Signed
from hearth.protocol.wire.roster import Member, Role, Roster, open_roster, sign_roster

FOUNDER = Ed25519PrivateKey.generate()
FOUNDER_ID = peer_id_of(FOUNDER)
NOW = 1_800_000_000.0


def test_peer_id_matches_libp2p_and_round_trips() -> None:
    from libp2p.crypto.ed25519 import create_new_key_pair
    from libp2p.peer.id import ID

    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes_raw()
    libp2p_id = ID.from_pubkey(create_new_key_pair(seed).public_key).to_base58()
    assert peer_id_of(key) == libp2p_id
    assert public_key_bytes(public_key_from_peer_id(libp2p_id)) == public_key_bytes(key)


@pytest.mark.parametrize(
    "bad", ["", "not-a-peer-id", "QmYyQSo1c1Ym7orWxLYvCrM2EmxFTANf8wXmmE7DWjhx5N"]
)
def test_non_ed25519_peer_ids_are_invalid_input(bad: str) -> None:
    with pytest.raises(HearthError) as info:
        public_key_from_peer_id(bad)
    assert info.value.code is ErrorCode.INVALID_INPUT


@settings(max_examples=50)
@given(st.binary(min_size=1, max_size=256), st.data())
def test_any_flipped_bit_fails_verification(payload: bytes, data) -> None:
    signature = sign(FOUNDER, "plan", payload)
    verify(FOUNDER_ID, "plan", payload, signature)
    which = data.draw(st.sampled_from(["payload", "signature"]))
    blob = bytearray(payload if which == "payload" else signature)
    i = data.draw(st.integers(0, len(blob) * 8 - 1))
    blob[i // 8] ^= 1 << (i % 8)
    tampered = (bytes(blob), signature) if which == "payload" else (payload, bytes(blob))
    with pytest.raises(HearthError) as info:
        verify(FOUNDER_ID, "plan", *tampered)
    assert info.value.code is ErrorCode.PLAN_REJECTED


def test_signatures_are_domain_separated() -> None:
    signature = sign(FOUNDER, "plan", b"same bytes")
    with pytest.raises(HearthError) as info:
        verify(FOUNDER_ID, "roster", b"same bytes", signature)
    assert info.value.code is ErrorCode.REFUSED


def _roster(version: int = 1, **kw) -> Roster:
    members = (
        Member(peer_id=FOUNDER_ID, name="home", roles=frozenset({Role.HOME, Role.PLANNER})),
        *kw.pop("extra", ()),
    )
    return Roster(
        version=version,
        founder=FOUNDER_ID,
        issued_at=NOW,
        not_after=NOW + 3600,
        members=members,
        **kw,
    )


def test_roster_round_trips_through_signature() -> None:
    roster = _roster()
    assert open_roster(sign_roster(roster, FOUNDER), FOUNDER_ID) == roster


@settings(max_examples=50)
@given(st.data())
def test_tampered_roster_fails_verification(data) -> None:
    signed = sign_roster(_roster(), FOUNDER)
    blob = bytearray(signed.payload)
    i = data.draw(st.integers(0, len(blob) * 8 - 1))
    blob[i // 8] ^= 1 << (i % 8)
    with pytest.raises(HearthError) as info:
        open_roster(Signed(payload=bytes(blob), signature=signed.signature), FOUNDER_ID)
    assert info.value.code is ErrorCode.REFUSED


def test_roster_signed_by_another_key_is_refused() -> None:
    forger = Ed25519PrivateKey.generate()
    payload = msgpack.packb(_roster().model_dump(mode="json"), use_bin_type=True)
    forged = Signed(payload=payload, signature=sign(forger, "roster", payload))
    with pytest.raises(HearthError) as info:
        open_roster(forged, FOUNDER_ID)
    assert info.value.code is ErrorCode.REFUSED
    with pytest.raises(HearthError):
        sign_roster(_roster(), forger)  # only the founder signs


def test_stale_roster_is_refused() -> None:
    signed = sign_roster(_roster(version=3), FOUNDER)
    assert open_roster(signed, FOUNDER_ID, newer_than=2).version == 3
    for held in (3, 4):
        with pytest.raises(HearthError, match="stale"):
            open_roster(signed, FOUNDER_ID, newer_than=held)


def test_no_roles_from_an_expired_roster_or_membership() -> None:
    phone = Member(peer_id="12D3KooWphone", roles=frozenset({Role.PHONE}), expires=NOW + 10)
    roster = _roster(extra=(phone,))
    assert roster.roles_of("12D3KooWphone", NOW) == {Role.PHONE}
    assert roster.roles_of("12D3KooWphone", NOW + 11) == frozenset()
    assert not roster.admits("12D3KooWphone", NOW + 11)
    assert roster.roles_of(FOUNDER_ID, NOW + 3600) == frozenset()  # roster expired
    assert roster.admits(FOUNDER_ID, NOW + 3600)  # may still connect to fetch a fresh one


def test_roster_changes_bump_the_version() -> None:
    roster = _roster()
    added = roster.with_member(Member(peer_id="12D3KooWx"), now=NOW, ttl=60)
    removed = added.without("12D3KooWx", now=NOW, ttl=60)
    assert (added.version, removed.version) == (2, 3)
    assert removed.member("12D3KooWx") is None
    with pytest.raises(HearthError):
        removed.without("12D3KooWx", now=NOW, ttl=60)


def test_the_founder_re_signs_the_roster_before_it_expires(tmp_path) -> None:
    from hearth.protocol.transport.membership import ROSTER_TTL, RosterHolder, found_swarm

    issued = 1_000_000.0
    found_swarm(tmp_path, "home", now=issued)
    holder = RosterHolder(tmp_path)
    assert holder.renew_if_due(issued + ROSTER_TTL / 2) is None  # two thirds of its life left
    late = issued + ROSTER_TTL * 0.7
    renewed = holder.renew_if_due(late)
    assert renewed is not None and renewed.version == 2 and renewed.not_after == late + ROSTER_TTL
    assert renewed.members == holder.roster.members
    assert RosterHolder(tmp_path).roster.version == 2  # stored, signed by the founder
