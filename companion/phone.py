"""The phone: identity, policy, tools, executor, local model and the node client, wired.

`ask` routes a request, plans it (remotely on the paired home node, or on the
phone's own model), runs every plan through the executor, and returns the
`hearth ask --json` object.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import anyio

from hearth.protocol.console import read_toml, reason_about
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import (
    ChatMessage,
    DeviceContext,
    Observation,
    Plan,
    PlanRequest,
    Token,
)

from .audit import AuditLog, AuditRecord
from .config import secure_home
from .confirm import Confirmer
from .executor import Executor, Policy, SessionState
from .journal import Journal
from .local import LocalModel
from .policy import load_policy
from .router import Decision, Route, RouteInput, decide
from .settings import load_settings
from .tools.builtin import read_device_status, register_builtin
from .tools.mcp import McpServer, mounted, servers_of
from .tools.registry import Registry
from .tools.storage import PhoneData

CONNECT_TIMEOUT_S = 3.0
KEEPALIVE_BOUND_S = 3.0
MDNS_WAIT_S = 1.0  # answers on a LAN take ~0.1-0.3 s; the fallback should not wait longer
OnToken = Callable[[str], Awaitable[None]]


def plan_view(plan: Plan, observations: list[Observation]) -> dict[str, Any]:
    """One plan of `hearth ask --json`: each step with its own round's observation (step
    ids repeat across rounds, so nothing is matched across plans); a step that is not
    ok says why."""
    not_run = Observation(step_id="-", status="skipped", error="not run")
    steps = []
    for i, s in enumerate(plan.steps):
        obs = observations[i] if i < len(observations) else not_run
        steps.append(
            {
                "id": s.id,
                "round": plan.round,
                "tool": s.tool,
                "arguments": s.arguments,
                "status": obs.status,
                "result": obs.result,
                "error": obs.error if obs.status == "ok" else obs.error or obs.status,
            }
        )
    return {"plan_id": plan.plan_id, "signer": plan.signer, "round": plan.round, "steps": steps}


def read_config(home: Path) -> dict[str, Any]:
    """The phone's `config.toml` (model path, MCP servers)."""
    return read_toml(home / "config.toml")


def load_tools(home: Path, config: dict[str, Any]) -> tuple[Registry, list[McpServer]]:
    """The built-in tools, and the MCP servers the config lists (mounted while running)."""
    registry = Registry()
    register_builtin(registry, PhoneData(home / "data"))
    return registry, servers_of(config.get("mcp", []), str(home / "config.toml"))


def device_context() -> DeviceContext:
    """What the phone says about itself (battery, network), where it can tell."""
    status = read_device_status()
    network = status["network"] if status["network"] in ("wifi", "cellular") else "unknown"
    return DeviceContext(
        battery=status["battery"] if isinstance(status["battery"], int) else None,
        charging=status["charging"] if isinstance(status["charging"], bool) else None,
        network=network,
        metered={"wifi": False, "cellular": True}.get(network),
    )


