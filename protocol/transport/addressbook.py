"""Last-known-good addresses per peer (never in the signed roster)."""

from __future__ import annotations

import json
from pathlib import Path

from .keys import write_secret

ADDRESS_BOOK_FILE = "addressbook.json"


class AddressBook:
    """Peer id → multiaddrs, most recently good first; kept under the home."""

    def __init__(self, home: Path) -> None:
        self.path = home / ADDRESS_BOOK_FILE
        self.entries: dict[str, list[str]] = (
            json.loads(self.path.read_text()) if self.path.exists() else {}
        )

    def get(self, peer_id: str) -> list[str]:
        return list(self.entries.get(peer_id, []))

    def add(self, peer_id: str, addrs: list[str]) -> None:
        """Append addresses learned for `peer_id` (after those known to work)."""
        known = self.entries.get(peer_id, [])
        self.remember(peer_id, known + [a for a in addrs if a not in known])

    def remember(self, peer_id: str, addrs: list[str]) -> None:
        """Put `addrs` first for `peer_id` (they just worked, or were just learned)."""
        known = [a for a in self.entries.get(peer_id, []) if a not in addrs]
        updated = (list(addrs) + known)[:16]
        if updated == self.entries.get(peer_id):
            return  # nothing new: no write on every connect
        self.entries[peer_id] = updated
        write_secret(self.path, json.dumps(self.entries, indent=1).encode())
