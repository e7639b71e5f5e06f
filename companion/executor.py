"""The executor: a plan is a proposal; the phone decides what runs.

For every step: the tool must be in the phone's own manifest; `$ref` arguments may
point only at earlier steps listed in `depends_on`; the resolved arguments must fit
the local schema; then the tier decides (read-only runs, open-world reads may not
carry private values out, reversible writes need one approval per plan,
irreversible ones a confirmation per step). Taint (untrusted input) and privacy
labels flow through `$ref`; a tainted control argument of a sensitive tool forces a
confirmation naming its source. Every step is journaled before and after, and every
decision is audited.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Observation, Plan, PlanStep

from .audit import AuditLog, AuditRecord, args_hash
from .confirm import Confirmation, Confirmer
from .journal import Journal
from .tools.registry import Registry, Tier, Tool, ToolContext

REDACTED = {"redacted": "private to this phone"}


@dataclass
class Labels:
    """What a value carries: private data, untrusted input (with its sources)."""

    private: bool = False
    untrusted: set[str] = field(default_factory=set)

    def merge(self, other: Labels) -> None:
        self.private |= other.private
        self.untrusted |= other.untrusted


@dataclass
class SessionState:
    """Per plan session: has any untrusted input been seen (then planner-written
    control literals count as tainted), and each finished step's result and labels."""

    tainted_by: set[str] = field(default_factory=set)
    results: dict[str, tuple[Any, Labels]] = field(default_factory=dict)


@dataclass
class Policy:
    """The owner's rules the executor applies."""

    private_to_home: bool = False  # may private results go back to the owner's home node?


def _resolve(value: Any, step: PlanStep, state: SessionState, labels: Labels) -> Any:
    """Replace `{"$ref": "s1.result.a.0"}` with the value it names, collecting labels."""
    if isinstance(value, dict):
        if set(value) == {"$ref"} and isinstance(value["$ref"], str):
            source, _, path = value["$ref"].partition(".")
            if source not in step.depends_on:
                raise HearthError(
                    ErrorCode.PLAN_REJECTED,
                    f"{step.id}: $ref to {source!r}, which it does not depend on",
                )
            if source not in state.results:
                raise HearthError(ErrorCode.PLAN_REJECTED, f"{step.id}: {source} has no result")
            current, source_labels = state.results[source]
            labels.merge(source_labels)
            parts = path.split(".") if path else []
            if not parts or parts[0] != "result":
                raise HearthError(
                    ErrorCode.PLAN_REJECTED,
                    f"{step.id}: $ref must start with '<step>.result', not {value['$ref']!r}",
                )
            for part in parts[1:]:
                try:
                    current = current[int(part)] if isinstance(current, list) else current[part]
                except (KeyError, IndexError, ValueError, TypeError) as exc:
                    raise HearthError(
                        ErrorCode.PLAN_REJECTED, f"{step.id}: $ref {value['$ref']!r} names nothing"
                    ) from exc
            return current
        return {k: _resolve(v, step, state, labels) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, step, state, labels) for v in value]
    return value


def check_structure(plan: Plan) -> None:
    """Step ids unique; `depends_on` only earlier steps (so no cycles, no forward refs)."""
    seen: set[str] = set()
    for step in plan.steps:
        if step.id in seen:
            raise HearthError(ErrorCode.PLAN_REJECTED, f"step id {step.id} is used twice")
        for dep in step.depends_on:
            if dep not in seen:
                raise HearthError(
                    ErrorCode.PLAN_REJECTED,
                    f"{step.id} depends on {dep!r}, which is not an earlier step",
                )
        seen.add(step.id)


