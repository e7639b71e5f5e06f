"""What the local API answers when a request fails: one status per error code, and bodies
read bounded and typed (a body is never trusted to be small, well-formed or JSON)."""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Iterator
from typing import TypeVar

import anyio
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request

from hearth.protocol.kit.web.status import HTTP_STATUS
from hearth.protocol.wire.errors import HearthError

MAX_BODY = 1 << 20  # bytes of one request body
BODY_READ_S = 30.0  # a body arrives within this, else 408: a trickled body holds no slot long
M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    """A request the API answers with `status`: its code, message and (OpenAI) `param`."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        param: str | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param
        self.retry_after = retry_after

    @property
    def retry_after_s(self) -> int | None:
        """When to try again, in whole seconds (at least 1), if the error says."""
        return None if self.retry_after is None else max(1, math.ceil(self.retry_after))

    @property
    def headers(self) -> dict[str, str] | None:
        """A body left unread (too large) ends the connection: nobody may reuse it. A `busy`
        answer says when to try again (`Retry-After`)."""
        if self.status in (408, 413):
            return {"Connection": "close"}
        if self.retry_after_s is not None:
            return {"Retry-After": str(self.retry_after_s)}
        return None

    @classmethod
    def of(cls, exc: HearthError) -> ApiError:
        return cls(HTTP_STATUS[exc.code], exc.code.value, exc.message, retry_after=exc.retry_after)


async def _chunks(request: Request, limit: int) -> AsyncIterator[bytes]:
    """The body as it arrives: 415 unless JSON, 413 past `limit` bytes (declared or sent),
    499 when the client goes away."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise ApiError(415, "invalid_input", "the body must be application/json")
    declared = request.headers.get("content-length", "0")
    if not declared.isdigit() or int(declared) > limit:
        raise ApiError(413, "invalid_input", f"the body is larger than {limit} bytes")
    read = 0
    try:
        async for chunk in request.stream():
            read += len(chunk)
            if read > limit:
                raise ApiError(413, "invalid_input", f"the body is larger than {limit} bytes")
            yield chunk
    except ClientDisconnect as exc:
        raise ApiError(499, "cancelled", "the client went away") from exc


async def typed_body(request: Request, model: type[M], limit: int = MAX_BODY) -> M:
    """The request's JSON body as `model`: 415 unless JSON, 413 past `limit` bytes, 400 when
    it does not validate (the message names where, never the value)."""
    with _in_time():
        body = b"".join([chunk async for chunk in _chunks(request, limit)])
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        raise invalid(exc) from exc


async def drain(request: Request, limit: int = MAX_BODY) -> None:
    """Read the body of a request that is refused anyway and drop it, never keeping it (a
    flood of bodies costs no memory, and the client gets its answer: a connection closed on
    bytes it did not read is reset, the answer lost); 415, 413 and 499 as `typed_body`."""
    with _in_time():
        async for _ in _chunks(request, limit):
            pass


@contextlib.contextmanager
def _in_time() -> Iterator[None]:
    """408 when the body has not all arrived within `BODY_READ_S` (slowloris)."""
    with anyio.move_on_after(BODY_READ_S) as reading:
        yield
    if reading.cancelled_caught:
        raise ApiError(408, "timed_out", f"the body did not arrive within {BODY_READ_S:g} s")


def invalid(exc: ValidationError, within: str = "") -> ApiError:
    """400 naming the first failing field and rule (never the value, which may be huge)."""
    err = exc.errors(include_input=False, include_url=False)[0]
    where = ".".join([within, *(str(part) for part in err["loc"])][not within :]) or "body"
    return ApiError(400, "invalid_input", f"{where}: {err['msg']}"[:300], param=where[:100])
