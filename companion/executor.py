"""The executor: a plan is a proposal; the phone decides what runs.

A plan must fit the limits the phone asked for (rounds, steps, deadline). For every
step: the tool must be in the phone's own manifest; `$ref` arguments may point only
at earlier steps of the same plan listed in `depends_on`; the resolved arguments
must fit the local schema; then the tier of the call decides (read-only runs,
open-world calls may not carry private values out, reversible writes need one
approval per plan, irreversible ones a confirmation per step).

Every value carries labels (`labels.py`): a literal the planner wrote after the
session saw untrusted input (or any literal of a friend's planner) is untrusted, unless
it is the user's own words (`intent.py`); a plan's literals are judged by what the
session had seen when the plan arrived (its steps are all written before any runs). A
session knows where its planner read private data (an earlier turn, a document, a
result it was shown): a literal the planner writes into an open-world tool after that may
carry the data out, and forces a confirmation, unless it is the user's own words; and of
the open-world calls planned after that, `--yes` covers one in the conversation,
whichever tool (a series of calls, each of the user's words, could spell the data out in
which words and which tools it picks), written in the user's words as typed, with no
list or object of more than one element. A selection the planner could not see made
(criteria it may not read, or a listing it may not read by other than the user's words)
is asked: whether its step ran would tell the planner. An
object's keys and the part of a result a `$ref` path picks are literals too. A `$ref`
carries the labels of the result it names; a `$ref` selection (`where`, `select`,
`pick`) picks an entry of a listing on the phone, and a key field of the owner's own
data selected by trusted criteria is not steered by the listing's labels. A result or
an error carries the labels of the arguments that produced it and of its tool. A
tainted control argument of a sensitive tool, or untrusted text in the content of a
write planned after untrusted input, forces a confirmation naming its sources. What
leaves the phone passes the egress (`egress.py`). Every step is journaled before and
after, with its labels, and every decision is audited.

Nothing leaves the journal open but a crash or a confirmation its confirmer did not
answer (it raised: consent decides what then becomes of the plan): whatever else fails
while a plan runs ends its step `error` with the failure's type and the plan goes on to
be closed. A value is nested no deeper than `results.MAX_DEPTH` wherever the phone
decodes, resolves or keeps it (a plan's argument, JSON text a `$ref` looks into, a
tool's result): deeper is refused, or, for a result, the step says it ran and keeps
none. A plan resumed after a crash runs no more steps once its request's deadline and a
grace have passed since it was accepted, whatever expiry its planner gave it.
"""

from __future__ import annotations

import contextlib
import json
import re
import time
import unicodedata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Literal

import anyio

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Limits, Observation, Plan, PlanStep, UntrustedInput

from .audit import AuditLog, AuditRecord, args_hash
from .confirm import Confirmation, Confirmer
from .egress import Destination, Egress, Policy, StepOutcome
from .intent import Intent, free_text, is_address, named
from .journal import Journal, SessionRecord, StepRecord
from .labels import CLEAN, Labels
from .results import MAX_DEPTH, nesting
from .tools.registry import BUILTIN, Registry, Tier, Tool, ToolContext
from .tools.selection import family

FRIEND = "a friend's planner"
CALL = "(the call)"  # what a confirmation names when a call without arguments is judged
CONTACTS = "contacts_search"  # the phone's own contacts, for the contacts a request names
MAX_CONTACT_WORDS = 32  # words of a request looked up in the contacts
MAX_DEADLINE_S = 3600.0  # a request's longest deadline (`Limits`): a plan without limits
PLAN_GRACE_S = 300.0  # a plan's lifetime: its request's deadline and this, at most
OnStep = Callable[[Plan, PlanStep, StepOutcome | None], Awaitable[None]]
"""Told of each step as it starts (outcome None) and as it ends (a service's events)."""


@dataclass
class SessionState:
    """One plan session: the untrusted sources it has seen (then planner-written
    literals count as tainted), where its planner read private data (then its literals
    in an open-world tool may carry it out), the limits the phone asked for, if any, and
    the user's own request (a value from it is the user's intent: see `intent.py`)."""

    tainted_by: set[str] = field(default_factory=set)
    read_private: set[str] = field(default_factory=set)
    limits: Limits | None = None
    started: float = field(default_factory=time.monotonic)
    steps_planned: int = 0
    request: str = ""
    intent: Intent | None = None  # the request with the contact entries it names, once looked up
    out_after_private: list[str] = field(default_factory=list)  # open-world calls let run
    # in plans written after the planner read private data: any call after the first is asked


