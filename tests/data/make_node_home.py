"""Make the fixture node home in `tests/data/node-home-v0/` with the landed code, through
its real commands: `python -m tests.data.make_node_home OUT` (made by 610baa0, before node
homes carried a format version).

A home node (`hearth-node init`, `config.toml` set, `serve`), two documents indexed
(`hearth-node index add`: the search index), a phone paired (`hearth pair -`), a
friend's node joined (`hearth-node join -`, relay) and granted `planner` (`hearth-node
roster grant`), and whatever the running node kept meanwhile (the address book, the
swarm key's state). Sockets, ready files and logs are left out of the copy; the
roster as `hearth-node roster --json` showed it is kept beside, in `expected.json`.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

from hearth.companion.swarmkit import Processes, init_phone, last_json, pair, run, start_node

LEFT_OUT = {"control.sock", "ready.json", "logs", "node.lock"}
CONFIG = "plan_for_friends = true\nmax_sessions = 3\n"
DOCUMENTS = {
    "bread.md": "# Sourdough\nFeed the starter the night before; bake at 230 degrees.",
    "trip.txt": "Train to Lyon on Friday, platform 7, seat 42.",
}


def make(out: Path, work: Path) -> None:
    docs = work / "docs"
    docs.mkdir()
    for name, text in DOCUMENTS.items():
        (docs / name).write_text(text)
    with Processes() as processes:
        home = work / "node"
        run("hearth-node", "init", "--home", str(home), "--name", "home")
        node = start_node(processes, home, config=CONFIG)
        run("hearth-node", "index", "add", str(docs), "--home", str(home))
        init_phone(work / "phone")
        pair(work / "phone", node.invite())
        friend = last_json(
            run("hearth-node", "join", "-", "--json", "--home", str(work / "friend"),
                stdin=node.invite("--role", "friend", "--grant", "relay") + "\n")
        )["peer_id"]  # fmt: skip
        run("hearth-node", "roster", "grant", str(friend), "planner", "--home", str(home))
        roster = last_json(run("hearth-node", "roster", "--json", "--home", str(home)))
        node.proc.terminate()
        node.proc.wait(timeout=30)
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(home, out, ignore=lambda _dir, names: [n for n in names if n in LEFT_OUT])
    (out / "expected.json").write_text(json.dumps({"roster": roster}, indent=1) + "\n")
    print(json.dumps({"made": str(out), "files": sorted(p.name for p in out.iterdir())}))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        make(Path(sys.argv[1]).resolve(), Path(tmp))
