"""The HTTP status each typed error is answered with, by both pages' APIs."""

from __future__ import annotations

from hearth.protocol.wire.errors import ErrorCode

HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.INVALID_INPUT: 400,
    ErrorCode.REFUSED: 403,
    ErrorCode.PLAN_REJECTED: 422,
    ErrorCode.BUSY: 429,
    ErrorCode.CANCELLED: 499,  # the client went away (nginx's code; nobody reads it)
    ErrorCode.INTERNAL: 500,
    ErrorCode.PROTOCOL_ERROR: 502,
    ErrorCode.UNREACHABLE: 503,
    ErrorCode.MODEL_NOT_LOADED: 503,
    ErrorCode.TIMED_OUT: 504,
}