@dataclass
class PlanRun:
    """One plan being executed: its finished steps' results with their labels."""

    plan: Plan
    session: SessionState
    friend: bool
    remote: bool  # planned off the phone (home or friend)
    results: dict[str, tuple[Any, Labels]] = field(default_factory=dict)
    approved: bool = False  # the plan's reversible writes were approved
    resumed_from: float | None = None  # resumed: when (wall clock) the plan was accepted
    planned: frozenset[str] = frozenset()  # the session's taint when the plan was written
    planned_private: frozenset[str] = frozenset()  # its private reads by then
    tools: dict[str, Tool] = field(default_factory=dict)  # of the steps run, by step id
    steered: set[str] = field(default_factory=set)  # steps whose arguments were steered
    egress: Egress | None = None  # what the planner may read of the outcomes
    lifetime_s: float | None = None  # from acceptance, whatever it says (`SessionRecord`)
    unanswered: str | None = None  # the step whose confirmation raised instead of answering

    def hides(self, labels: Labels) -> bool:
        """Whether the plan's planner may not read what carries `labels`."""
        return self.egress is not None and not self.egress.allows(labels, self.destination)

    def __post_init__(self) -> None:
        # every literal of a plan was written before any of its steps ran: the planner
        # read no more than the session had seen (and the plan says it read)
        self.planned = frozenset(self.session.tainted_by)
        self.planned_private = frozenset(self.session.read_private)

    @property
    def destination(self) -> Destination:
        """Where the plan's planner is: what it is shown of the results."""
        if self.friend:
            return Destination.FRIEND
        return Destination.HOME if self.remote else Destination.PHONE

    def lapsed(self) -> str | None:
        """Why a resumed plan may start no more tools: it expired, or the clock is
        earlier than when it was accepted (set back: how long has passed is unknown)."""
        if self.resumed_from is None:
            return None
        now = time.time()
        if now < self.resumed_from:
            return "the clock was set back since the plan was accepted"
        if now >= self.plan.expires_at:
            return "the plan expired before it could resume"
        if self.lifetime_s is not None and now >= self.resumed_from + self.lifetime_s:
            return (
                "the plan outlived its request's deadline (and a grace) before it could "
                "resume, whatever expiry it was given"
            )
        return None

    def literal_labels(self) -> Labels:
        """The labels of a value the planner wrote itself."""
        sources = set(self.planned) | ({FRIEND} if self.friend else set())
        return Labels(untrusted=frozenset(sources))

    def wrote_after_untrusted(self, gathered: Gathered) -> bool:
        """Whether the planner wrote (or picked) part of a value once it could have been
        steered: after untrusted input, or as a friend's planner. The user's own words
        are the user's, not the planner's."""
        if not (self.friend or self.planned):
            return False
        return gathered.choice or not all(self.intent.says(v) for v in gathered.literals)

    def wrote_text_after_untrusted(self, gathered: Gathered) -> bool:
        """Whether the planner wrote text (`free_text`) into a content argument once it
        could have been steered, other than the user's own words."""
        if not (self.friend or self.planned):
            return False
        return any(
            free_text(v) and not self.intent.says(v, content=True) for v in gathered.literals
        )

    def wrote_after_private(self, gathered: Gathered) -> bool:
        """Whether the planner wrote a value into the argument after it read private data,
        other than the user's own words as typed (the case of a letter, or an accent
        composed or not, would be a choice that may spell that data), or chose which part
        of a result it holds or how many elements a list or an object it built has (the
        position, the count and the booleans in them may spell it too)."""
        if not self.planned_private:
            return False
        return (
            gathered.choice
            or gathered.elements > 1
            or any(_carries(v) and not self.intent.says_as_typed(v) for v in gathered.literals)
        )

    @property
    def intent(self) -> Intent:
        return self.session.intent or Intent(self.session.request)


def _carries(value: Any) -> bool:
    """Whether a literal can hold data (a boolean, null or an empty string holds none)."""
    return not (value is None or isinstance(value, bool) or value == "")


@dataclass
class Gathered:
    """What resolving one argument found: the labels its `$ref`s carry (what the value
    holds), the untrusted sources that may have chosen it (`steered`: a `$ref` to
    untrusted data, unless the phone selected it by trusted criteria), the literals the
    planner wrote into it, and whether it picked a part of a result (`choice`)."""

    labels: Labels = CLEAN
    steered: set[str] = field(default_factory=set)
    literals: list[Any] = field(default_factory=list)
    elements: int = 0  # of the lists and objects the planner built: their number is a choice
    blind: list[str] = field(default_factory=list)  # selections the planner could not see
    choice: bool = False
    origins: list[str] = field(default_factory=list)  # where selected values came from

    @property
    def literal(self) -> bool:
        return self.choice or bool(self.literals)


SELECTION = ("$ref", "where", "select", "pick")
PICKS = ("only", "first", "last")
MAX_CRITERIA = 8
MAX_JSON_TEXT = 1 << 20  # characters of a result's JSON text a `$ref` may look into


def _rejected(step: PlanStep, message: str) -> HearthError:
    return HearthError(ErrorCode.PLAN_REJECTED, f"{step.id}: {message}")


def _resolve(value: Any, step: PlanStep, run: PlanRun, into: Gathered) -> Any:
    """Replace each `$ref` (a plain one, `{"$ref": "s1.result.a.0"}`, or a selection,
    see `_select`) with the value it names, gathering labels; collect literals."""
    if isinstance(value, dict):
        if "$ref" in value:
            return _reference(value, step, run, into)
        into.literals += list(value)  # its keys are text the planner wrote
        into.elements += len(value)
        return {k: _resolve(v, step, run, into) for k, v in value.items()}
    if isinstance(value, list):
        into.elements += len(value)
        return [_resolve(v, step, run, into) for v in value]
    into.literals.append(value)
    return value


