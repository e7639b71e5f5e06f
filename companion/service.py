"""The companion's composition root: one phone home opened, its parts put together.

A `Service` opens a home (its policy, settings, tools and MCP servers, journal, audit
log, conversations, inbox, local model), the link to the home node, and executors over
its tools; it does no request's work itself. A one-shot `hearth` command opens one in
its own process; `hearth serve` opens one resident (the kept link, the warm local model,
the interrupted plans resumed). The doors ask through `ask.ask`, complete through
`completion.complete` and report through `commands.perform` (`reports.py`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from hearth.protocol.kit.tomlfile import read_toml
from hearth.protocol.transport.keys import load_identity
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.identity import peer_id_of

from .ask import deliver_kept
from .audit import AuditLog
from .clock import PhoneClock
from .config import secure_home
from .confirm import Confirmer, Scripted
from .conversations import Conversations
from .egress import Policy
from .executor import Executor
from .formats import check_home
from .inbox import Inbox
from .journal import Journal
from .local_model import LocalModel
from .policy import load_policy
from .reports import KeptStreams
from .results import (
    WarningView,
)
from .settings import load_settings
from .tools.builtin import register_builtin
from .tools.mcp import mounted, servers_of
from .tools.registry import Registry
from .tools.storage import PhoneData

if TYPE_CHECKING:  # libp2p loads only when the home node is needed
    from .link import NodeLink


class Service:
    """One home directory's parts, opened and held for the requests the doors bring."""

    def __init__(self, home: Path, *, resident: bool = False) -> None:
        secure_home(home)
        check_home(home)
        self.home = home
        self.resident = resident
        self.policy = load_policy(home)
        self.settings = load_settings(home)
        self.clock = PhoneClock(self.settings.timezone, self.settings.clock)
        self.registry = Registry()
        register_builtin(self.registry, PhoneData(home / "data"))
        config = read_toml(home / "config.toml")
        self.mcp_servers = servers_of(config.get("mcp", []), str(home / "config.toml"))
        self.warnings: list[WarningView] = []
        self.journal = Journal(home / "journal.db")
        self.audit_log = AuditLog(home)
        self.conversations = Conversations(home / "conversations.db")
        self.inbox = Inbox(home, self.policy.wait_for_home_max_age_s)  # one per home: it sends
        self.local = LocalModel(Path(self.settings.model) if self.settings.model else None)
        self.link: NodeLink | None = None  # the kept link, when resident and paired
        self.search_streams = KeptStreams()  # to first hops, on the kept link's host
        self._resumed = False

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, home: Path, *, resident: bool = False) -> AsyncIterator[Service]:
        """The service with its MCP servers mounted (started in parallel; those left out
        are in `warnings`). Resident: the interrupted plans are resumed now (nobody is
        there to confirm: a step that needs it is not rerun), the link to the home node
        is kept up and the local model loaded warm."""
        service = cls(home, resident=resident)
        async with contextlib.AsyncExitStack() as stack:
            warnings = await stack.enter_async_context(
                mounted(service.mcp_servers, service.registry, home / "logs")
            )
            service.warnings = [WarningView.model_validate(w.model_dump()) for w in warnings]
            if resident:  # the only process asking now: what is `running` was cut off
                service.conversations.interrupted()
                await service.resume(Scripted(None))
                if service.paired:
                    from .link import NodeLink

                    link = await stack.enter_async_context(
                        NodeLink.running(home, service.audit_log)
                    )
                    link.on_up = functools.partial(deliver_kept, service, link)
                    service.link = link
                tasks = await stack.enter_async_context(anyio.create_task_group())
                stack.callback(tasks.cancel_scope.cancel)  # on the way out, before the link stops
                tasks.start_soon(service._warm)
                if service.link is not None:
                    tasks.start_soon(service.link.keep)
            yield service

    @functools.cached_property
    def peer_id(self) -> str:
        """The phone's peer id (`invalid_input` when the home has no identity yet)."""
        return peer_id_of(load_identity(self.home))

    @property
    def paired(self) -> bool:
        return (self.home / "roster.signed").exists()

    def executor(self, confirmer: Confirmer) -> Executor:
        """An executor over the service's tools and journal, asking `confirmer`."""
        return Executor(
            self.registry,
            self.journal,
            self.audit_log,
            confirmer,
            Policy(
                private_to_home=self.policy.private_to_home,
                never_remote_tools=frozenset(self.policy.never_remote_tools),
            ),
        )

    async def resume(self, confirmer: Confirmer) -> None:
        """Finish what a crash interrupted, once, before the first request."""
        if not self._resumed:
            self._resumed = True
            executor = self.executor(confirmer)
            await executor.resume()
            self.warnings += [
                WarningView(
                    source="journal",
                    tool=tool,
                    code="refused",
                    message=f"a {tool} step was interrupted by a crash and not run again: it "
                    "may or may not have happened (see `hearth audit`)",
                )
                for tool in executor.not_rerun
            ]

    async def _warm(self) -> None:
        with contextlib.suppress(HearthError):  # no local model: requests say so when it matters
            await self.local.runtime()

    @contextlib.asynccontextmanager
    async def link_to_home(self) -> AsyncIterator[NodeLink]:
        """The link to the home node: the kept one, or one for this request."""
        if not self.paired:
            raise HearthError(ErrorCode.INVALID_INPUT, "not paired: run `hearth pair -`")
        if self.link is not None:
            yield self.link
            return
        from .link import NodeLink

        async with NodeLink.running(self.home, self.audit_log) as link:
            yield link
