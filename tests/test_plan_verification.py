"""A phone opens a plan only if its signature and every binding check out."""

from __future__ import annotations

import time

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of
from hearth.protocol.wire.messages import Plan, PlanStep, Signed
from hearth.protocol.wire.plans import Expected, open_plan

NODE = Ed25519PrivateKey.generate()
NODE_ID = peer_id_of(NODE)
PHONE_ID = peer_id_of(Ed25519PrivateKey.generate())


def signed_plan(key: Ed25519PrivateKey = NODE, **changes) -> tuple[Signed, Expected]:
    import msgpack

    from hearth.protocol.wire.identity import sign

    now = time.time()
    fields = dict(
        plan_id="p1",
        signer=NODE_ID,
        audience=PHONE_ID,
        session_id="s",
        round=1,
        request_id="s",
        request_hash=b"r" * 32,
        transcript_hash=b"t" * 32,
        issued_at=now,
        expires_at=now + 60,
        steps=[PlanStep(id="s1", tool="notes_create", arguments={"text": "x"})],
    )
    fields.update(changes)
    payload = msgpack.packb(Plan(**fields).model_dump(mode="python"), use_bin_type=True)
    expected = Expected(
        signer=NODE_ID,
        audience=PHONE_ID,
        session_id="s",
        round=1,
        request_hash=b"r" * 32,
        transcript_hash=b"t" * 32,
    )
    return Signed(payload=payload, signature=sign(key, "plan", payload)), expected


def test_a_well_bound_plan_opens() -> None:
    signed, expected = signed_plan()
    assert open_plan(signed, expected, now=time.time()).plan_id == "p1"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"audience": peer_id_of(Ed25519PrivateKey.generate())}, "another device"),
        ({"session_id": "other"}, "another session"),
        ({"round": 2}, "round 2"),
        ({"request_hash": b"x" * 32}, "another request"),
        ({"transcript_hash": b"x" * 32}, "another transcript"),
        ({"expires_at": time.time() - 1}, "expired"),
        ({"signer": PHONE_ID}, "another peer"),
    ],
)
def test_a_rebound_or_expired_plan_is_rejected_with_the_reason(changes, reason) -> None:
    signed, expected = signed_plan(**changes)
    with pytest.raises(HearthError) as info:
        open_plan(signed, expected, now=time.time())
    assert info.value.code is ErrorCode.PLAN_REJECTED and reason in info.value.message


def test_a_plan_signed_by_another_key_is_rejected() -> None:
    signed, expected = signed_plan(key=Ed25519PrivateKey.generate())
    with pytest.raises(HearthError, match="signature"):
        open_plan(signed, expected, now=time.time())


def test_a_replayed_plan_is_rejected() -> None:
    signed, expected = signed_plan()
    with pytest.raises(HearthError, match="replayed"):
        open_plan(signed, expected, now=time.time(), seen={"p1"})


@settings(max_examples=60)
@given(st.data())
def test_any_tampered_byte_is_rejected(data) -> None:
    signed, expected = signed_plan()
    blob = bytearray(signed.payload)
    i = data.draw(st.integers(0, len(blob) - 1))
    blob[i] ^= data.draw(st.integers(1, 255))
    with pytest.raises(HearthError) as info:
        open_plan(
            Signed(payload=bytes(blob), signature=signed.signature), expected, now=time.time()
        )
    assert info.value.code is ErrorCode.PLAN_REJECTED