def _source(ref: Any, step: PlanStep, run: PlanRun) -> tuple[str, list[str]]:
    """The step a `$ref` names (it must depend on it, and it must have a result) and
    the path after `<step>.result`."""
    if not isinstance(ref, str):
        raise _rejected(step, "a $ref must be a string")
    source, _, path = ref.partition(".")
    if source not in step.depends_on:
        raise _rejected(step, f"$ref to {source!r}, which it does not depend on")
    if source not in run.results:
        raise _rejected(step, f"{source} has no result")
    parts = path.split(".") if path else []
    if not parts or parts[0] != "result":
        raise _rejected(step, "$ref must start with '<step>.result'")
    return source, parts[1:]


def _walk(current: Any, parts: list[str], step: PlanStep, into: Gathered | None = None) -> Any:
    """The part of a result a path names; a string holding JSON is looked into as the
    value it holds (an MCP tool's result is often JSON text). A position in a list of
    more than one element is a choice (`into.choice`); the only element is none."""
    for part in parts:
        current = _decoded(current, step)
        if into is not None and isinstance(current, list) and len(current) > 1:
            into.choice = True
        try:
            current = current[int(part)] if isinstance(current, list) else current[part]
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            raise _rejected(step, "a $ref names nothing") from exc
    return current


def _decoded(value: Any, step: PlanStep) -> Any:
    """A string holding JSON as the value it holds (nested no deeper than `MAX_DEPTH`)."""
    if isinstance(value, str) and len(value) <= MAX_JSON_TEXT and value[:1] in ("[", "{"):
        try:
            decoded = json.loads(value)
        except RecursionError:  # nested past Python's stack
            decoded = _TOO_DEEP
        except ValueError:
            return value
        if decoded is _TOO_DEEP or nesting(decoded) > MAX_DEPTH:
            raise _rejected(step, f"a $ref looks into JSON nested deeper than {MAX_DEPTH} levels")
        return decoded
    return value


_TOO_DEEP = object()


def _reference(
    value: dict[str, Any], step: PlanStep, run: PlanRun, into: Gathered, *, criterion: bool = False
) -> Any:
    """A `$ref`'s value. A selection is trusted when the phone made it from the owner's own
    listing by trusted criteria; as an argument (not a `criterion` of another selection) only
    for a tool of the listing's own domain: an id means something only there, and whoever
    wrote the entry chose it (an invitation's UID is no message recipient)."""
    if not set(value) <= set(SELECTION):
        raise _rejected(step, "a $ref may have only where, select and pick beside it")
    source, parts = _source(value["$ref"], step, run)
    current, source_labels = run.results[source]
    into.labels |= source_labels  # before walking: "names nothing" is derived too
    if set(value) == {"$ref"}:
        into.steered |= source_labels.untrusted
        into.choice |= bool(parts)  # which part it picks is the planner's choice
        return _walk(current, parts, step)
    if "where" not in value:
        raise _rejected(step, "a $ref selection needs where")
    listing = _decoded(_walk(current, parts, step, into), step)  # a position: a choice
    if not isinstance(listing, list):
        raise _rejected(step, "a $ref selection must name a list")
    criteria = Gathered()
    try:
        where = _criteria(value["where"], step, run, criteria)
    finally:  # before selecting: "selects nothing" (or a criterion's error) is derived too
        into.labels |= criteria.labels
        into.blind += criteria.blind
    # whether it selects (its step runs, or is refused) would tell the planner what it may
    # not read: only the owner, asked, lets such a selection run
    if run.hides(criteria.labels):
        into.blind.append(f"selected from {source} by criteria its planner may not read")
    elif run.hides(source_labels) and not _said(run, value["where"], criteria):
        into.blind.append(
            f"selected from {source}, which its planner may not read, by criteria the "
            "request does not say"
        )
    pick = value.get("pick", "only")
    if pick not in PICKS:
        raise _rejected(step, f"pick must be one of {', '.join(PICKS)}")
    chosen = [e for e in listing if all(_field(e, k) == v for k, v in where.items())]
    if not chosen:
        raise _rejected(step, "a $ref selection selects nothing")
    if len(chosen) > 1 and pick == "only":
        raise _rejected(step, f"a $ref selection selects {len(chosen)} elements; pick one")
    element = chosen[-1] if pick == "last" else chosen[0]
    criteria.choice |= len(chosen) > 1  # which of them: the planner's pick
    select = value.get("select")
    if select is not None and not (isinstance(select, str) and select):
        raise _rejected(step, "select must be a field name (a dotted path)")
    picked = element if select is None else _walk(element, select.split("."), step)
    tool = run.tools.get(source)
    trusted = (
        tool is not None
        and not tool.annotations.open_world  # the owner's own data, not the web's
        and select in tool.key_fields
        and (criterion or _domain(tool) == _domain(run.tools.get(step.id)))
        and source not in run.steered  # a listing narrowed by steered arguments chooses
        and not criteria.steered
        and not run.wrote_after_untrusted(criteria)
    )
    if trusted:
        assert tool is not None and select is not None
        into.origins.append(
            f"{select} of the {tool.name} entry ({source}) whose {', '.join(sorted(where))} "
            "the request named"
        )
    else:
        into.steered |= source_labels.untrusted | criteria.steered
        into.literals += criteria.literals
        into.choice |= criteria.choice
    return picked


