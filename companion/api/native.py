"""The native API: asks as a stream of events, confirmations, and the commands' results.

`POST /api/ask` takes an `AskRequest` and answers with server-sent events
(`event: <type>` / `data: <Event as JSON>`): the route, tokens, plan steps, confirmation
requests, then one `answer` or `error`. A confirmation is answered with
`POST /api/confirm/{confirm_id}` `{"approve": true|false}`; one not answered within the
relay's bound, or whose client went away, is refused. `GET /api/status`, `/api/tools`,
`/api/audit?verify=true`, `/api/conversations[/{id}]`, `/api/inbox` and
`POST /api/search` answer with the `--json` object of the matching command;
`POST /api/conversations/{id}/rename` `{"title"}` and `POST /api/conversations/{id}/delete`
rename and forget a conversation (the chat page's list). Errors are
`{"error": {"code", "message"}}` with the code's HTTP status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated

import anyio
from pydantic import BaseModel, ConfigDict, StrictBool, StringConstraints, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from hearth.protocol.transport.taskgroups import single_error
from hearth.protocol.wire.errors import HearthError

from ..ask import ask as asking
from ..client_confirm import RelayedConfirmer
from ..commands import (
    AuditOp,
    ConversationsOp,
    InboxOp,
    ReportOp,
    SearchOp,
    StatusOp,
    ToolsOp,
    error_event,
    failure,
    perform,
)
from ..events import AnswerEvent, AskRequest, ErrorEvent, Event
from .errors import ApiError, invalid, typed_body
from .streams import Deferred, Emit, EventStream, Slots

if TYPE_CHECKING:
    from ..service import Service

FLAGS = {"true": True, "1": True, "false": False, "0": False, "": False}


class ConfirmBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    approve: StrictBool


class Answered(BaseModel):
    answered: bool


class RenameBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]


class Deleted(BaseModel):
    deleted: bool


def error_response(exc: ApiError) -> JSONResponse:
    """`{"error": {"code", "message"}}`, with `retry_after` (seconds) as `--json` has it."""
    error: dict[str, object] = {"code": exc.code, "message": exc.message}
    if exc.retry_after_s is not None:
        error["retry_after"] = exc.retry_after_s
    return JSONResponse({"error": error}, status_code=exc.status, headers=exc.headers)


def frame(event: Event) -> bytes:
    """One server-sent event: its type, then the event as one line of JSON."""
    return f"event: {event.type}\ndata: ".encode() + event.model_dump_json().encode() + b"\n\n"


class NativeApi:
    """The `/api` routes over one `Service`, and the confirmations its asks wait on."""

    def __init__(self, service: Service, slots: Slots) -> None:
        self.service = service
        self.slots = slots
        self.relays: set[RelayedConfirmer] = set()

    def routes(self) -> list[Route]:
        def op(
            make: Callable[[Request], Awaitable[ReportOp]],
        ) -> Callable[[Request], Awaitable[Response]]:
            async def endpoint(request: Request) -> Response:
                try:
                    return self.result(await make(request))
                except ValidationError as exc:  # a path or query value out of bounds
                    return error_response(invalid(exc))
                except ApiError as exc:
                    return error_response(exc)

            return endpoint

        async def search(request: Request) -> ReportOp:
            return await typed_body(request, SearchOp)

        async def audit(request: Request) -> ReportOp:
            verify = request.query_params.get("verify", "").lower()
            if verify not in FLAGS:
                raise ApiError(400, "invalid_input", "verify: true or false")
            return AuditOp(verify=FLAGS[verify])

        async def conversation(request: Request) -> ReportOp:
            return ConversationsOp(id=request.path_params["conversation_id"])

        def fixed(value: ReportOp) -> Callable[[Request], Awaitable[ReportOp]]:
            async def make(request: Request) -> ReportOp:
                return value

            return make

        return [
            Route("/api/ask", self.ask, methods=["POST"]),
            Route("/api/confirm/{confirm_id}", self.confirm, methods=["POST"]),
            Route("/api/status", op(fixed(StatusOp())), methods=["GET"]),
            Route("/api/tools", op(fixed(ToolsOp())), methods=["GET"]),
            Route("/api/inbox", op(fixed(InboxOp())), methods=["GET"]),
            Route("/api/audit", op(audit), methods=["GET"]),
            Route("/api/search", op(search), methods=["POST"]),
            Route("/api/conversations", op(fixed(ConversationsOp())), methods=["GET"]),
            Route("/api/conversations/{conversation_id}", op(conversation), methods=["GET"]),
            Route("/api/conversations/{conversation_id}/rename", self.rename, methods=["POST"]),
            Route("/api/conversations/{conversation_id}/delete", self.delete, methods=["POST"]),
        ]

    def result(self, op: ReportOp) -> Response:
        """The op's `--json` object, worked out while its client is watched."""

        async def work(cancel: anyio.Event) -> Response:
            try:
                with single_error():
                    model = await perform(self.service, op)
            except Exception as exc:
                return error_response(ApiError.of(failure(exc)))
            return JSONResponse(model.model_dump(mode="json"))

        return Deferred(work)

    async def ask(self, request: Request) -> Response:
        try:
            ticket = await self.slots.admit(request)
        except ApiError as exc:
            return error_response(exc)
        try:
            ask = await typed_body(request, AskRequest)
            if ask.attachments:  # a path on this device, named by whoever holds the token
                raise ApiError(
                    400, "invalid_input", "attachments are not taken over HTTP", param="attachments"
                )
        except ApiError as exc:
            ticket.release()
            return error_response(exc)

        async def produce(emit: Emit, cancel: anyio.Event) -> None:
            async def send(event: Event) -> None:
                await emit(frame(event))

            relay = RelayedConfirmer(send)
            self.relays.add(relay)
            try:
                await send(await self._answer(ask, send, relay, cancel))
            finally:
                self.relays.discard(relay)

        return EventStream(produce, ticket)

    async def _answer(
        self,
        ask: AskRequest,
        send: Callable[[Event], Awaitable[None]],
        relay: RelayedConfirmer,
        cancel: anyio.Event,
    ) -> AnswerEvent | ErrorEvent:
        try:
            with single_error():
                result = await asking(self.service, ask, send, relay, cancel)
        except Exception as exc:
            return error_event(failure(exc))
        return AnswerEvent(result=result.model_copy(update={"served_by": "companion"}))

    async def confirm(self, request: Request) -> Response:
        confirm_id = request.path_params["confirm_id"]
        try:
            body = await typed_body(request, ConfirmBody, limit=1024)
            if len(confirm_id) > 64 or not any(
                relay.answer(confirm_id, body.approve) for relay in list(self.relays)
            ):
                raise ApiError(404, "invalid_input", "no open confirmation has that id")
        except ApiError as exc:
            return error_response(exc)
        return JSONResponse(Answered(answered=True).model_dump())

    async def rename(self, request: Request) -> Response:
        try:
            body = await typed_body(request, RenameBody, limit=1024)
            summary = self.service.conversations.rename(
                request.path_params["conversation_id"], body.title
            )
        except ApiError as exc:
            return error_response(exc)
        except HearthError as exc:
            return error_response(ApiError.of(exc))
        return JSONResponse(summary.model_dump(mode="json"))

    async def delete(self, request: Request) -> Response:
        try:
            self.service.conversations.delete(request.path_params["conversation_id"])
        except HearthError as exc:
            return error_response(ApiError.of(exc))
        return JSONResponse(Deleted(deleted=True).model_dump())
