"""Key files (mode 0600, swarm.key format, rotation) and the XSalsa20 keystream."""

from __future__ import annotations

import os
import stat

import nacl.bindings
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hearth.protocol.transport.keys import (
    SwarmKeys,
    create_identity,
    format_swarm_key,
    load_identity,
    pairing_key,
    parse_swarm_key,
)
from hearth.protocol.transport.xsalsa20 import XSalsa20, hsalsa20
from hearth.protocol.wire.errors import ErrorCode, HearthError

GO_KEY = b"this is 32-byte key for xsalsa20"
GO_NONCE = b"24-byte nonce for xsalsa"


def test_xsalsa20_matches_published_vectors() -> None:
    # golang.org/x/crypto/salsa20 and libsodium test vectors
    assert XSalsa20(GO_KEY, GO_NONCE).process(b"Hello world!").hex() == "002d4513843fc240c401e541"
    assert XSalsa20(GO_KEY, GO_NONCE).process(bytes(64)).hex() == (
        "4848297feb1fb52fb66d81609bd547fabcbe7026edc8b5e5e449d088bfa69c08"
        "8f5d8da1d791267c2c195a7f8cae9c4b4050d08ce6d3a151ec265f3a58e47648"
    )
    assert XSalsa20(b"k" * 32, b"n" * 24).process(bytes(64)).hex() == (
        "91172bd584998fa76d97a543eccf9eafdde4107708b45dda53ad660ebfc44656"
        "c8c850d59229d2a15e54fb6a1119be624e1880c0916eb6e08b2557e1d03db9da"
    )


@settings(max_examples=50)
@given(
    st.binary(min_size=32, max_size=32),
    st.binary(min_size=24, max_size=24),
    st.binary(max_size=300),
)
def test_xsalsa20_matches_libsodium_secretbox(key: bytes, nonce: bytes, msg: bytes) -> None:
    # secretbox = Poly1305 tag + (msg XOR XSalsa20 keystream from byte 32)
    boxed = nacl.bindings.crypto_secretbox(msg, nonce, key)
    stream = XSalsa20(key, nonce)
    stream.process(bytes(32))
    assert stream.process(msg) == boxed[16:]


def test_keystream_is_continuous_across_calls() -> None:
    one = XSalsa20(GO_KEY, GO_NONCE).process(bytes(100))
    split = XSalsa20(GO_KEY, GO_NONCE)
    assert split.process(bytes(37)) + split.process(bytes(63)) == one


def test_hsalsa20_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError):
        hsalsa20(b"short", bytes(16))


def test_swarm_key_file_is_standard_and_private(tmp_path) -> None:
    keys = SwarmKeys.new()
    keys.save(tmp_path)
    text = (tmp_path / "swarm.key").read_bytes()
    assert text.splitlines()[:2] == [b"/key/swarm/psk/1.0.0/", b"/base16/"]
    assert parse_swarm_key(text) == keys.current
    for name in os.listdir(tmp_path):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name
    assert SwarmKeys.load(tmp_path) == keys


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"garbage",
        b"/key/swarm/psk/1.0.0/\n/base64/\nAAAA\n",
        b"/key/swarm/psk/1.0.0/\n/base16/\nabcd\n",
    ],
)
def test_malformed_swarm_key_is_invalid_input(text: bytes) -> None:
    with pytest.raises(HearthError) as info:
        parse_swarm_key(text)
    assert info.value.code is ErrorCode.INVALID_INPUT


def test_rotation_accepts_the_previous_key_only_during_grace(tmp_path) -> None:
    keys = SwarmKeys.new()
    old = keys.current
    new = format_swarm_key(os.urandom(32))
    keys.rotate(parse_swarm_key(new), now=100.0, grace=50.0, key_id=2)
    assert keys.accepted(120.0) == [keys.current, old]
    assert keys.accepted(150.0) == [keys.current]
    keys.save(tmp_path)
    assert SwarmKeys.load(tmp_path).accepted(120.0) == [keys.current, old]


def test_identity_is_private_and_not_overwritten(tmp_path) -> None:
    key = create_identity(tmp_path)
    assert stat.S_IMODE((tmp_path / "identity.key").stat().st_mode) == 0o600
    assert load_identity(tmp_path).private_bytes_raw() == key.private_bytes_raw()
    with pytest.raises(HearthError):
        create_identity(tmp_path)


def test_group_readable_secret_is_refused(tmp_path) -> None:
    create_identity(tmp_path)
    os.chmod(tmp_path / "identity.key", 0o644)
    with pytest.raises(HearthError, match="chmod 600"):
        load_identity(tmp_path)


def test_pairing_key_is_hkdf_of_the_token() -> None:
    token = bytes(range(32))
    assert pairing_key(token) == pairing_key(token) != pairing_key(bytes(32))
    assert len(pairing_key(token)) == 32
