"""The private-network cipher's keystream made ahead for small pieces gives exactly
the bytes of the plain XSalsa20 stream, whatever the mix of piece sizes."""

from __future__ import annotations

from Crypto.Cipher import Salsa20
from hypothesis import given, settings
from hypothesis import strategies as st

from hearth.protocol.transport.xsalsa20 import XSalsa20, hsalsa20

SIZES = st.lists(
    st.one_of(
        st.integers(0, XSalsa20.SMALL + 2),
        st.integers(XSalsa20.AHEAD - 2, XSalsa20.AHEAD + 2),
        st.integers(0, 3 * XSalsa20.AHEAD),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(
    key=st.binary(min_size=32, max_size=32), nonce=st.binary(min_size=24, max_size=24), sizes=SIZES
)
def test_pieces_of_any_size_match_the_plain_keystream(
    key: bytes, nonce: bytes, sizes: list[int]
) -> None:
    plain = Salsa20.new(key=hsalsa20(key, nonce[:16]), nonce=nonce[16:])
    cipher = XSalsa20(key, nonce)
    for n, size in enumerate(sizes):
        data = bytes((n + i) % 251 for i in range(size))
        assert cipher.process(data) == plain.encrypt(data)
