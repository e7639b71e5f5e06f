"""Relayed paths: phone and home in namespaces that cannot route to each other, both
reaching a friend's node with the `relay` role (namespaces made by the test)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from .netns import Chain, chained_namespaces, requires_netns, sh
from .nodes import BIN, cli, start_node, wait_until

PHONE_ENV = {**os.environ, "HEARTH_NO_MDNS": "1"}


def phone_cli(chain: Chain, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*chain.exec_in(chain.phone), str(BIN / "hearth"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=PHONE_ENV,
        timeout=120,
    )


def node_status(home: Path) -> dict:
    return json.loads(cli("hearth-node", "status", "--json", "--home", str(home)).stdout)


@requires_netns
def test_the_phone_reaches_home_through_a_relay_friend(tmp_path, processes, tiny_models) -> None:
    home, friend, phone = tmp_path / "home", tmp_path / "friend", tmp_path / "phone"
    cli("hearth-node", "init", "--home", str(home), "--name", "home")
    with chained_namespaces(subnet=236) as chain:
        start_node(processes, home, "--model", str(tiny_models[0]),
                   prefix=tuple(chain.exec_in(chain.home)),
                   listen=(f"/ip4/{chain.home_addr}/tcp/4001",))  # fmt: skip
        uri = json.loads(
            cli("hearth-node", "invite", "--json", "--role", "friend", "--home", str(home)).stdout
        )["uri"]
        subprocess.run(
            [*chain.exec_in(chain.friend), str(BIN / "hearth-node"), "join", "-", "--json",
             "--name", "friend", "--home", str(friend)],
            input=uri + "\n", capture_output=True, text=True, timeout=120, check=True,
        )  # fmt: skip
        relay = start_node(processes, friend, prefix=tuple(chain.exec_in(chain.friend)),
                           listen=(f"/ip4/{chain.friend_phone_side}/tcp/4002",
                                   f"/ip4/{chain.friend_home_side}/tcp/4002"))  # fmt: skip
        # the friend dials home on start; home learns its addresses and reserves a slot
        relays = wait_until(
            lambda: (r := node_status(home)["relays"]).get(relay.peer_id, {}).get("circuits") and r,
            "a reservation on the relay",
        )
        assert all("/p2p-circuit/" in c for c in relays[relay.peer_id]["circuits"])

        assert phone_cli(chain, "init", "--home", str(phone)).returncode == 0
        with chain.route_through_friend():  # paired at home, on the LAN
            uri = json.loads(cli("hearth-node", "invite", "--json", "--home", str(home)).stdout)
            paired = phone_cli(chain, "pair", "-", "--home", str(phone), stdin=uri["uri"] + "\n")
            assert paired.returncode == 0, paired.stderr
            direct = phone_cli(chain, "ask", "hello", "--route", "remote", "--json",
                               "--home", str(phone))  # fmt: skip
            assert direct.returncode == 0, direct.stdout + direct.stderr
        # away from home: no route to it; only the friend is reachable
        relayed = phone_cli(chain, "ask", "hello", "--route", "remote", "--json",
                            "--home", str(phone))  # fmt: skip
        out = json.loads(relayed.stdout.strip().splitlines()[-1])
        assert relayed.returncode == 0 and out["route"] == "remote", out
        # planned at home, over the circuit (random weights may answer only whitespace)
        assert out["node"] and out["usage"]["completion_tokens"] > 0, out
        # a direct address that swallows packets (a gateway that never answers ARP):
        # the relay is raced in and wins, the hanging direct dial is cancelled
        sh(*chain.exec_in(chain.phone), "ip", "route", "add", f"{chain.home_addr}/32",
           "via", chain.phone_addr.rsplit(".", 1)[0] + ".99")  # fmt: skip
        hung = phone_cli(chain, "ask", "hello", "--route", "remote", "--json", "--home", str(phone))
        out = json.loads(hung.stdout.strip().splitlines()[-1])
        assert hung.returncode == 0 and out["route"] == "remote", out

        status = json.loads(phone_cli(chain, "status", "--json", "--home", str(phone)).stdout)
        assert status["nodes"][0]["reachable"], status

        # the relay goes away: home says why, and the phone is told it cannot reach home
        relay.proc.kill()
        relay.proc.wait(timeout=30)
        reason = wait_until(
            lambda: next(
                (p["reason"] for p in node_status(home)["peers"]
                 if p["peer_id"] == relay.peer_id and "relay reservation failed" in p["reason"]),
                None,
            ),
            "the relay's reservation to be reported lost",
        )  # fmt: skip
        assert "relay reservation failed" in reason
        gone = phone_cli(chain, "ask", "hello", "--route", "remote", "--json", "--home", str(phone))
        assert gone.returncode == 3, gone.stdout
        assert json.loads(gone.stdout.strip().splitlines()[-1])["error"]["code"] == "unreachable"
