"""The node home's file format (the mechanism: `hearth.protocol.kit.formats`).

Its files (identity and swarm keys, the signed roster, the founder, the address book,
config.toml, pairing and relay state) share one version, `version` in `format.json`;
its one database, the search index (`search.sqlite`), carries its own in `PRAGMA
user_version` (`hearth.search.index.MIGRATIONS`). Version 0 is a node home made before
versions existed (up to commit 610baa0; `tests/data/node-home-v0` is one).
"""

from __future__ import annotations

from pathlib import Path

from hearth.protocol.kit import formats
from hearth.protocol.transport.keys import write_secret

NODE_HOME_VERSION = 1  # 1: format.json exists


def check_node_home(home: Path) -> None:
    """Stamped when older (no file needs migrating up to version 1), refused when newer
    (`invalid_input` naming both versions)."""
    formats.check_home(
        home,
        "hearth-node-home",
        NODE_HOME_VERSION,
        lambda path, text: write_secret(path, text.encode()),
    )
