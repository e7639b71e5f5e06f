"""What the local API answers when a request fails: one status per error code, and bodies
read bounded and typed (a body is never trusted to be small, well-formed or JSON)."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request

from hearth.protocol.web import HTTP_STATUS
from hearth.protocol.wire.errors import HearthError

MAX_BODY = 1 << 20  # bytes of one request body
M = TypeVar("M", bound=BaseModel)


class ApiError(Exception):
    """A request the API answers with `status`: its code, message and (OpenAI) `param`."""

    def __init__(self, status: int, code: str, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.param = param

    @property
    def headers(self) -> dict[str, str] | None:
        """A body left unread (too large) ends the connection: nobody may reuse it."""
        return {"Connection": "close"} if self.status == 413 else None

    @classmethod
    def of(cls, exc: HearthError) -> ApiError:
        return cls(HTTP_STATUS[exc.code], exc.code.value, exc.message)


async def typed_body(request: Request, model: type[M], limit: int = MAX_BODY) -> M:
    """The request's JSON body as `model`: 415 unless JSON, 413 past `limit` bytes, 400 when
    it does not validate (the message names where, never the value)."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise ApiError(415, "invalid_input", "the body must be application/json")
    declared = request.headers.get("content-length", "0")
    if not declared.isdigit() or int(declared) > limit:
        raise ApiError(413, "invalid_input", f"the body is larger than {limit} bytes")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ApiError(413, "invalid_input", f"the body is larger than {limit} bytes")
    except ClientDisconnect as exc:
        raise ApiError(499, "cancelled", "the client went away") from exc
    try:
        return model.model_validate_json(bytes(body))
    except ValidationError as exc:
        raise invalid(exc) from exc


def invalid(exc: ValidationError, within: str = "") -> ApiError:
    """400 naming the first failing field and rule (never the value, which may be huge)."""
    err = exc.errors(include_input=False, include_url=False)[0]
    where = ".".join([within, *(str(part) for part in err["loc"])][not within :]) or "body"
    return ApiError(400, "invalid_input", f"{where}: {err['msg']}"[:300], param=where[:100])
