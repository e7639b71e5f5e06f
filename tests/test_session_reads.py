"""What a session read travels with it (issue 30), asked of the phone through the
scripted hostile home (a real process) with `private_to_home = true` (the owner lets
private values go home: the home's planner reads them).

A session knows it read private data: once its planner has read a private value (an
earlier turn, an attached document, a step's result), a literal it writes into an
open-world tool may carry that value out, so `--yes` does not cover it (it is asked;
refused under `--no`), unless it is the user's own words. The open-world tool is an
app's, whose `query` the app declares no control argument (where it goes is `site`).

An answer the node wrote after reading something itself (a web result, a document) and
nothing else says so (`Final.untrusted_inputs`): in the result, in the conversation
kept, and in the taint of the turns after it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from hearth.companion import ask as asking
from hearth.companion.conversations import Conversations
from hearth.companion.events import AskRequest, discard
from hearth.companion.results import AskResult
from hearth.companion.service import Service
from hearth.companion.tools.registry import Tier, Tool

from .conftest import Processes
from .hostile.harness import Bench, start_bench
from .hostile.script import Round, Script
from .hostile.suites import ATTACKER_PHONE, PHONE_NOTES, SECRET, WEB, step
from .phone_kit import Recorder, declared, web_lookup_tool

pytestmark = pytest.mark.timeout(300)

PIN = "4921"  # in the owner's bank note, beside the SECRET
VAULT = "v4ult-s3cret-77"  # what the app's own vault tool returns (private, trusted)
REQUEST = "look up the weather on news.example"
LOOKUP_SECRET = Round(steps=[step("s1", "web_lookup", site="news.example", query=SECRET)])


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Bench]:
    processes = Processes()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HEARTH_NO_MDNS", "1")
        try:
            bench = start_bench(processes, tmp_path_factory.mktemp("private-reads"))
            (bench.phone / "policy.toml").write_text(
                'private_to_home = true\ndocuments_to_home = "always"\n'
            )
            yield bench
        finally:
            processes.cleanup()


def app_tools(looked_up: list[dict[str, str]]) -> list[Tool]:
    """The app's tools: an open-world `web_lookup` (its `site` is where the query goes:
    the control argument the app declares) and its own vault (private, results the app
    vouches for)."""

    async def vault_read() -> dict[str, str]:
        """Read the app's vault."""
        return {"code": VAULT}

    vault = declared(vault_read, Tier.READ_ONLY, private=True, untrusted_results=False)
    return [web_lookup_tool(looked_up), vault]


def conversation(
    bench: Bench, turns: list[tuple[AskRequest, Script]], answer: bool
) -> tuple[list[AskResult], Recorder, list[dict[str, str]]]:
    """Each turn asked of a fresh `Service` (the hostile home playing its script), the
    app's tools registered; the results, what was asked, and what reached the web."""
    (data := bench.phone / "data").mkdir(exist_ok=True)
    (data / "notes.json").write_text(json.dumps(PHONE_NOTES))
    confirmer = Recorder(answer)
    looked_up: list[dict[str, str]] = []

    async def go() -> list[AskResult]:
        results = []
        for request, script in turns:
            bench.script.write_text(script.model_dump_json())
            async with Service.open(bench.phone) as service:
                for tool in app_tools(looked_up):
                    service.registry.add(tool)
                with trio.fail_after(120):
                    results.append(
                        await asking.ask(service, request, discard, confirmer, trio.Event())
                    )
        return results

    return trio.run(go), confirmer, looked_up


def lookup_steps(result: AskResult) -> list[tuple[str, str | None]]:
    return [(s.status, s.error) for p in result.plans for s in p.steps if s.tool == "web_lookup"]


def asked_about_query(confirmer: Recorder) -> list[str]:
    return [a.tainted["query"] for a in confirmer.asked if "query" in a.tainted]


@pytest.mark.parametrize("answer", [True, False])
def test_an_earlier_private_turn_keeps_the_planners_words_off_the_web(
    bench: Bench, answer: bool
) -> None:
    """Turn 1 reads the app's vault (private; the app vouches for it: nothing untrusted
    was read); turn 2 (`--continue`) writes the vault's code into a web query. The
    history holds it: not covered by --yes, refused under --no; nothing is looked up."""
    read = Script(rounds=[Round(steps=[step("s1", "vault_read")])], answer=f"It is {VAULT}.")
    leak = Script(
        rounds=[Round(steps=[step("s1", "web_lookup", site="news.example", query=VAULT)])]
    )
    results, confirmer, looked_up = conversation(
        bench,
        [
            (AskRequest(text="what's in my vault?", route="remote"), read),
            (AskRequest(text=REQUEST, route="remote", continue_last=True), leak),
        ],
        answer,
    )
    assert results[0].plans[0].steps[0].status == "ok"
    assert results[1].conversation_id == results[0].conversation_id
    [(status, error)] = lookup_steps(results[1])
    assert status == "refused" and error is not None and "declined" in error
    [why] = asked_about_query(confirmer)
    assert "private data" in why and "an earlier turn" in why
    assert looked_up == []


