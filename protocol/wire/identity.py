"""Ed25519 identities named by libp2p peer ids, and signing with them.

A libp2p Ed25519 peer id is the identity multihash of the protobuf-encoded public
key, in base58btc: the public key can be read back from the id, so a signature can
be checked against the authenticated peer id alone.
"""

from __future__ import annotations

import base58
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from .errors import ErrorCode, HearthError

# protobuf PublicKey{Type: Ed25519 (1), Data: <32 bytes>}
_PB_ED25519_PREFIX = b"\x08\x01\x12\x20"
# identity multihash (code 0x00) of the 36-byte protobuf key
_MH_IDENTITY_PREFIX = b"\x00\x24"


def public_key_bytes(key: Ed25519PrivateKey | Ed25519PublicKey) -> bytes:
    """The raw 32-byte Ed25519 public key."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)


def peer_id_from_public_key(raw_public_key: bytes) -> str:
    """The libp2p peer id (`12D3KooW…`) of a raw Ed25519 public key."""
    if len(raw_public_key) != 32:
        raise HearthError(ErrorCode.INVALID_INPUT, "an Ed25519 public key has 32 bytes")
    return base58.b58encode(_MH_IDENTITY_PREFIX + _PB_ED25519_PREFIX + raw_public_key).decode()


def peer_id_of(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """The libp2p peer id of a key."""
    return peer_id_from_public_key(public_key_bytes(key))


def public_key_from_peer_id(peer_id: str) -> Ed25519PublicKey:
    """The Ed25519 public key inside a peer id; `invalid_input` for anything else."""
    try:
        raw = base58.b58decode(peer_id.encode("ascii"))
    except ValueError as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, f"not a peer id: {peer_id[:60]!r}") from exc
    prefix = _MH_IDENTITY_PREFIX + _PB_ED25519_PREFIX
    if len(raw) != len(prefix) + 32 or not raw.startswith(prefix):
        raise HearthError(ErrorCode.INVALID_INPUT, f"not an Ed25519 peer id: {peer_id[:60]!r}")
    return Ed25519PublicKey.from_public_bytes(raw[len(prefix) :])


def is_peer_id(value: str) -> bool:
    """Whether `value` names an Ed25519 libp2p peer."""
    try:
        public_key_from_peer_id(value)
    except HearthError:
        return False
    return True


def signing_input(kind: str, payload: bytes) -> bytes:
    """Domain-separated bytes to sign: `b"hearth/<kind>/v1\\0" + payload`."""
    if not kind or "/" in kind or "\0" in kind:
        raise ValueError(f"bad signing kind {kind!r}")
    return b"hearth/" + kind.encode("ascii") + b"/v1\0" + payload


def sign(key: Ed25519PrivateKey, kind: str, payload: bytes) -> bytes:
    """Sign `payload` as a thing of `kind` (e.g. "plan", "roster", "onion-key")."""
    return key.sign(signing_input(kind, payload))


def verify(signer: str, kind: str, payload: bytes, signature: bytes) -> None:
    """Check `signature` by peer `signer` over `payload` as `kind`; raises on failure.

    The error is `plan_rejected` for plans and `refused` for everything else.
    """
    code = ErrorCode.PLAN_REJECTED if kind == "plan" else ErrorCode.REFUSED
    try:
        public_key_from_peer_id(signer).verify(signature, signing_input(kind, payload))
    except HearthError as exc:
        raise HearthError(code, f"{kind} signer is not a valid peer id") from exc
    except InvalidSignature as exc:
        raise HearthError(code, f"{kind} signature does not verify for {signer}") from exc
