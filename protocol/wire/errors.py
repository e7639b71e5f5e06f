"""The one table of error codes: wire error frames, JSON `error.code` and exit statuses."""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    """Error codes of DESIGN.md "Protocols"; each has one exit status."""

    UNREACHABLE = "unreachable"
    REFUSED = "refused"
    BUSY = "busy"
    TIMED_OUT = "timed_out"
    MODEL_NOT_LOADED = "model_not_loaded"
    PLAN_REJECTED = "plan_rejected"
    INVALID_INPUT = "invalid_input"
    PROTOCOL_ERROR = "protocol_error"
    CANCELLED = "cancelled"
    INTERNAL = "internal"

    @property
    def exit_status(self) -> int:
        return EXIT_STATUS[self]


EXIT_STATUS: dict[ErrorCode, int] = {
    ErrorCode.UNREACHABLE: 3,
    ErrorCode.REFUSED: 4,
    ErrorCode.BUSY: 5,
    ErrorCode.TIMED_OUT: 6,
    ErrorCode.MODEL_NOT_LOADED: 7,
    ErrorCode.PLAN_REJECTED: 8,
    ErrorCode.INVALID_INPUT: 9,
    ErrorCode.PROTOCOL_ERROR: 10,
    ErrorCode.CANCELLED: 130,
    ErrorCode.INTERNAL: 1,
}


class HearthError(Exception):
    """An error a user can act on: a code from the table, a message, maybe a retry hint."""

    def __init__(self, code: ErrorCode, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after = retry_after

    @property
    def exit_status(self) -> int:
        return self.code.exit_status

    def to_json(self) -> dict[str, object]:
        """The `{"error": {...}}` object that `--json` commands print on failure."""
        error: dict[str, object] = {"code": self.code.value, "message": self.message}
        if self.retry_after is not None:
            error["retry_after"] = self.retry_after
        return {"error": error}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code.value!r}, {self.message!r})"


class LocalProtocolError(HearthError):
    """We were about to break the protocol (a bug on this side)."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.PROTOCOL_ERROR, message)


class RemoteProtocolError(HearthError):
    """The peer broke the protocol: malformed, oversize, truncated or out-of-state frame."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.PROTOCOL_ERROR, message)


def reason_about(peer: str, exc: HearthError) -> str:
    """`exc` as the reason shown beside `peer` (a status row, a route's reason): its code
    and message, without the peer's id again."""
    return f"{exc.code.value}: {exc.message.replace(f'{peer}: ', '').replace(peer, 'it')}"
