"""Peer-routed search across real processes on loopback: a home, two search relays'
worth of friends, an FTS5 exit and a SearXNG exit, and a phone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest
import trio

from .nodes import BIN, cli, init_phone, pair, start_node, wait_until
from .test_swarm import node_json, subprocess_join

DOCS = {
    "hearth.md": "# Hearth relays\nFriends relay the phone's connection home over libp2p.",
    "bread.html": "<html><title>Sourdough</title><body><p>Bake bread with a starter.</p>"
    "<script>var hearth = 1</script></body></html>",
    "notes.txt": "Shopping list: flour, salt, water.",
}


class SlowSearxng(BaseHTTPRequestHandler):
    """Speaks SearXNG's JSON format; each answer takes `delay` seconds."""

    delay = 0.0

    def do_GET(self) -> None:
        query = parse_qs(urlparse(self.path).query)
        assert query["format"] == ["json"]
        time.sleep(self.delay)
        body = json.dumps(
            {"results": [{"title": "Result for " + query["q"][0], "url": "https://example.org/1",
                          "content": "a snippet", "engine": "duckduckgo"}]}
        ).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def swarm(processes, tmp_path, tiny_models):
    """home (search-relay), friend a (search-relay), friend b (FTS5 exit),
    friend c (SearXNG exit, slow), a paired phone; gossip settled."""
    SlowSearxng.delay = 0.0
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlowSearxng)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    home = start_node(processes, tmp_path / "home", "--model", str(tiny_models[0]))
    node_json("roster", "grant", home.peer_id, "search-relay", "--home", str(home.home))
    nodes = {"home": home}
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    view_log = tmp_path / "exit-view.jsonl"
    configs = {
        "a": ("search-relay", ""),
        "b": ("search-exit", f'search_view_log = "{view_log}"\n'),
        "c": ("search-exit", f'search_backend = "searxng"\nsearxng_url = "http://127.0.0.1:{server.server_port}"\n'),
    }  # fmt: skip
    for name, (role, config) in configs.items():
        uri = home.invite("--role", "friend", "--grant", role)
        subprocess_join(tmp_path / name, uri)
        if name == "b":
            added = node_json("index", "add", str(docs), "--home", str(tmp_path / name))
            assert added["added"] == 3
        nodes[name] = start_node(processes, tmp_path / name, config=config)
    phone = tmp_path / "phone"
    init_phone(phone)
    pair(phone, home.invite())
    wait_until(
        lambda: len(home.status()["search"]["known_nodes"]) == 4, "every search node's onion key"
    )
    yield nodes, phone, view_log, server
    server.shutdown()