class Executor:
    """Runs verified plans on this phone."""

    def __init__(
        self,
        registry: Registry,
        journal: Journal,
        audit: AuditLog,
        confirmer: Confirmer,
        policy: Policy | None = None,
    ) -> None:
        self.registry = registry
        self.journal = journal
        self.audit = audit
        self.confirmer = confirmer
        self.policy = policy or Policy()

    async def execute(
        self, plan: Plan, state: SessionState, *, friend: bool = False, home: bool = True
    ) -> list[Observation]:
        """Run `plan` (already verified by signature and binding); one observation a step."""
        for source in plan.untrusted_inputs:
            state.tainted_by.add(f"{source.tool} ({source.source})")
        try:
            check_structure(plan)
            self.journal.accept(plan.plan_id, plan.signer, plan.request_id, plan.model_dump_json())
        except HearthError as exc:
            self._audit(plan, "-", {}, "refused", exc.message, "refused")
            return [
                Observation(step_id=s.id, status="refused", error=exc.message) for s in plan.steps
            ]
        approved_plan = False
        observations = []
        for step in plan.steps:
            obs, approved_plan = await self._step(plan, step, state, friend, home, approved_plan)
            observations.append(obs)
        self.journal.close_plan(plan.plan_id)
        return observations

    async def resume(self) -> list[str]:
        """Finish plans a crash interrupted: completed steps are not run again (their
        results are reused); a step caught mid-run is rerun only if its tool is
        idempotent, otherwise the user is asked. Returns the plan ids finished."""
        finished = []
        for plan_id, _signer, body in self.journal.unfinished():
            plan = Plan.model_validate_json(body)
            records = self.journal.steps(plan_id)
            state = SessionState()
            approved_plan = False
            for step in plan.steps:
                record = records.get(step.id)
                if record is not None and record.state != "running":
                    if record.state == "ok":
                        tool = self.registry.tools.get(step.tool)
                        state.results[step.id] = (
                            record.result,
                            Labels(private=bool(tool and tool.private)),
                        )
                        approved_plan |= bool(tool and tool.tier is Tier.REVERSIBLE)
                    continue
                if record is not None and not await self._may_rerun(plan, step):
                    continue
                _, approved_plan = await self._step(plan, step, state, False, True, approved_plan)
            self.journal.close_plan(plan_id)
            finished.append(plan_id)
        return finished

    async def _may_rerun(self, plan: Plan, step: PlanStep) -> bool:
        tool = self.registry.tools.get(step.tool)
        if tool is not None and tool.annotations.idempotent:
            return True
        question = Confirmation(
            "resume",
            plan.plan_id,
            f"Step {step.id} ({step.tool}) was "
            "interrupted and may or may not have happened. Run it again?",
            step.tool,
            dict(step.arguments),
        )
        if await self.confirmer.confirm(question):
            return True
        self.journal.finished(
            plan.plan_id, step.id, "refused", error="interrupted; not rerun", tool=step.tool
        )
        self._audit(plan, step.id, dict(step.arguments), "declined", "interrupted", "refused")
        return False

    async def _step(
        self,
        plan: Plan,
        step: PlanStep,
        state: SessionState,
        friend: bool,
        home: bool,
        approved_plan: bool,
    ) -> tuple[Observation, bool]:
        labels = Labels()
        args: dict[str, Any] = dict(step.arguments)
        try:
            tool = self.registry.get(step.tool)
            args = tool.validate(_resolve(args, step, state, labels))
            tainted = self._tainted_controls(tool, step, state, labels, friend)
            if tool.annotations.open_world and labels.private:
                raise HearthError(
                    ErrorCode.PLAN_REJECTED, f"{tool.name} would carry private values off the phone"
                )
            decision, approved_plan = await self._decide(
                plan, step, tool, args, tainted, approved_plan
            )
        except HearthError as exc:
            self._audit(plan, step.id, args, "refused", exc.message, "refused")
            self.journal.finished(
                plan.plan_id, step.id, "refused", error=exc.message, tool=step.tool
            )
            return Observation(step_id=step.id, status="refused", error=exc.message), approved_plan
        return await self._run(plan, step, tool, args, labels, decision, state, home), approved_plan

    def _tainted_controls(
        self, tool: Tool, step: PlanStep, state: SessionState, labels: Labels, friend: bool
    ) -> dict[str, str]:
        tainted: dict[str, str] = {}
        for arg in tool.control_args & set(step.arguments):
            raw = step.arguments[arg]
            if isinstance(raw, dict) and "$ref" in raw:
                if labels.untrusted:
                    tainted[arg] = ", ".join(sorted(labels.untrusted))
            elif friend:
                tainted[arg] = "written by a friend's planner"
            elif state.tainted_by:
                tainted[arg] = "planner-written after untrusted input: " + ", ".join(
                    sorted(state.tainted_by)
                )
        return tainted if tool.sensitive else {}

    async def _decide(
        self,
        plan: Plan,
        step: PlanStep,
        tool: Tool,
        args: dict[str, Any],
        tainted: dict[str, str],
        approved_plan: bool,
    ) -> tuple[str, bool]:
        ask = None
        if tainted or tool.tier is Tier.IRREVERSIBLE:
            ask = Confirmation(
                "step",
                plan.plan_id,
                f"Step {step.id}: {tool.description}",
                tool.name,
                args,
                tainted,
            )
        elif tool.tier is Tier.REVERSIBLE and not approved_plan:
            writes = ", ".join(
                s.tool
                for s in plan.steps
                if self.registry.tools.get(s.tool) is not None
                and self.registry.tools[s.tool].tier is Tier.REVERSIBLE
            )
            ask = Confirmation(
                "plan",
                plan.plan_id,
                f"Plan {plan.plan_id[:8]} changes data on this phone: {writes}",
            )
        if ask is None:
            return "run", approved_plan
        if not await self.confirmer.confirm(ask):
            reason = "declined" if not tainted else "declined (untrusted control argument)"
            raise HearthError(ErrorCode.PLAN_REJECTED, f"{step.id}: confirmation {reason}")
        return "confirmed", approved_plan or ask.kind == "plan"

    async def _run(
        self,
        plan: Plan,
        step: PlanStep,
        tool: Tool,
        args: dict[str, Any],
        labels: Labels,
        decision: str,
        state: SessionState,
        home: bool,
    ) -> Observation:
        self.journal.started(plan.plan_id, step.id, tool.name, args)
        try:
            result = await tool.run(args, ToolContext(f"{plan.plan_id}:{step.id}"))
            json.dumps(result)  # results must be JSON: they travel and are journaled
        except HearthError as exc:
            return self._failed(plan, step, args, decision, exc.message)
        except Exception as exc:  # a tool's own failure is an observation, not a crash
            return self._failed(plan, step, args, decision, f"{type(exc).__name__}: {exc}")
        self.journal.finished(plan.plan_id, step.id, "ok", result=result, tool=tool.name)
        self._audit(plan, step.id, args, decision, tool.tier.value, "ok")
        out_labels = Labels(private=labels.private or tool.private, untrusted=set(labels.untrusted))
        if tool.untrusted_results:
            out_labels.untrusted.add(f"{tool.name} result ({tool.source})")
            state.tainted_by.add(f"{tool.name} result ({tool.source})")
        state.results[step.id] = (result, out_labels)
        shareable = not out_labels.private or (home and self.policy.private_to_home)
        return Observation(
            step_id=step.id,
            status="ok",
            result=result if shareable else REDACTED,
            untrusted=bool(out_labels.untrusted),
            source=tool.source if tool.untrusted_results else None,
        )

    def _failed(
        self, plan: Plan, step: PlanStep, args: dict[str, Any], decision: str, error: str
    ) -> Observation:
        self.journal.finished(plan.plan_id, step.id, "error", error=error, tool=step.tool)
        self._audit(plan, step.id, args, decision, error, "error")
        return Observation(step_id=step.id, status="error", error=error)

    def _audit(
        self, plan: Plan, step: str, args: dict[str, Any], decision: str, reason: str, outcome: str
    ) -> None:
        self.audit.append(
            AuditRecord(plan.plan_id, plan.signer, step, args_hash(args), decision, reason, outcome)
        )
