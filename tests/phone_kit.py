"""A phone's executor on real files, and asks of its Service, for tests."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from hearth.companion.ask import ask as service_ask
from hearth.companion.audit import AuditLog
from hearth.companion.confirm import Confirmation, Scripted
from hearth.companion.egress import Policy
from hearth.companion.events import AskRequest, Event
from hearth.companion.executor import Executor, SessionState
from hearth.companion.journal import Journal
from hearth.companion.results import AskResult
from hearth.companion.sdk import app_tool
from hearth.companion.service import Service
from hearth.companion.tools.builtin import register_builtin
from hearth.companion.tools.registry import Registry, Tier, Tool
from hearth.companion.tools.storage import PhoneData
from hearth.protocol.wire.messages import Plan, PlanStep, UntrustedInput


class Recorder(Scripted):
    """Answers like --yes/--no and remembers what it was asked."""

    def __init__(self, answer: bool | None) -> None:
        super().__init__(answer)
        self.asked: list[Confirmation] = []

    async def confirm(self, request: Confirmation) -> bool:
        self.asked.append(request)
        return await super().confirm(request)


class TerminalClosed(Exception):
    """The terminal went away while a confirmation was on screen."""


class ClosingTerminal:
    """Approves a plan's writes; closes while a step's confirmation is on screen."""

    async def confirm(self, request: Confirmation) -> bool:
        if request.kind == "plan":
            return True
        raise TerminalClosed


def stop_before(executor: Executor, plan: Plan, step_id: str, state: Any = None) -> None:
    """Run `plan` and stop it as a crash would, just before `step_id` starts: the plan
    is left in the journal for the next process to resume."""

    async def go() -> None:
        with trio.CancelScope() as scope:

            async def at(_plan: Plan, step: Any, outcome: Any) -> None:
                if step.id == step_id and outcome is None:
                    scope.cancel()
                    await trio.sleep(0)

            await executor.execute(plan, state if state is not None else SessionState(), on_step=at)

    trio.run(go)


def make_executor(
    home: Path, answer: bool | None = True, policy: Policy | None = None
) -> tuple[Executor, Recorder, PhoneData]:
    home.mkdir(parents=True, exist_ok=True)
    registry = Registry()
    data = PhoneData(home / "data")
    register_builtin(registry, data)
    confirmer = Recorder(answer)
    executor = Executor(registry, Journal(home / "journal.db"), AuditLog(home), confirmer, policy)
    return executor, confirmer, data


def make_plan(
    *steps: tuple[str, str, dict[str, Any], list[str]],
    untrusted: list[UntrustedInput] | None = None,
) -> Plan:
    now = time.time()
    return Plan(
        plan_id=uuid.uuid4().hex,
        signer="12D3KooWnode",
        audience="12D3KooWphone",
        session_id="s",
        round=1,
        request_id="r",
        request_hash=bytes(32),
        transcript_hash=bytes(32),
        issued_at=now,
        expires_at=now + 60,
        untrusted_inputs=untrusted or [],
        steps=[PlanStep(id=i, tool=t, arguments=a, depends_on=d) for i, t, a, d in steps],
    )


class Recorded:
    """An EventSink that keeps every event."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]


def ask(home: Path, request: AskRequest, events: Recorded, bound_s: float = 120.0) -> AskResult:
    """`request` asked of the Service of `home` in a fresh trio run, confirmations answered yes."""

    async def go() -> AskResult:
        async with Service.open(home) as service:
            with trio.fail_after(bound_s):
                return await service_ask(service, request, events, Scripted(True), trio.Event())

    return trio.run(go)


def declared(
    fn: Callable[..., Any],
    tier: Tier,
    *,
    private: bool = False,
    control_args: list[str] | None = None,
    untrusted_results: bool | None = None,
) -> Tool:
    """`fn` as an app's `@companion.tool` registers it, declaring only what is given (the
    SDK's strict defaults for the rest)."""
    return app_tool(
        fn,
        tier=tier,
        private=private,
        control_args=control_args,
        description=None,
        annotations=None,
        untrusted_results=untrusted_results,
    )


def web_lookup_tool(looked_up: list[dict[str, str]]) -> Tool:
    """An app's open-world `web_lookup`, each call recorded: its `site` (where the query
    goes) is the control argument the app declares."""

    async def web_lookup(site: str, query: str) -> str:
        """Look something up on a web site."""
        looked_up.append({"site": site, "query": query})
        return "Sunny."

    return declared(web_lookup, Tier.OPEN_WORLD_READ, control_args=["site"])