def _said(run: PlanRun, where: dict[str, Any], criteria: Gathered) -> bool:
    """Whether a selection's criteria are all literals of the user's own words (no `$ref`:
    a value a page or the planner chose would be a guess the selection answers)."""
    literal = not any(isinstance(wanted, dict) for wanted in where.values())
    return literal and all(run.intent.says(v) for v in criteria.literals)


def _domain(tool: Tool | None) -> str | None:
    """Where a tool's ids mean something: its MCP server, or a built-in's family
    (`calendar` of `calendar_list` and `calendar_delete`)."""
    if tool is None:
        return None
    return family(tool.name) if tool.source == BUILTIN else tool.source


def _steers(run: PlanRun, g: Gathered) -> bool:
    """Whether an argument untrusted input could have chosen (an empty string chooses
    nothing: a listing of everything)."""
    return bool(g.steered) or (g.literals != [""] and run.wrote_after_untrusted(g))


def _criteria(where: Any, step: PlanStep, run: PlanRun, into: Gathered) -> dict[str, Any]:
    """A selection's `where`: field paths to the values they must equal (a JSON scalar,
    or a `$ref` to one: plain, or a selection, whose trust the criterion then has);
    strings compare NFC-normalised, case and all."""
    if not isinstance(where, dict) or not 1 <= len(where) <= MAX_CRITERIA:
        raise _rejected(step, f"where must map 1 to {MAX_CRITERIA} fields to values")
    out = {}
    for key, wanted in where.items():
        if not key or len(key) > 200:
            raise _rejected(step, "where: a field name must be 1 to 200 characters")
        if isinstance(wanted, dict) and "$ref" in wanted:  # a plain $ref or a selection
            wanted = _reference(wanted, step, run, into, criterion=True)
        elif isinstance(wanted, str | int | float | bool):
            into.literals.append(wanted)
        else:
            raise _rejected(step, "where: a value must be a string, number, boolean or $ref")
        if not isinstance(wanted, str | int | float | bool):
            raise _rejected(step, "where: a $ref must name a string, number or boolean")
        out[key] = _normal(wanted)
    return out


