"""A phone's executor on real files, for tests."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from hearth.companion.audit import AuditLog
from hearth.companion.confirm import Confirmation, Scripted
from hearth.companion.executor import Executor, Policy
from hearth.companion.journal import Journal
from hearth.companion.tools.builtin import register_builtin
from hearth.companion.tools.registry import Registry
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
