"""The companion's reporting commands, their dispatcher, and how a failure is reported.

A report (`status`, `search`, `tools`, `audit`, `conversations`, `inbox`) is one typed
command; `perform` answers it with the command's `--json` model (`perform_here` too, for a
home no companion serves); each report is one function of `reports.py`. Every door (the
command line in-process, companion.sock, the HTTP API) runs commands through `perform` and
turns what a command raised into a typed error with `failure`, so all of them answer
alike; the Python API calls `reports.py` for its typed results. A new report is one more
`ReportOp`, its case in `perform` and its function in `reports.py`; companion.sock
carries it as it is.
"""

from __future__ import annotations

import logging
import secrets
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, assert_never

from pydantic import BaseModel, ConfigDict, Field

from hearth.protocol.kit.home import storage_problem
from hearth.protocol.wire.errors import ErrorCode, HearthError

from .events import ErrorEvent

if TYPE_CHECKING:
    from .service import Service

log = logging.getLogger("hearth.companion.commands")


class BaseOp(BaseModel):
    """A request's typed shape: unknown fields are refused, values are final."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class StatusOp(BaseOp):
    op: Literal["status"] = "status"


class SearchOp(BaseOp):
    op: Literal["search"] = "search"
    query: Annotated[str, Field(min_length=1, max_length=4096)]
    hops: Annotated[int, Field(ge=2, le=3)] = 2
    limit: Annotated[int, Field(ge=1, le=50)] = 10


class ToolsOp(BaseOp):
    op: Literal["tools"] = "tools"


class AuditOp(BaseOp):
    op: Literal["audit"] = "audit"
    verify: bool = False


class ConversationsOp(BaseOp):
    op: Literal["conversations"] = "conversations"
    id: Annotated[str | None, Field(max_length=128)] = None
    all: bool = False  # apps' API requests too (`--all`)


class InboxOp(BaseOp):
    op: Literal["inbox"] = "inbox"


ReportOp = StatusOp | SearchOp | ToolsOp | AuditOp | ConversationsOp | InboxOp


async def perform(service: Service, op: ReportOp) -> BaseModel:
    """The result of a reporting command: the command's `--json` model."""
    from . import reports  # the thin client reads the ops: a report's imports wait for one

    match op:
        case StatusOp():
            return await reports.node_status(service)
        case SearchOp(query=query, hops=hops, limit=limit):
            return await reports.peer_search(service, query, hops, limit)
        case ToolsOp():
            return reports.tool_list(service)
        case AuditOp(verify=verify):
            return reports.audit_report(service.home, verify)
        case ConversationsOp(id=conversation_id, all=everyone):
            if conversation_id is None:
                return service.conversations.summaries(everyone)
            return service.conversations.detail(conversation_id)
        case InboxOp():
            return service.inbox.view()
    assert_never(op)


async def perform_here(home: Path, op: ReportOp) -> BaseModel:
    """A reporting command worked out in this process, for a home no companion serves
    (sharing the home with other commands, never with a companion)."""
    from . import reports
    from .home_lock import command_lock
    from .service import Service

    with command_lock(home):
        if isinstance(op, AuditOp):  # a damaged audit database must not stop the report
            return reports.audit_report(home, op.verify)
        async with Service.open(home) as service:
            return await perform(service, op)


def internal_error() -> HearthError:
    """An unexpected failure (call it where the exception is being handled): logged with a
    trace id, which the error names, so the client can quote it."""
    trace = secrets.token_hex(4)
    log.exception("internal error (trace %s)", trace)
    return HearthError(ErrorCode.INTERNAL, f"internal error (trace {trace})")


def failure(exc: Exception) -> HearthError:
    """What a command's failure is reported as: its own typed error; a home that cannot
    be written as that (as the in-process command says); anything else `internal`."""
    if isinstance(exc, HearthError):
        return exc
    if isinstance(exc, OSError | sqlite3.OperationalError):
        problem = storage_problem(exc)
        if problem is not None:
            return problem
    return internal_error()


def error_event(exc: HearthError) -> ErrorEvent:
    """`exc` as the event a streamed request ends with."""
    return ErrorEvent(code=exc.code.value, message=exc.message)