def _field(element: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(element, dict) or part not in element:
            return _MISSING
        element = element[part]
    return _normal(element)


_MISSING = object()


def _normal(value: Any) -> Any:
    return unicodedata.normalize("NFC", value) if isinstance(value, str) else value


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


def check_limits(plan: Plan, state: SessionState) -> None:
    """The plan fits what the phone asked for: rounds, steps (per plan and in total,
    as the node counts them) and the deadline; `plan_rejected` otherwise."""
    limits = state.limits
    if limits is None:
        return
    if plan.round > limits.max_rounds:
        raise HearthError(
            ErrorCode.PLAN_REJECTED,
            f"round {plan.round} is beyond the {limits.max_rounds} rounds this phone asked for",
        )
    if state.steps_planned + len(plan.steps) > limits.max_steps:
        raise HearthError(
            ErrorCode.PLAN_REJECTED,
            f"{state.steps_planned + len(plan.steps)} steps in all are beyond the "
            f"{limits.max_steps} this phone asked for",
        )
    if _past_deadline(state):
        raise HearthError(
            ErrorCode.PLAN_REJECTED, f"the plan came after the {limits.deadline_s:g} s deadline"
        )


def _past_deadline(state: SessionState) -> bool:
    limits = state.limits
    return limits is not None and time.monotonic() - state.started > limits.deadline_s


def read_by_node(inputs: list[UntrustedInput]) -> set[str]:
    """The untrusted sources a node says its planner read itself (a web result, a
    document), as the session names them (a document as the prompt does)."""
    return {
        f"document:{s.source}" if s.tool == "document" else f"{s.tool} ({s.source})" for s in inputs
    }


def _lifetime(limits: Limits | None) -> float:
    """How long after its acceptance a plan may still run: its request's deadline (the
    longest a request has, without limits) and a grace, whatever expiry it was given."""
    return (limits.deadline_s if limits else MAX_DEADLINE_S) + PLAN_GRACE_S


def _name(exc: BaseException) -> str:
    """A failure as it may be told: its type (its text may echo a value)."""
    return type(exc).__name__


def _tool_labels(tool: Tool) -> Labels:
    """What a tool adds to whatever it returns."""
    where = "" if tool.source == BUILTIN else f" ({tool.source})"
    untrusted = {f"{tool.name} result{where}"} if tool.untrusted_results else set()
    return Labels(
        private=tool.private,
        untrusted=frozenset(untrusted),
        private_from=frozenset({tool.source} if tool.private else ()),
    )


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
        self.egress = Egress(policy or Policy())
        self.not_rerun: list[str] = []  # tools of interrupted steps `resume` did not rerun

    async def execute(
        self,
        plan: Plan,
        state: SessionState,
        *,
        friend: bool = False,
        home: bool = True,
        on_step: OnStep | None = None,
    ) -> list[Observation]:
        """Run `plan` (already verified by signature and binding); one observation a
        step, as the plan's signer may learn it (`home=False`: nobody off the phone).
        A plan beyond the session's limits raises `plan_rejected` and nothing runs."""
        destination = (
            Destination.FRIEND if friend else Destination.HOME if home else Destination.PHONE
        )
        outcomes = await self.run_plan(
            plan, state, friend=friend, remote=friend or home, on_step=on_step
        )
        return [self.egress.observation(o, destination) for o in outcomes]

    async def run_plan(
        self,
        plan: Plan,
        state: SessionState,
        *,
        friend: bool = False,
        remote: bool = True,
        on_step: OnStep | None = None,
    ) -> list[StepOutcome]:
        """Run `plan`; the outcomes keep full values and their labels (nothing here
        has left the phone yet). A plan from off the phone (`remote`) may not use a
        tool the owner keeps off remote planners."""
        try:
            check_limits(plan, state)
        except HearthError as exc:
            self._audit(plan, "-", {}, "refused", exc.message, "refused")
            raise
        state.steps_planned += len(plan.steps)
        state.tainted_by |= read_by_node(plan.untrusted_inputs)
        await self._know_intent(state)
        run = PlanRun(plan, state, friend, remote, egress=self.egress)
        try:
            check_structure(plan)
            session = SessionRecord(
                tainted_by=frozenset(state.tainted_by),
                read_private=frozenset(state.read_private),
                friend=friend,
                lifetime_s=_lifetime(state.limits),
            )
            run.lifetime_s = session.lifetime_s
            for step in plan.steps:  # the journal keeps the plan: its serialiser's depth
                for name, raw in step.arguments.items():
                    if nesting(raw) > MAX_DEPTH:
                        raise _rejected(step, f"{name} is nested deeper than {MAX_DEPTH} levels")
            self.journal.accept(
                plan.plan_id, plan.signer, plan.request_id, plan.model_dump_json(), session
            )
        except HearthError as exc:
            self._audit(plan, "-", {}, "refused", exc.message, "refused")
            return [StepOutcome(s.id, "refused", CLEAN, error=exc.message) for s in plan.steps]
        outcomes = []
        try:
            for step in plan.steps:
                if on_step is not None:
                    await on_step(plan, step, None)
                outcomes.append(await self._guarded(run, step))
                if on_step is not None:
                    await on_step(plan, step, outcomes[-1])
        except BaseException as exc:  # nothing leaves the plan open: it is closed, typed
            if run.unanswered is not None:
                self._refuse_unanswered(run)
            elif isinstance(exc, Exception):
                self._abandon(plan.plan_id, plan.steps, f"the plan stopped ({_name(exc)})")
            raise
        self.journal.close_plan(plan.plan_id)
        return outcomes

    def _refuse_unanswered(self, run: PlanRun) -> None:
        """A confirmation nobody answered (Ctrl-C, a closed terminal or connection): its
        step is refused and the plan closed, so no later request runs what this one was
        asked and did not approve."""
        plan, step_id = run.plan, run.unanswered
        tool = next((s.tool for s in plan.steps if s.id == step_id), "")
        reason = f"{step_id}: the confirmation was not answered (the request that asked ended)"
        self.journal.finished(plan.plan_id, str(step_id), "refused", error=reason, tool=tool)
        self._audit(plan, str(step_id), {}, "declined", reason, "refused")
        self._abandon(plan.plan_id, plan.steps, reason)
        self.journal.close_plan(plan.plan_id)

    async def _guarded(self, run: PlanRun, step: PlanStep) -> StepOutcome:
        """`_step`, whatever fails on the phone: the step then ends `error` with the
        reason (the plan goes on, and is closed), never an open plan and a crash; only a
        confirmation left unanswered (its confirmer raised) goes up as it came."""
        try:
            return await self._step(run, step)
        except Exception as exc:
            if run.unanswered is not None:
                raise
            reason = f"{step.id}: the phone failed on this step ({_name(exc)})"
            labels = reduce(  # derived from what its arguments name, as far as known
                Labels.__or__,
                (run.results[d][1] for d in step.depends_on if d in run.results),
                CLEAN,
            )
            self._audit(run.plan, step.id, {}, "failed", reason, "error")
            self.journal.finished(
                run.plan.plan_id, step.id, "error", error=reason, tool=step.tool, labels=labels
            )
            return self._outcome(run, step, StepOutcome(step.id, "error", labels, error=reason))

    def _abandon(self, plan_id: str, steps: list[PlanStep], reason: str) -> None:
        """Close a plan a failure stopped: a step caught mid-run ends `error` (it may or
        may not have happened), a step not started `skipped`, both with `reason`."""
        states = self.journal.states(plan_id)
        tools = {s.id: s.tool for s in steps}
        for step_id, state in states.items():
            if state == "running":
                self.journal.finished(
                    plan_id,
                    step_id,
                    "error",
                    error=f"interrupted (it may or may not have happened): {reason}",
                    tool=tools.get(step_id, ""),
                )
        for step in steps:
            if step.id not in states:
                self.journal.finished(
                    plan_id, step.id, "skipped", error=reason, tool=step.tool, labels=CLEAN
                )
        self.journal.close_plan(plan_id)

    async def resume(self) -> list[str]:
        """Finish plans a crash interrupted, with the labels and session taint they had:
        completed steps are not run again (their results are reused); a step caught
        mid-run is rerun only if its tool is idempotent, otherwise the user is asked.
        A plan past its expiry or its lifetime (its request's deadline and a grace: the
        phone's own bound; checked before each step and again before its tool runs: a
        confirmation may wait long), or accepted at a time later than the clock now says,
        runs no more steps: they are journaled `skipped`. A plan that cannot resume (any
        failure but an unanswered confirmation) is closed, never left to fail again.
        Returns the plan ids finished."""
        finished = []
        for plan_id, session, body, accepted_at in self.journal.unfinished():
            run: PlanRun | None = None
            try:
                plan = Plan.model_validate_json(body)
                run = PlanRun(
                    plan,
                    SessionState(
                        tainted_by=set(session.tainted_by), read_private=set(session.read_private)
                    ),
                    session.friend,
                    remote=plan.signer != plan.audience,  # a local plan is the phone's own
                    resumed_from=accepted_at,
                    egress=self.egress,
                    lifetime_s=session.lifetime_s,
                )
                await self._resume(run, self.journal.steps(plan_id))
            except BaseException as exc:
                if run is not None and run.unanswered is not None:
                    self._refuse_unanswered(run)
                    raise
                if not isinstance(exc, Exception):
                    raise
                steps = run.plan.steps if run is not None else []
                self._abandon(plan_id, steps, f"the plan could not resume ({_name(exc)})")
            self.journal.close_plan(plan_id)
            finished.append(plan_id)
        return finished

    async def _resume(self, run: PlanRun, records: dict[str, StepRecord]) -> None:
        """Run what is left of one interrupted plan (see `resume`)."""
        plan = run.plan
        for step in plan.steps:
            record = records.get(step.id)
            if record is not None and record.state != "running":
                run.session.tainted_by |= record.labels.untrusted  # errors taint too
                self._read(run, step.tool, record.labels)
                if record.state == "ok":
                    run.results[step.id] = (record.result, record.labels)
                    tool = self.registry.tools.get(step.tool)
                    run.approved |= bool(tool and tool.tier is Tier.REVERSIBLE)
                    if tool is not None:
                        run.tools[step.id] = tool
                continue
            if (lapsed := run.lapsed()) is not None:
                cut = "interrupted (it may or may not have happened); " if record else ""
                self._skip(plan, step, cut + lapsed)
                continue
            if record is not None and not await self._may_rerun(run, step):
                continue
            await self._guarded(run, step)

    async def _ask(self, run: PlanRun, step: PlanStep, question: Confirmation) -> bool:
        """The confirmer's answer; one that raises instead (Ctrl-C, a closed connection)
        leaves the step unanswered: the plan is then refused and closed."""
        try:
            return await self.confirmer.confirm(question)
        except HearthError:  # a typed answer of its own: the step is refused (`_step`)
            raise
        except BaseException:
            run.unanswered = step.id
            raise

    async def _may_rerun(self, run: PlanRun, step: PlanStep) -> bool:
        plan = run.plan
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
        if await self._ask(run, step, question):
            return True
        self.journal.finished(
            plan.plan_id, step.id, "refused", error="interrupted; not rerun", tool=step.tool
        )
        self._audit(plan, step.id, dict(step.arguments), "declined", "interrupted", "refused")
        self.not_rerun.append(step.tool)
        return False

    async def _step(self, run: PlanRun, step: PlanStep) -> StepOutcome:
        plan = run.plan
        if _past_deadline(run.session):
            return self._skip(plan, step, "the request's deadline passed")
        gathered: dict[str, Gathered] = {}
        args: dict[str, Any] = dict(step.arguments)
        try:
            tool = self.registry.get(step.tool)
            run.tools[step.id] = tool
            if run.remote and tool.name in self.egress.policy.never_remote_tools:
                raise HearthError(
                    ErrorCode.PLAN_REJECTED,
                    f"{step.id}: the owner keeps {tool.name} off remote planners",
                )
            resolved = {}
            for name, raw in step.arguments.items():
                if nesting(raw) > MAX_DEPTH:  # checked at acceptance; a resumed plan too
                    raise _rejected(step, f"{name} is nested deeper than {MAX_DEPTH} levels")
                resolved[name] = _resolve(raw, step, run, gathered.setdefault(name, Gathered()))
                if nesting(resolved[name]) > MAX_DEPTH:  # what its `$ref`s name, in it
                    raise _rejected(step, f"{name} resolves deeper than {MAX_DEPTH} levels")
            # off the event loop: a server's schema may take up to the validation deadline
            args = await anyio.to_thread.run_sync(tool.validate, resolved)
            arg_labels = {
                name: g.labels | (run.literal_labels() if run.wrote_after_untrusted(g) else CLEAN)
                for name, g in gathered.items()
            }
            labels = reduce(Labels.__or__, arg_labels.values(), CLEAN)
            if any(_steers(run, g) for g in gathered.values()):
                run.steered.add(step.id)
            if tool.annotations.open_world:
                self.egress.tool_call(tool.name, self._outgoing(tool, step, gathered))
            tier = tool.tier_for(args)
            decision = await self._decide(
                run, step, tool, tier, args, self._tainted(tool, tier, run, gathered)
            )
            if tool.annotations.open_world and run.planned_private:
                run.session.out_after_private.append(tool.name)
        except HearthError as exc:
            # the refusal is derived from the arguments as far as they were resolved
            labels = reduce(Labels.__or__, (g.labels for g in gathered.values()), CLEAN)
            self._audit(plan, step.id, args, "refused", exc.message, "refused")
            self.journal.finished(
                plan.plan_id, step.id, "refused", error=exc.message, tool=step.tool, labels=labels
            )
            return self._outcome(
                run, step, StepOutcome(step.id, "refused", labels, error=exc.message)
            )
        return await self._run(run, step, tool, tier, args, labels, decision)

    @staticmethod
    def _outgoing(tool: Tool, step: PlanStep, gathered: dict[str, Gathered]) -> Labels:
        """The labels of what an open-world call carries out. An argument that is, whole,
        a key field the phone selected from this same server's listing by trusted
        criteria (a booking's id) goes back to the server that listed it: it learns
        nothing it did not hold. Every other private value stays private."""
        out = CLEAN
        for name, g in gathered.items():
            raw = step.arguments.get(name)
            whole_key = isinstance(raw, dict) and "where" in raw and bool(g.origins)
            returned = whole_key and tool.source != BUILTIN
            out |= g.labels.returned_to(tool.source) if returned else g.labels
        return out

    def _skip(self, plan: Plan, step: PlanStep, reason: str) -> StepOutcome:
        self.journal.finished(
            plan.plan_id, step.id, "skipped", error=reason, tool=step.tool, labels=CLEAN
        )
        return StepOutcome(step.id, "skipped", CLEAN, error=reason)

    def _tainted(
        self, tool: Tool, tier: Tier, run: PlanRun, gathered: dict[str, Gathered]
    ) -> dict[str, str]:
        """Arguments untrusted input could have chosen, each with its sources: control
        arguments of a sensitive tool, the content of a write planned after untrusted
        input that carries untrusted text, what the planner wrote into an open-world
        tool after it read private data, and a selection made blind (`Gathered.blind`)."""
        tainted = {name: list(g.blind) for name, g in gathered.items() if g.blind}
        if tool.sensitive:
            for arg in sorted(tool.control_args & set(gathered)):
                if steered := self._steered(run, gathered[arg]):
                    tainted.setdefault(arg, []).append(steered)
        writes = tier in (Tier.REVERSIBLE, Tier.IRREVERSIBLE)
        if writes and (run.planned or run.friend):
            for arg in sorted(set(gathered) - tool.control_args):
                g = gathered[arg]
                reasons: list[str] = []
                if g.labels.untrusted:
                    reasons.append("holds text from " + g.labels.sources())
                if run.wrote_text_after_untrusted(g):
                    reasons.append(self._writer(run))
                if reasons:
                    tainted.setdefault(arg, []).append("content " + "; ".join(reasons))
        if tool.annotations.open_world and run.planned_private:
            read = ", ".join(sorted(run.planned_private))
            for arg in sorted(gathered):
                if run.wrote_after_private(gathered[arg]):
                    tainted.setdefault(arg, []).append(
                        f"written by the planner after it read private data ({read})"
                    )
            if earlier := run.session.out_after_private:
                for arg in sorted(gathered) or [CALL]:
                    tainted.setdefault(arg, []).append(
                        f"another open-world call ({tool.name}, after {earlier[0]}) planned "
                        f"after the planner read private data ({read}): which calls it "
                        "makes may spell that data out"
                    )
        return {arg: "; ".join(reasons) for arg, reasons in tainted.items()}

    def _steered(self, run: PlanRun, g: Gathered) -> str:
        reasons = []
        if g.steered:
            reasons.append("from " + ", ".join(sorted(g.steered)))
        if run.wrote_after_untrusted(g):
            reasons.append(self._writer(run))
        return "; ".join(reasons)

    @staticmethod
    def _writer(run: PlanRun) -> str:
        if run.friend:
            return f"written by {FRIEND}"
        return "written by the planner after it read " + ", ".join(sorted(run.planned))

    async def _know_intent(self, state: SessionState) -> None:
        """The session's `Intent`: the request, and the phone numbers and e-mail addresses
        of the contacts it names, from the phone's own contacts (looked up once)."""
        if state.intent is not None and state.intent.request == state.request:
            return
        entries: set[str] = set()
        lookup = self.registry.tools.get(CONTACTS)
        if state.request and lookup is not None and lookup.source == BUILTIN:
            found: dict[str, dict[str, Any]] = {}  # each contact once, however often found
            words = {w for w in re.findall(r"\w{3,}", state.request)}
            for word in sorted(words)[:MAX_CONTACT_WORDS]:
                with contextlib.suppress(Exception):  # no contacts: no entries
                    for entry in await lookup.run({"query": word}, ToolContext("intent")):
                        found[json.dumps(entry, sort_keys=True)] = entry
            by_name = {e["name"]: e for e in found.values()}  # `named`: names no one shares
            for name in named(state.request, [e["name"] for e in found.values()]):
                entries |= {*by_name[name].get("phone", []), *by_name[name].get("email", [])}
        addresses = frozenset(e for e in entries if isinstance(e, str) and is_address(e))
        state.intent = Intent(state.request, addresses)

    async def _decide(
        self,
        run: PlanRun,
        step: PlanStep,
        tool: Tool,
        tier: Tier,
        args: dict[str, Any],
        tainted: dict[str, str],
    ) -> str:
        plan = run.plan
        ask = None
        if tainted or tier is Tier.IRREVERSIBLE:
            ask = Confirmation(
                "step",
                plan.plan_id,
                f"Step {step.id} (round {plan.round}): {tool.description}"
                + (" It replaces existing data." if tier is not tool.tier else ""),
                tool.name,
                args,
                tainted,
            )
        elif tier is Tier.REVERSIBLE and not run.approved:
            writes = ", ".join(
                s.tool
                for s in plan.steps
                if s.tool in self.registry.tools
                and self.registry.tools[s.tool].tier is Tier.REVERSIBLE
            )
            ask = Confirmation(
                "plan",
                plan.plan_id,
                f"Plan {plan.plan_id[:8]} changes data on this phone: {writes}",
            )
        if ask is None:
            return "run"
        if not await self._ask(run, step, ask):
            reason = "declined" if not tainted else "declined (untrusted argument)"
            raise HearthError(ErrorCode.PLAN_REJECTED, f"{step.id}: confirmation {reason}")
        run.approved |= ask.kind == "plan"
        return "confirmed"

    async def _run(
        self,
        run: PlanRun,
        step: PlanStep,
        tool: Tool,
        tier: Tier,
        args: dict[str, Any],
        labels: Labels,
        decision: str,
    ) -> StepOutcome:
        plan = run.plan
        # a built-in tool's errors name arguments, never values: they carry the arguments'
        # labels; a tool that speaks for itself (MCP) labels its errors as its results
        error_labels = labels if tool.source == BUILTIN else labels | _tool_labels(tool)
        labels |= _tool_labels(tool)
        if (lapsed := run.lapsed()) is not None:  # while a confirmation waited
            return self._skip(plan, step, lapsed)
        self.journal.started(plan.plan_id, step.id, tool.name, args)
        try:
            result = await tool.run(args, ToolContext(f"{plan.plan_id}:{step.id}"))
            if nesting(result) > MAX_DEPTH:  # what it did is said; its result is not kept
                detail = f"it ran, but its result is nested deeper than {MAX_DEPTH} levels"
                return self._failed(run, step, args, error_labels, decision, detail, detail)
            json.dumps(result)  # results must be JSON: they travel and are journaled
        except HearthError as exc:  # a tool that ran out of time (an MCP call) says so
            status: Literal["error", "timed_out"] = (
                "timed_out" if exc.code is ErrorCode.TIMED_OUT else "error"
            )
            return self._failed(
                run, step, args, error_labels, decision, exc.message, exc.message, status
            )
        except Exception as exc:  # a tool's own failure is an observation, not a crash
            detail = f"{type(exc).__name__}: {exc}"  # kept on the phone: may echo arguments
            return self._failed(run, step, args, error_labels, decision, type(exc).__name__, detail)
        self.journal.finished(
            plan.plan_id, step.id, "ok", result=result, tool=tool.name, labels=labels
        )
        self._audit(plan, step.id, args, decision, tier.value, "ok")
        run.results[step.id] = (result, labels)
        source = tool.source if tool.untrusted_results else None
        return self._outcome(
            run, step, StepOutcome(step.id, "ok", labels, result=result, source=source)
        )

    def _failed(
        self,
        run: PlanRun,
        step: PlanStep,
        args: dict[str, Any],
        labels: Labels,
        decision: str,
        error: str,
        detail: str,
        status: Literal["error", "timed_out"] = "error",
    ) -> StepOutcome:
        plan = run.plan
        self.journal.finished(
            plan.plan_id, step.id, status, error=detail, tool=step.tool, labels=labels
        )
        self._audit(plan, step.id, args, decision, detail, status)
        return self._outcome(run, step, StepOutcome(step.id, status, labels, error=error))

    def _outcome(self, run: PlanRun, step: PlanStep, outcome: StepOutcome) -> StepOutcome:
        """Untrusted text taints the rest of the session (also the rest of this plan:
        the safe side, whether or not the planner gets to read it); a private value the
        planner is shown is a private read of the session."""
        run.session.tainted_by |= outcome.labels.untrusted
        self._read(run, step.tool, outcome.labels)
        return outcome

    def _read(self, run: PlanRun, tool: str, labels: Labels) -> None:
        """A step's result (or error) of `labels` as its planner is shown it: a private
        value it may see is a private read of the session."""
        if labels.private and self.egress.allows(labels, run.destination):
            run.session.read_private.add(f"{tool} result")

    def _audit(
        self, plan: Plan, step: str, args: dict[str, Any], decision: str, reason: str, outcome: str
    ) -> None:
        self.audit.append(
            AuditRecord(plan.plan_id, plan.signer, step, args_hash(args), decision, reason, outcome)
        )
