"""The one-time pairing URI:
`hearth://pair?v=1&node=<peer id>&addr=<multiaddr>&token=<base64url>&exp=<unix time>`.

It never carries the swarm key or the role: the node keeps those with the token's hash.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

from .errors import ErrorCode, HearthError
from .identity import is_peer_id

TOKEN_SIZE = 32


@dataclass(frozen=True)
class Invite:
    """What a pairing URI says."""

    node: str
    addrs: tuple[str, ...]
    token: bytes
    expires: int

    def uri(self) -> str:
        query = [("v", "1"), ("node", self.node)]
        query += [("addr", a) for a in self.addrs]
        query += [("token", b64url(self.token)), ("exp", str(self.expires))]
        return "hearth://pair?" + urlencode(query, safe="/:")

    def expired(self, now: float) -> bool:
        return now >= self.expires


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def token_hash(token: bytes) -> str:
    """How the node remembers a token: never the token itself."""
    return hashlib.sha256(b"hearth/pair-token/v1\0" + token).hexdigest()


def parse_invite(uri: str) -> Invite:
    """Parse and check a pairing URI; `invalid_input` says what is wrong."""
    uri = uri.strip()
    parts = urlsplit(uri)
    if parts.scheme != "hearth" or parts.netloc != "pair":
        raise HearthError(ErrorCode.INVALID_INPUT, "not a hearth://pair URI")
    query = parse_qs(parts.query)
    if query.get("v") != ["1"]:
        raise HearthError(ErrorCode.INVALID_INPUT, "unsupported pairing URI version")
    try:
        (node,) = query["node"]
        (token_text,) = query["token"]
        (exp,) = query["exp"]
        addrs = tuple(query["addr"])
        token = base64.urlsafe_b64decode(token_text + "=" * (-len(token_text) % 4))
        expires = int(exp)
    except (KeyError, ValueError) as exc:
        raise HearthError(
            ErrorCode.INVALID_INPUT, "pairing URI needs one node, token and exp, and an addr"
        ) from exc
    if not is_peer_id(node):
        raise HearthError(ErrorCode.INVALID_INPUT, "pairing URI names no valid node")
    if len(token) != TOKEN_SIZE:
        raise HearthError(ErrorCode.INVALID_INPUT, "pairing token must be 32 bytes")
    if not all(a.startswith("/") for a in addrs):
        raise HearthError(ErrorCode.INVALID_INPUT, "pairing URI address is not a multiaddr")
    return Invite(node=node, addrs=addrs, token=token, expires=expires)