class Phone:
    """Everything `hearth` needs for one home directory."""

    def __init__(self, home: Path, confirmer: Confirmer) -> None:
        from hearth.protocol.transport.keys import load_identity
        from hearth.protocol.wire.identity import peer_id_of

        self.home = home
        secure_home(home)
        self.key = load_identity(home)
        self.peer_id = peer_id_of(self.key)
        self.policy = load_policy(home)
        config = read_config(home)
        self.registry, self.mcp_servers = load_tools(home, config)
        self.journal = Journal(home / "journal.db")
        self.audit = AuditLog(home)
        self.executor = Executor(
            self.registry,
            self.journal,
            self.audit,
            confirmer,
            Policy(
                private_to_home=self.policy.private_to_home,
                never_remote_tools=frozenset(self.policy.never_remote_tools),
            ),
        )
        self.settings = load_settings(home)
        self.local = LocalModel(Path(self.settings.model) if self.settings.model else None)
        self.device = device_context()

    def remote_tools(self, text: str) -> list[Any]:
        """The request's candidate tools among those the policy lets out (all of them
        when the text points to none; the egress drops never-remote ones again)."""
        allowed = set(self.registry.tools) - set(self.policy.never_remote_tools)
        return self.registry.specs(set(self.registry.candidates(text, allowed).offered))

    def _host(self):  # type: ignore[no-untyped-def]
        from hearth.protocol.transport.host import host_for_home, quiet_libp2p

        quiet_libp2p()
        return host_for_home(self.home)

    async def ask(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """`_ask` with the phone's MCP servers running and mounted as tools; the servers
        left out (and tools refused) are listed under `warnings`."""
        async with mounted(self.mcp_servers, self.registry, self.home / "logs") as warnings:
            out = await self._ask(*args, **kwargs)
        out["warnings"] = [w.model_dump(mode="json") for w in warnings]
        return out

    async def _ask(
        self,
        text: str,
        route: Route,
        on_token: OnToken,
        cancel: anyio.Event,
        tool_choice: Literal["auto", "required", "none"] = "auto",
        thinking: bool = False,
    ) -> dict[str, Any]:
        started = time.monotonic()
        request_id = uuid.uuid4().hex
        out: dict[str, Any] = {
            "request_id": request_id,
            "route": "local",
            "escalated": False,
            "reason": "",
            "node": None,
            "plans": [],
            "plan": None,
            "answer": "",
            "timings": {},
        }
        await self.executor.resume()  # finish what a crash interrupted, first
        if route == "local":  # the phone's own model, as asked: the home is not dialled
            return await self._local(
                text,
                out,
                "local route requested",
                started,
                cancel,
                tool_choice=tool_choice,
                thinking=thinking,
            )
        if not (self.home / "roster.signed").exists():
            if route == "remote":
                raise HearthError(ErrorCode.INVALID_INPUT, "not paired: run `hearth pair -`")
            return await self._local(text, out, "not paired with a home node", started, cancel)
        host, roster, keys, _ = self._host()
        node = roster.roster.founder
        out["node"] = node

        async with host.run([]):
            reachable, why = True, ""
            t0 = time.monotonic()
            try:
                await self._connect(host, node, keys)
            except HearthError as exc:
                if route == "remote":
                    raise
                reachable, why = False, reason_about(node, exc)
            out["timings"]["connect_ms"] = round((time.monotonic() - t0) * 1000, 1)
            if reachable:  # catch up on the roster and swarm key (revocations, rotations)
                await self._sync(host, node, roster, keys)
            decision = decide(
                RouteInput(
                    text=text,
                    candidate_tools=len(self.registry.candidates(text).matched),
                    node_reachable=reachable,
                    node_reason=why,
                    node_latency_ms=out["timings"]["connect_ms"] if reachable else None,
                    device=self.device,
                ),
                self.policy,
                route,
            )
            if decision.route == "local":
                try:
                    return await self._local(
                        text,
                        out,
                        decision.reason,
                        started,
                        cancel,
                        may_escalate=decision.may_escalate and reachable,
                        tool_choice=tool_choice,
                        thinking=thinking,
                    )
                except HearthError as exc:
                    if not (decision.may_escalate and reachable):
                        raise
                    decision = Decision("remote", f"escalated: {exc.message}")
                    out["escalated"] = True
            try:
                return await self._remote(
                    host,
                    node,
                    text,
                    out,
                    decision.reason,
                    on_token,
                    cancel,
                    started,
                    tool_choice,
                    thinking,
                )
            except HearthError as exc:
                if route != "auto" or exc.code not in (ErrorCode.UNREACHABLE, ErrorCode.TIMED_OUT):
                    raise
                return await self._local(
                    text,
                    out,
                    f"home node lost mid-request ({exc.message}): answered locally",
                    started,
                    cancel,
                )

    async def _connect(self, host, node: str, keys) -> None:  # type: ignore[no-untyped-def]
        """Dial the address book; if that fails, mDNS answers with today's tag are hints."""
        from hearth.protocol.transport.addressbook import AddressBook
        from hearth.protocol.transport.discovery import browse

        book = AddressBook(self.home)
        try:
            await host.connect(node, book.get(node), CONNECT_TIMEOUT_S)
            if node in host.worked:  # last-known-good first, next time
                book.remember(node, [host.worked[node]])
            return
        except HearthError as exc:
            if exc.code is ErrorCode.REFUSED or os.environ.get("HEARTH_NO_MDNS"):
                raise
            failed = exc
        hints = await anyio.to_thread.run_sync(browse, keys.accepted(time.time()), MDNS_WAIT_S)
        addrs = [f"/ip4/{ip}/tcp/{port}/p2p/{node}" for ip, port in hints]
        if not addrs:
            raise HearthError(failed.code, f"{failed.message}; no answer on mDNS either")
        await host.connect(node, addrs, CONNECT_TIMEOUT_S)
        book.remember(node, addrs)

    async def _sync(self, host, node: str, roster, keys) -> None:  # type: ignore[no-untyped-def]
        """Catch up on the roster and swarm key, and learn the node's addresses (its
        circuits through relays included, for when no direct path works)."""
        from hearth.protocol.transport.addressbook import AddressBook
        from hearth.protocol.transport.health import ask_health
        from hearth.protocol.transport.rostersync import ROSTER_PROTOCOL, pull

        async def roster_sync() -> None:
            try:
                with anyio.fail_after(CONNECT_TIMEOUT_S):
                    await pull(await host.open(node, ROSTER_PROTOCOL), self.home, roster, keys)
            except (HearthError, TimeoutError) as exc:  # planning still works on what we hold
                self.audit.append(AuditRecord("-", node, "-", "", "roster-sync", str(exc), "error"))

        async def addresses() -> None:
            with contextlib.suppress(HearthError):
                health = await ask_health(host, node, timeout=CONNECT_TIMEOUT_S)
                AddressBook(self.home).add(node, health.addrs)

        async with anyio.create_task_group() as tg:
            tg.start_soon(roster_sync)
            tg.start_soon(addresses)

    async def _remote(
        self,
        host,
        node: str,
        text: str,
        out: dict[str, Any],
        reason: str,  # type: ignore[no-untyped-def]
        on_token: OnToken,
        cancel: anyio.Event,
        started: float,
        tool_choice: Literal["auto", "required", "none"],
        thinking: bool,
    ) -> dict[str, Any]:
        from hearth.protocol.transport.keepalive import watch
        from hearth.protocol.transport.plans import PLAN_PROTOCOL, run_plan_session
        from hearth.protocol.transport.taskgroups import single_error

        out.update(route="remote", reason=reason)
        self._audit_route(out)
        observed: dict[str, list[Observation]] = {}  # by plan id: step ids repeat per round

        async def execute(plan: Plan):  # type: ignore[no-untyped-def]
            observations = await self._execute(plan, state, friend=plan.signer != node)
            observed[plan.plan_id] = observations
            return observations

        thought: list[str] = []

        async def token(t: Token) -> None:
            if t.thinking:  # progress, kept apart from the answer
                thought.append(t.text)
            else:
                await on_token(t.text)

        request = self.executor.egress.request(
            PlanRequest(
                request_id=out["request_id"],
                tools=self.remote_tools(text),
                limits=self.settings.limits,
                conversation=[ChatMessage(role="user", content=text)],
                device=self.device,
                tool_choice=tool_choice,
                thinking=thinking,
            )
        )
        state = SessionState(limits=request.limits)  # the phone holds the planner to them
        stream = await host.open(node, PLAN_PROTOCOL)
        outcome = None

        async def converse(scope: anyio.CancelScope) -> None:
            nonlocal outcome
            outcome = await run_plan_session(
                stream,
                request,
                phone_id=self.peer_id,
                execute=execute,
                on_token=token,
                cancel=cancel,
            )
            scope.cancel()

        quiet = 0.0
        with single_error():
            async with anyio.create_task_group() as tg:  # the keepalive bounds a silent node
                tg.start_soon(converse, tg.cancel_scope)
                quiet = await watch(host, node, KEEPALIVE_BOUND_S)
                tg.cancel_scope.cancel()
        if outcome is None:
            raise HearthError(
                ErrorCode.UNREACHABLE, f"the home node went silent ({quiet:.1f} s without a byte)"
            )
        out["plans"] = [plan_view(p, observed.get(p.plan_id, [])) for p in outcome.plans]
        out["plan"] = out["plans"][-1] if out["plans"] else None
        out["answer"] = outcome.final.answer
        if thinking:
            out["thinking"] = "".join(thought)
        if outcome.first_token_s is not None:
            out["timings"]["first_token_ms"] = round(outcome.first_token_s * 1000, 1)
        out["timings"]["total_ms"] = round((time.monotonic() - started) * 1000, 1)
        return out

    async def _local(
        self,
        text: str,
        out: dict[str, Any],
        reason: str,
        started: float,
        cancel: anyio.Event,
        may_escalate: bool = False,
        tool_choice: Literal["auto", "required", "none"] = "auto",
        thinking: bool = False,
    ) -> dict[str, Any]:
        # on the phone, a request that names no tool's words is a plain question
        candidates = self.registry.specs(set(self.registry.candidates(text).matched))
        result = await self.local.plan(
            text,
            candidates,
            self.peer_id,
            limits=self.settings.limits,
            mode=tool_choice if candidates else "none",
            cancelled=cancel.is_set,
            thinking=thinking,
        )
        threshold = self.policy.confidence_threshold
        if may_escalate and result.confidence is not None and result.confidence < threshold:
            raise HearthError(
                ErrorCode.PLAN_REJECTED,
                f"the local model's confidence "
                f"{result.confidence:.2f} is below the policy's {threshold:.2f}",
            )
        out.update(route="local", reason=reason)
        if result.confidence is not None:
            out["confidence"] = round(result.confidence, 4)
        self._audit_route(out)
        out["answer"] = result.answer
        if thinking:
            out["thinking"] = result.thinking
        if result.plan is not None:
            observations = await self._execute(result.plan, SessionState(), home=False)
            failed = [o for o in observations if o.status == "error"]
            if may_escalate and failed and len(failed) == len(observations):
                raise HearthError(
                    ErrorCode.PLAN_REJECTED,
                    "every local tool call failed ("
                    + "; ".join(o.error or "" for o in failed)[:200]
                    + ")",
                )
            out["plans"] = [plan_view(result.plan, observations)]
            out["plan"] = out["plans"][0]
            if not out["answer"]:
                done = sum(o.status == "ok" for o in observations)
                out["answer"] = f"Ran {done} of {len(observations)} step(s) on the phone."
        out["timings"]["total_ms"] = round((time.monotonic() - started) * 1000, 1)
        return out

    async def _execute(self, plan: Plan, state: SessionState, **where: bool) -> list[Observation]:
        """The executor on `plan`. When it is cut off (the node ended the session, or
        Ctrl-C), the running step is journaled `cancelled` and the plan closed: no later
        ask reruns that step or runs the steps after it unasked."""
        try:
            return await self.executor.execute(plan, state, **where)
        except anyio.get_cancelled_exc_class():
            for record in self.journal.steps(plan.plan_id).values():
                if record.state == "running":
                    reason = "cut off mid-run: it may or may not have happened"
                    self.journal.finished(
                        plan.plan_id,
                        record.step_id,
                        "cancelled",
                        error=reason,
                        tool=record.tool,
                        labels=record.labels,
                    )
                    self.audit.append(
                        AuditRecord(
                            plan.plan_id, plan.signer, record.step_id, "", "-", reason, "cancelled"
                        )
                    )
            self.journal.close_plan(plan.plan_id)
            raise

    def _audit_route(self, out: dict[str, Any]) -> None:
        self.audit.append(
            AuditRecord(
                out["request_id"],
                self.peer_id,
                "-",
                "",
                "route",
                f"{out['route']}: {out['reason']}",
                "ok",
            )
        )

    async def search(self, query: str, hops: int = 2, limit: int = 10) -> dict[str, Any]:
        """`hearth search`: a peer-routed search; onion keys come from the home node."""
        from hearth.protocol.transport.addressbook import AddressBook
        from hearth.search.onion import Directory
        from hearth.search.route import pull_directory, search

        if not (self.home / "roster.signed").exists():
            raise HearthError(ErrorCode.INVALID_INPUT, "not paired: run `hearth pair URI`")
        host, roster, keys, _ = self._host()
        node = roster.roster.founder
        directory = Directory()
        async with host.run([]):
            await self._connect(host, node, keys)
            await self._sync(host, node, roster, keys)
            await pull_directory(
                host, node, directory, roster.roster, AddressBook(self.home).get(node)
            )
            outcome = await search(
                host,
                directory.usable(roster.roster, time.time()),
                roster.roster,
                own_node=node,
                query=query,
                hops=hops,
                limit=limit,
            )
        return {
            "query": query,
            "hops": outcome.hops,
            "results": [{**r.__dict__, "untrusted": True} for r in outcome.results],
            "truncated": outcome.truncated,
            "attempts": outcome.attempts,
        }

    async def status(self) -> dict[str, Any]:
        """`hearth status --json`: the paired nodes, reachable or not and why."""
        out: dict[str, Any] = {"peer_id": self.peer_id, "nodes": []}
        if not (self.home / "roster.signed").exists():
            return out
        from hearth.protocol.transport.addressbook import AddressBook
        from hearth.protocol.transport.health import ask_health
        from hearth.protocol.wire.roster import Role

        host, roster, _keys, _ = self._host()
        book = AddressBook(self.home)
        async with host.run([]):
            for member in roster.roster.members:
                if not ({Role.HOME, Role.PLANNER} & member.roles):
                    continue
                entry = {
                    "peer_id": member.peer_id,
                    "name": member.name,
                    "reachable": False,
                    "reason": "",
                    "latency_ms": None,
                    "model": None,
                }
                try:
                    t0 = time.monotonic()
                    health = await ask_health(host, member.peer_id, book.get(member.peer_id))
                    entry["latency_ms"] = round((time.monotonic() - t0) * 1000, 1)
                    entry["reachable"] = True
                    if health.model is not None:
                        entry["model"] = health.model.model_dump()
                except HearthError as exc:
                    entry["reason"] = reason_about(member.peer_id, exc)
                out["nodes"].append(entry)
        return out
