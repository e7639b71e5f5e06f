"""Opening a signed action plan: verify the signature first, then every binding.

A plan is bound to its signer, its audience (the phone), the session, the round,
the request (hash of the raw `PlanRequest` body) and the transcript (hash of every
frame before it), and it expires. Any mismatch is `plan_rejected` with the reason.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass

import msgpack
from pydantic import ValidationError

from .errors import ErrorCode, HearthError
from .identity import verify
from .messages import Plan, Signed


@dataclass(frozen=True)
class Expected:
    """What the phone knows a plan must be bound to."""

    signer: str
    audience: str
    session_id: str
    round: int
    request_hash: bytes
    transcript_hash: bytes


def open_plan(signed: Signed, expected: Expected, *, now: float, seen: Container[str] = ()) -> Plan:
    """The verified plan, or `plan_rejected` saying which check failed."""
    verify(expected.signer, "plan", signed.payload, signed.signature)
    try:
        plan = Plan.model_validate(msgpack.unpackb(signed.payload, raw=False))
    except (ValidationError, ValueError, msgpack.UnpackException) as exc:
        raise HearthError(ErrorCode.PLAN_REJECTED, "signed plan does not decode") from exc
    checks = [
        (plan.signer == expected.signer, "signed by another peer than the one it names"),
        (plan.audience == expected.audience, "addressed to another device"),
        (plan.session_id == expected.session_id, "bound to another session"),
        (plan.round == expected.round, f"for round {plan.round}, expected {expected.round}"),
        (plan.request_hash == expected.request_hash, "bound to another request"),
        (plan.transcript_hash == expected.transcript_hash, "bound to another transcript"),
        (now < plan.expires_at, "expired"),
        (plan.plan_id not in seen, "replayed (plan id already seen)"),
    ]
    for ok, reason in checks:
        if not ok:
            raise HearthError(ErrorCode.PLAN_REJECTED, f"plan {plan.plan_id}: {reason}")
    return plan
