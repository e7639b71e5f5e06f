"""XSalsa20, the stream cipher of the libp2p private-network spec.

Neither `cryptography` nor PyNaCl exposes a raw (X)Salsa20 keystream, and
pycryptodome's Salsa20 takes an 8-byte nonce only. XSalsa20 is HSalsa20(key,
nonce[:16]) as a subkey, then Salsa20(subkey, nonce[16:]): HSalsa20 runs once
per connection, here in Python; the stream itself runs in pycryptodome's C code.
"""

from __future__ import annotations

import struct

from Crypto.Cipher import Salsa20

NONCE_SIZE = 24
KEY_SIZE = 32
_SIGMA = struct.unpack("<4I", b"expand 32-byte k")
_MASK = 0xFFFFFFFF


def _rotl(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (32 - shift))) & _MASK


def _quarter(x: list[int], a: int, b: int, c: int, d: int) -> None:
    x[b] ^= _rotl((x[a] + x[d]) & _MASK, 7)
    x[c] ^= _rotl((x[b] + x[a]) & _MASK, 9)
    x[d] ^= _rotl((x[c] + x[b]) & _MASK, 13)
    x[a] ^= _rotl((x[d] + x[c]) & _MASK, 18)


def hsalsa20(key: bytes, nonce16: bytes) -> bytes:
    """The HSalsa20 subkey of a 32-byte key and a 16-byte nonce."""
    if len(key) != KEY_SIZE or len(nonce16) != 16:
        raise ValueError("HSalsa20 takes a 32-byte key and a 16-byte nonce")
    k = struct.unpack("<8I", key)
    n = struct.unpack("<4I", nonce16)
    x = [
        _SIGMA[0], k[0], k[1], k[2],
        k[3], _SIGMA[1], n[0], n[1],
        n[2], n[3], _SIGMA[2], k[4],
        k[5], k[6], k[7], _SIGMA[3],
    ]  # fmt: skip
    for _ in range(10):
        _quarter(x, 0, 4, 8, 12)
        _quarter(x, 5, 9, 13, 1)
        _quarter(x, 10, 14, 2, 6)
        _quarter(x, 15, 3, 7, 11)
        _quarter(x, 0, 1, 2, 3)
        _quarter(x, 5, 6, 7, 4)
        _quarter(x, 10, 11, 8, 9)
        _quarter(x, 15, 12, 13, 14)
    return struct.pack("<8I", x[0], x[5], x[10], x[15], x[6], x[7], x[8], x[9])


class XSalsa20:
    """A running XSalsa20 keystream: `process` XORs it into data (encrypt = decrypt).

    Each call into pycryptodome costs ~9 us whatever the size, and the pnet layer
    makes several small writes and reads per frame: small pieces are XORed in Python
    with keystream made `AHEAD` bytes at a time; larger ones use what is left of that,
    then the cipher itself."""

    SMALL = 256  # bytes: up to this, XORed against the keystream made ahead
    AHEAD = 1024  # keystream bytes made per call into the cipher

    def __init__(self, key: bytes, nonce: bytes) -> None:
        if len(nonce) != NONCE_SIZE:
            raise ValueError("XSalsa20 takes a 24-byte nonce")
        self._cipher = Salsa20.new(key=hsalsa20(key, nonce[:16]), nonce=nonce[16:])
        self._ahead = b""  # keystream made, not yet used

    def process(self, data: bytes) -> bytes:
        size, made = len(data), len(self._ahead)
        if size > made:
            if size > self.SMALL and not made:
                return self._cipher.encrypt(data)
            if size > self.SMALL:  # what is left made ahead, then the cipher
                head, self._ahead = _xor(data[:made], self._ahead), b""
                return head + self._cipher.encrypt(data[made:])
            self._ahead += self._cipher.encrypt(bytes(self.AHEAD))
        stream, self._ahead = self._ahead[:size], self._ahead[size:]
        return _xor(data, stream)


def _xor(data: bytes, stream: bytes) -> bytes:
    """`data` XOR `stream` (of the same length)."""
    size = len(data)
    return (int.from_bytes(data, "little") ^ int.from_bytes(stream, "little")).to_bytes(
        size, "little"
    )
