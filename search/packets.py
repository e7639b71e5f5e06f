"""Onion search packets, sans-IO: build, peel, reply (Sphinx-style, fixed sizes).

A request is a header of `HOPS` slots of `SLOT` bytes and a payload of
`REQUEST_PAYLOAD` bytes, `REQUEST_SIZE` in all on every link, whatever the path
length, the hop's position or the query. Slot 0 is for the hop that receives the
packet: an ephemeral X25519 public key and, sealed with ChaCha20-Poly1305 under a
key derived from it and the hop's onion key, the routing info (forward to whom or
exit, expiry, the hop's reply key). The seal's associated data is everything after
the slot, so any flipped bit is caught by the hop that receives it. The hop then
drops its slot, decrypts the rest of the header and the payload by one stream
layer, and appends a slot of stream output (the filler, which the sender computed
in advance so the next hop's seal still verifies). Only the exit sees the query.

A reply is `REPLY_SIZE` bytes on every link: the exit seals the results with its
reply key; each relay on the way back adds a stream layer with its own; the sender,
who chose every reply key, takes them all off. Replies need no sender address: they
travel back along the streams the request came on.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from enum import StrEnum

import msgpack
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

HOPS = 3  # the header is always sized for this many
SLOT = 128
HEADER = HOPS * SLOT
REQUEST_PAYLOAD = 1024
REQUEST_SIZE = HEADER + REQUEST_PAYLOAD
# ten results from the FTS5 exit pack to ~1.9 KB, ten web results (~500 B each) to
# ~5 KB, so 8 KiB holds a whole page; each hop writes it, so every KiB costs each hop
REPLY_SIZE = 8 * 1024
PEER_ID_BYTES = 38  # an Ed25519 libp2p peer id: identity multihash of the key
MAX_QUERY_BYTES = 512
TAG = 16
_ROUTING = struct.Struct(f">B{PEER_ID_BYTES}sQ32s1x")  # kind, next hop, expires, reply key
_NONCE = bytes(12)
_SALT = b"hearth/search/v1"
assert 32 + _ROUTING.size + TAG == SLOT


class Drop(StrEnum):
    """Why a hop dropped a packet (each counted, none fatal)."""

    WRONG_SIZE = "wrong_size"
    UNDECRYPTABLE = "undecryptable"  # tampered, or for a key (epoch) this hop no longer has
    REPLAYED = "replayed"
    EXPIRED = "expired"
    MALFORMED = "malformed"
    EXPIRES_TOO_LATE = "expires_too_late"  # longer-lived than a hop keeps replay tags
    REPLAY_CACHE_FULL = "replay_cache_full"


class Dropped(Exception):
    def __init__(self, reason: Drop) -> None:
        super().__init__(reason.value)
        self.reason = reason


@dataclass(frozen=True)
class Hop:
    """One hop of a path as the sender knows it: peer id and onion public key."""

    peer_id: bytes  # PEER_ID_BYTES
    onion_key: bytes  # 32-byte X25519 public key


@dataclass(frozen=True)
class Peeled:
    """What a hop learns from a packet: where it goes next (None: this hop is the
    exit), the packet to send on (or the query, at the exit), and its reply key."""

    next_hop: bytes | None
    packet: bytes
    reply_key: bytes
    replay_tag: bytes
    expires: int  # unix time, as the sender set it

    def query(self) -> tuple[str, int]:
        """At the exit: (query, result limit)."""
        try:
            size, limit = struct.unpack_from(">HB", self.packet, HEADER)
            raw = self.packet[HEADER + 3 : HEADER + 3 + size]
            if size > MAX_QUERY_BYTES:
                raise ValueError("oversize")
            return raw.decode(), limit
        except (ValueError, UnicodeDecodeError, struct.error) as exc:
            raise Dropped(Drop.MALFORMED) from exc


@dataclass(frozen=True)
class Keys:
    seal: bytes
    header: bytes
    payload: bytes
    replay: bytes


def _derive(shared: bytes, eph_pub: bytes) -> Keys:
    okm = HKDF(hashes.SHA256(), 128, _SALT, b"hop" + eph_pub).derive(shared)
    return Keys(okm[:32], okm[32:64], okm[64:96], okm[96:])


def _stream(key: bytes, size: int) -> bytes:
    encryptor = Cipher(algorithms.ChaCha20(key, bytes(16)), mode=None).encryptor()
    return encryptor.update(bytes(size))


def _xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def raw_public(key: X25519PrivateKey) -> bytes:
    return key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def build(query: str, path: list[Hop], expires: int, limit: int = 10) -> tuple[bytes, list[bytes]]:
    """A request packet for `path` (first hop first, exit last) and the reply keys
    the sender needs to open the reply."""
    encoded = query.encode()
    if not 1 <= len(path) <= HOPS:
        raise ValueError(f"a path has 1 to {HOPS} hops")
    if len(encoded) > MAX_QUERY_BYTES:
        raise ValueError(f"query over {MAX_QUERY_BYTES} bytes")
    hops = len(path)
    ephemeral = [X25519PrivateKey.generate() for _ in path]
    keys = [
        _derive(e.exchange(X25519PublicKey.from_public_bytes(h.onion_key)), raw_public(e))
        for e, h in zip(ephemeral, path, strict=True)
    ]
    reply_keys = [os.urandom(32) for _ in path]
    payload = struct.pack(">HB", len(encoded), limit) + encoded
    payloads = [payload + os.urandom(REQUEST_PAYLOAD - len(payload))]
    for k in reversed(keys):
        payloads.insert(0, _xor(payloads[0], _stream(k.payload, REQUEST_PAYLOAD)))
    # payloads[i] is what hop i receives; payloads[hops] is the exit's plaintext
    filler = b""
    for i in range(hops - 1):
        tail = _stream(keys[i].header, HEADER)[(HOPS - 1 - i) * SLOT :]
        filler = _xor(filler + bytes(SLOT), tail)
    header = b""
    for i in reversed(range(hops)):
        if i == hops - 1:
            rest = os.urandom((HOPS - hops) * SLOT) + filler
            routing = _ROUTING.pack(1, bytes(PEER_ID_BYTES), expires, reply_keys[i])
        else:
            rest = _xor(header, _stream(keys[i].header, HEADER))[: (HOPS - 1) * SLOT]
            routing = _ROUTING.pack(0, path[i + 1].peer_id, expires, reply_keys[i])
        sealed = ChaCha20Poly1305(keys[i].seal).encrypt(_NONCE, routing, rest + payloads[i])
        header = raw_public(ephemeral[i]) + sealed + rest
    return header + payloads[0], reply_keys


def peel(packet: bytes, onion_keys: list[X25519PrivateKey], now: float) -> tuple[Peeled, int]:
    """Take this hop's layer off; returns what it learned and which of its keys
    (index into `onion_keys`) opened it. Raises `Dropped` with the reason."""
    if len(packet) != REQUEST_SIZE:
        raise Dropped(Drop.WRONG_SIZE)
    eph_pub, sealed, rest = packet[:32], packet[32:SLOT], packet[SLOT:]
    for index, onion_key in enumerate(onion_keys):
        try:
            shared = onion_key.exchange(X25519PublicKey.from_public_bytes(eph_pub))
        except ValueError:  # a low-order point
            raise Dropped(Drop.UNDECRYPTABLE) from None
        keys = _derive(shared, eph_pub)
        try:
            routing = ChaCha20Poly1305(keys.seal).decrypt(_NONCE, sealed, rest)
        except InvalidTag:
            continue
        kind, next_hop, expires, reply_key = _ROUTING.unpack(routing)
        if expires < now:
            raise Dropped(Drop.EXPIRED)
        header = _xor(rest[: HEADER - SLOT] + bytes(SLOT), _stream(keys.header, HEADER))
        payload = _xor(rest[HEADER - SLOT :], _stream(keys.payload, REQUEST_PAYLOAD))
        next_hop = None if kind == 1 else next_hop
        peeled = Peeled(next_hop, header + payload, reply_key, keys.replay, expires)
        return peeled, index
    raise Dropped(Drop.UNDECRYPTABLE)


@dataclass(frozen=True)
class Result:
    """One search result, always untrusted."""

    title: str
    url: str
    snippet: str
    source: str


def seal_reply(reply_key: bytes, results: list[Result]) -> tuple[bytes, bool]:
    """The exit's reply: as many results as fit in `REPLY_SIZE` (then truncated=True)."""
    room = REPLY_SIZE - TAG - 4
    kept: list[list[str]] = []
    truncated = False
    for r in results:
        row = [r.title[:300], r.url[:2048], r.snippet[:1000], r.source[:200]]
        if len(msgpack.packb({"r": [*kept, row], "t": True})) > room:
            truncated = True
            break
        kept.append(row)
    body = msgpack.packb({"r": kept, "t": truncated})
    plain = struct.pack(">I", len(body)) + body
    plain += bytes(REPLY_SIZE - TAG - len(plain))
    return ChaCha20Poly1305(reply_key).encrypt(_NONCE, plain, None), truncated


def wrap_reply(reply_key: bytes, reply: bytes) -> bytes:
    """A relay's layer on the way back (the same size out as in)."""
    if len(reply) != REPLY_SIZE:
        raise Dropped(Drop.WRONG_SIZE)
    return _xor(reply, _stream(reply_key, REPLY_SIZE))


def open_reply(reply_keys: list[bytes], reply: bytes) -> tuple[list[Result], bool]:
    """The sender: take off every relay's layer, then open the exit's seal."""
    if len(reply) != REPLY_SIZE:
        raise Dropped(Drop.WRONG_SIZE)
    for key in reply_keys[:-1]:
        reply = _xor(reply, _stream(key, REPLY_SIZE))
    try:
        plain = ChaCha20Poly1305(reply_keys[-1]).decrypt(_NONCE, reply, None)
        (size,) = struct.unpack_from(">I", plain)
        body = msgpack.unpackb(plain[4 : 4 + size])
        results = [Result(*map(str, row)) for row in body["r"]]
        return results, bool(body["t"])
    except InvalidTag:
        raise Dropped(Drop.UNDECRYPTABLE) from None
    except (ValueError, TypeError, KeyError, struct.error, msgpack.UnpackException) as exc:
        raise Dropped(Drop.MALFORMED) from exc