def search(phone, *args: str) -> tuple[int, dict]:
    result = subprocess.run(
        [str(BIN / "hearth"), "search", *args, "--json", "--home", str(phone)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return result.returncode, json.loads(result.stdout.strip().splitlines()[-1])


def test_two_and_three_hop_searches_reach_the_index_and_the_exit_never_learns_who(swarm) -> None:
    nodes, phone, view_log, _ = swarm
    home = nodes["home"]  # the SearXNG exit steps back: every search goes to the index
    node_json("roster", "deny", nodes["c"].peer_id, "search-exit", "--home", str(home.home))
    for hops in ("2", "3"):
        code, out = search(phone, "relay connection", "--hops", hops)
        assert code == 0, out
        assert out["hops"] == int(hops)
        for r in out["results"]:
            assert r["untrusted"] is True and r["source"] == "index"
        hit = out["results"][0]
        assert hit["title"] == "Hearth relays" and hit["url"].endswith("hearth.md")
    view = view_log.read_text()
    assert "relay connection" in view  # the exit saw what was asked...
    phone_id = json.loads(cli("hearth", "status", "--json", "--home", str(phone)).stdout)["peer_id"]
    for who in (phone_id, nodes["home"].peer_id, nodes["a"].peer_id):
        assert who not in view  # ...and not who asked, nor the path
    assert all(
        set(json.loads(line)) == {"query", "limit", "next_hop"} for line in view.splitlines()
    )
    status = nodes["b"].status()["search"]
    assert status["served"]["exited"] >= 1 and status["equivocating"] == []


def test_three_hops_are_refused_when_the_swarm_has_too_few_relays(swarm) -> None:
    nodes, phone, _, _ = swarm
    home = nodes["home"]
    node_json("roster", "deny", home.peer_id, "search-relay", "--home", str(home.home))
    code, out = search(phone, "bread", "--hops", "3")
    assert code == 3 and out["error"]["code"] == "unreachable"
    assert "3 hops need 2 search relay(s)" in out["error"]["message"]  # never a shorter path


def test_a_relay_killed_mid_search_gives_a_typed_error_and_a_retry_elsewhere(
    swarm, monkeypatch
) -> None:
    from hearth.protocol.transport.host import host_for_home
    from hearth.protocol.wire.errors import ErrorCode, HearthError
    from hearth.search import route
    from hearth.search.onion import Directory

    nodes, phone, _, _ = swarm
    home, relay, slow_exit = nodes["home"], nodes["a"], nodes["c"]
    SlowSearxng.delay = 1.5  # the exit is busy while the relay dies
    first = {relay.peer_id: 0}
    monkeypatch.setattr(route.random, "choice", lambda seq: slow_exit.peer_id)
    monkeypatch.setattr(
        route.random, "sample", lambda seq, k: sorted(seq, key=lambda p: first.get(p, 1))[:k]
    )

    async def run() -> tuple[route.Outcome, HearthError]:
        host, roster, _, _ = host_for_home(phone)
        directory = Directory()
        async with host.run([]):
            await route.pull_directory(host, home.peer_id, directory, roster.roster, home.addrs)
            nodes_now = directory.usable(roster.roster, time.time())
            path = route.choose_path(
                nodes_now, roster.roster, host.peer_id, home.peer_id, 2, time.time()
            )
            assert [a.peer_id for a in path] == [relay.peer_id, slow_exit.peer_id]

            async def kill_relay() -> None:
                await trio.sleep(0.5)
                os.kill(relay.proc.pid, signal.SIGKILL)

            async with trio.open_nursery() as n:
                n.start_soon(kill_relay)
                with pytest.raises(HearthError) as failed:
                    await route.send(host, path, "mid-search", 5)
            outcome = await route.search(
                host, nodes_now, roster.roster, own_node=home.peer_id, query="again", hops=2
            )
            return outcome, failed.value

    outcome, error = trio.run(run)
    assert error.code in (ErrorCode.UNREACHABLE, ErrorCode.TIMED_OUT)
    assert outcome.attempts == 2 and outcome.exit == slow_exit.peer_id  # same exit, via home
    assert outcome.results[0].title == "Result for again"
    assert relay.proc.wait(timeout=10) == -signal.SIGKILL


def test_the_planner_searches_while_planning_and_labels_what_it_read(swarm) -> None:
    from hearth.protocol.transport.host import host_for_home
    from hearth.protocol.transport.plans import PLAN_PROTOCOL, run_plan_session
    from hearth.protocol.wire.messages import ChatMessage, Limits, PlanRequest

    nodes, phone, _, _ = swarm
    home = nodes["home"]

    def exited() -> int:
        return sum(nodes[n].status()["search"]["served"].get("exited", 0) for n in "bc")

    before = exited()
    request = PlanRequest(
        request_id="websearch1",
        tool_choice="required",  # no phone tools: the node's web_search is the only tool
        tools=[],
        conversation=[ChatMessage(role="user", content="what is new with sourdough?")],
        limits=Limits(max_rounds=2, max_steps=1, max_tokens=200, max_value_chars=40),
    )

    async def go():  # type: ignore[no-untyped-def]
        host = host_for_home(phone).host
        async with host.run([]):
            stream = await host.open(home.peer_id, PLAN_PROTOCOL, home.addrs)
            return await run_plan_session(
                stream, request, phone_id=host.peer_id, execute=lambda plan: None
            )

    outcome = trio.run(go)
    assert outcome.final.request_id == "websearch1" and not outcome.plans
    assert exited() == before + 1  # one peer-routed search, sent by the home node
    # read, then answered at once: the answer says what it was written after
    [read] = outcome.final.untrusted_inputs
    assert read.tool == "web_search" and read.source.startswith("peer-routed web search")


def test_bad_packets_are_dropped_counted_and_typed_and_the_relay_serves_on(swarm) -> None:
    from hearth.protocol.transport.host import host_for_home
    from hearth.protocol.wire.errors import ErrorCode, HearthError
    from hearth.protocol.wire.messages import SearchPacket
    from hearth.search import route
    from hearth.search.onion import Directory
    from hearth.search.packets import build

    nodes, phone, _, _ = swarm
    home, relay = nodes["home"], nodes["a"]

    async def run() -> list[ErrorCode]:
        host, roster, _, _ = host_for_home(phone)
        directory = Directory()
        codes = []
        async with host.run([]):
            await route.pull_directory(host, home.peer_id, directory, roster.roster, home.addrs)
            usable = directory.usable(roster.roster, time.time())
            path = [usable[relay.peer_id], usable[nodes["b"].peer_id]]
            packet, _ = build("replay me", [route.hop_of(a) for a in path], int(time.time()) + 60)
            stale, _ = build("old", [route.hop_of(a) for a in path], int(time.time()) - 5)
            for data in (b"short", packet, packet, stale, packet[:-1] + bytes([packet[-1] ^ 1])):
                stream = await host.open(relay.peer_id, route.SEARCH_PROTOCOL, relay.addrs)
                await stream.send(SearchPacket(data=data))
                try:
                    await stream.receive()
                    codes.append(None)
                except HearthError as exc:
                    codes.append(exc.code)
            results, _ = await route.send(host, path, "relay connection", 5)
            assert results and results[0].source == "index"  # and it serves on
        return codes

    codes = trio.run(run)
    assert codes == [ErrorCode.PROTOCOL_ERROR, None, *[ErrorCode.PROTOCOL_ERROR] * 3]
    dropped = relay.status()["search"]["dropped"]
    assert dropped == {"wrong_size": 1, "replayed": 1, "expired": 1, "undecryptable": 1}


def test_a_resident_companion_keeps_its_search_stream_to_the_first_hop(swarm) -> None:
    """`hearth search` through `hearth serve`: the second search opens no stream."""
    from hearth.companion.reports import peer_search
    from hearth.companion.service import Service

    nodes, phone, _, _ = swarm
    home = str(nodes["home"].home)  # one path: the home relays, the index answers
    node_json("roster", "deny", nodes["c"].peer_id, "search-exit", "--home", home)
    node_json("roster", "deny", nodes["a"].peer_id, "search-relay", "--home", home)

    async def main() -> list[int]:
        async with Service.open(phone, resident=True) as service:
            opened = []
            for _ in range(3):
                with trio.fail_after(60):
                    result = await peer_search(service, "relay connection")
                assert result.results[0].title == "Hearth relays"
                assert service.link is not None
                opened.append(service.search_streams.on(service.link).opened)
            return opened

    assert trio.run(main) == [1, 1, 1]