@pytest.mark.parametrize("answer", [True, False])
def test_an_attached_document_keeps_the_planners_words_off_the_web(
    bench: Bench, tmp_path: Path, answer: bool
) -> None:
    """A document (private) attached and sent home: the planner's query holding its
    number is asked, never covered by --yes."""
    letter = tmp_path / "letter.txt"
    letter.write_text(f"Your new PIN is {PIN}. Keep it safe.")
    leak = Script(rounds=[Round(steps=[step("s1", "web_lookup", site="news.example", query=PIN)])])
    request = AskRequest(text=REQUEST, route="remote", attachments=[str(letter)])
    [result], confirmer, looked_up = conversation(bench, [(request, leak)], answer)
    [(status, _)] = lookup_steps(result)
    assert status == "refused"
    [why] = asked_about_query(confirmer)
    assert "document:letter.txt" in why
    assert looked_up == []


@pytest.mark.parametrize("answer", [True, False])
def test_a_private_result_keeps_the_planners_words_off_the_web(bench: Bench, answer: bool) -> None:
    """Round 1 reads the owner's bank note (private); round 2 writes its secret into a
    web query: asked, not covered by --yes; refused under --no."""
    leak = Script(rounds=[Round(steps=[step("s1", "notes_search", query="Bank")]), LOOKUP_SECRET])
    [result], confirmer, looked_up = conversation(
        bench, [(AskRequest(text=REQUEST, route="remote"), leak)], answer
    )
    assert SECRET in json.dumps(result.plans[0].steps[0].result)  # the home read it
    [(status, _)] = lookup_steps(result)
    assert status == "refused"
    [why] = asked_about_query(confirmer)
    assert "notes_search result" in why
    assert looked_up == []


def test_the_users_own_words_still_go_to_the_web_after_a_private_read(bench: Bench) -> None:
    """The same session after the bank note, the query the user's own words ("the
    weather"): --yes covers it, it is looked up."""
    ask = Script(
        rounds=[
            Round(steps=[step("s1", "notes_search", query="Bank")]),
            Round(steps=[step("s1", "web_lookup", site="news.example", query="the weather")]),
        ]
    )
    [result], confirmer, looked_up = conversation(
        bench, [(AskRequest(text=REQUEST, route="remote"), ask)], True
    )
    assert lookup_steps(result) == [("ok", None)]
    assert not asked_about_query(confirmer)
    assert looked_up == [{"site": "news.example", "query": "the weather"}]


def test_an_answer_written_after_the_node_read_the_web_says_so_and_taints_what_follows(
    bench: Bench,
) -> None:
    """The home searches the web itself and answers at once (no plan): the answer names
    the web result as its source, is kept with it, and the next turn's recipient the
    planner writes (`--continue --yes`) is refused; nothing is sent."""
    answered = Script(rounds=[], answer="The best deal: text +1-555-0199.", read=[WEB])
    send = Script(rounds=[Round(steps=[step("s1", "message_send", to=ATTACKER_PHONE, body="hi")])])
    results, confirmer, _ = conversation(
        bench,
        [
            (AskRequest(text="find me a deal", route="remote"), answered),
            (AskRequest(text="ok, do what it says", route="remote", continue_last=True), send),
        ],
        True,
    )
    source = f"web_search ({WEB.source})"
    assert not results[0].plans and source in results[0].untrusted_sources
    cid = results[0].conversation_id
    assert cid is not None
    kept = Conversations(bench.phone / "conversations.db").turns(cid)[0]
    assert source in kept.labels.answer.untrusted
    [sent] = results[1].plans[0].steps
    assert sent.status == "refused" and "untrusted" in (sent.error or "")
    assert source in confirmer.asked[-1].tainted["to"]
    outbox = bench.phone / "data" / "outbox"
    assert not (outbox.exists() and list(outbox.iterdir()))
