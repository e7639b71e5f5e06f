"""Key material on disk: the identity key, the swarm key store, the pairing key.

Every secret file is written atomically with mode 0600 and never logged. The
swarm key uses the standard libp2p `swarm.key` format (`/key/swarm/psk/1.0.0/`,
base16) so go-libp2p and js-libp2p peers can share it. No libp2p import here.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from hearth.protocol.wire.errors import ErrorCode, HearthError

IDENTITY_FILE = "identity.key"
SWARM_KEY_FILE = "swarm.key"
PREVIOUS_SWARM_KEY_FILE = "swarm.key.previous"
SWARM_KEY_STATE_FILE = "swarm-key-state.json"
SWARM_KEY_HEADER = "/key/swarm/psk/1.0.0/"


def write_secret(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically, readable by the owner only (0600)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_secret(path: Path) -> bytes:
    """Read a secret file, refusing one that others can read."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, f"{path} does not exist") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise HearthError(
            ErrorCode.INVALID_INPUT, f"{path} is readable by others: chmod 600 {path}"
        )
    return path.read_bytes()


def create_identity(home: Path) -> Ed25519PrivateKey:
    """Make and store a new Ed25519 identity; refuses to overwrite one."""
    path = home / IDENTITY_FILE
    if path.exists():
        raise HearthError(ErrorCode.INVALID_INPUT, f"{home} already has an identity")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    write_secret(path, pem)
    return key


def load_identity(home: Path) -> Ed25519PrivateKey:
    """The stored identity; `invalid_input` naming the fix when there is none."""
    path = home / IDENTITY_FILE
    if not path.exists():
        raise HearthError(ErrorCode.INVALID_INPUT, f"no identity in {home}: run init first")
    key = serialization.load_pem_private_key(read_secret(path), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise HearthError(ErrorCode.INVALID_INPUT, f"{path} is not an Ed25519 key")
    return key


def format_swarm_key(key: bytes) -> bytes:
    """A key in the standard `swarm.key` file format."""
    if len(key) != 32:
        raise HearthError(ErrorCode.INVALID_INPUT, "a swarm key has 32 bytes")
    return f"{SWARM_KEY_HEADER}\n/base16/\n{key.hex()}\n".encode()


def parse_swarm_key(text: bytes) -> bytes:
    """The 32-byte key of a `swarm.key` file (base16 encoding)."""
    lines = text.decode("ascii", errors="replace").strip().splitlines()
    if len(lines) != 3 or lines[0].strip() != SWARM_KEY_HEADER:
        raise HearthError(ErrorCode.INVALID_INPUT, f"not a {SWARM_KEY_HEADER} key file")
    if lines[1].strip() != "/base16/":
        raise HearthError(ErrorCode.INVALID_INPUT, "only /base16/ swarm keys are supported")
    try:
        key = bytes.fromhex(lines[2].strip())
    except ValueError as exc:
        raise HearthError(ErrorCode.INVALID_INPUT, "swarm key is not hex") from exc
    if len(key) != 32:
        raise HearthError(ErrorCode.INVALID_INPUT, "a swarm key has 32 bytes")
    return key


def pairing_key(token: bytes) -> bytes:
    """The pairing listener's private-network key: HKDF-SHA256 of the one-time token."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"hearth/pair/v1", info=b"pnet").derive(
        token
    )


@dataclass
class SwarmKeys:
    """The swarm keys in force: the current one, and during a rotation's grace
    window the previous one. The listener accepts both; dialers use the current."""

    current: bytes
    key_id: int = 1
    previous: bytes | None = None
    previous_valid_until: float = 0.0

    def accepted(self, now: float) -> list[bytes]:
        """Keys a listener accepts now, current first."""
        if self.previous is not None and now < self.previous_valid_until:
            return [self.current, self.previous]
        return [self.current]

    def rotate(self, new_key: bytes, *, now: float, grace: float, key_id: int) -> None:
        """Make `new_key` current; keep the old one for `grace` seconds."""
        self.previous, self.current = self.current, new_key
        self.previous_valid_until = now + grace
        self.key_id = key_id

    @classmethod
    def new(cls) -> SwarmKeys:
        return cls(current=secrets.token_bytes(32))

    def save(self, home: Path) -> None:
        write_secret(home / SWARM_KEY_FILE, format_swarm_key(self.current))
        if self.previous is not None:
            write_secret(home / PREVIOUS_SWARM_KEY_FILE, format_swarm_key(self.previous))
        state = {"key_id": self.key_id, "previous_valid_until": self.previous_valid_until}
        write_secret(home / SWARM_KEY_STATE_FILE, json.dumps(state).encode())

    @classmethod
    def load(cls, home: Path) -> SwarmKeys:
        path = home / SWARM_KEY_FILE
        if not path.exists():
            raise HearthError(ErrorCode.INVALID_INPUT, f"no swarm key in {home}: init or pair")
        keys = cls(current=parse_swarm_key(read_secret(path)))
        state_path = home / SWARM_KEY_STATE_FILE
        if state_path.exists():
            state = json.loads(read_secret(state_path))
            keys.key_id = int(state.get("key_id", 1))
            keys.previous_valid_until = float(state.get("previous_valid_until", 0.0))
        previous = home / PREVIOUS_SWARM_KEY_FILE
        if previous.exists():
            keys.previous = parse_swarm_key(read_secret(previous))
        return keys
