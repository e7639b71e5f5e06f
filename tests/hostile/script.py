"""What the hostile planner sends: per round, steps (literals and `$ref`s) and the
untrusted inputs it claims to have read; then a final answer."""

from __future__ import annotations

import time
import uuid

from pydantic import BaseModel, Field

from hearth.protocol.wire.messages import Plan, PlanStep, UntrustedInput


class Round(BaseModel):
    """One action plan of the script."""

    steps: list[PlanStep]
    untrusted_inputs: list[UntrustedInput] = Field(default_factory=list)


class Script(BaseModel):
    """A whole plan session, as a fully steered model would write it."""

    rounds: list[Round]
    answer: str = "Done."
    read: list[UntrustedInput] = Field(default_factory=list)  # said in Final: read, then answered
    hold_final: bool = False  # keep the session open (and the link alive) instead of ending it


def plan_for(
    round_: Round,
    *,
    round_no: int,
    signer: str,
    audience: str,
    session_id: str,
    request_hash: bytes,
    transcript_hash: bytes,
    ttl_s: float = 300.0,
) -> Plan:
    """The plan body of `round_`, bound as a real planner binds it."""
    now = time.time()
    return Plan(
        plan_id=uuid.uuid4().hex,
        signer=signer,
        audience=audience,
        session_id=session_id,
        round=round_no,
        request_id=session_id,
        request_hash=request_hash,
        transcript_hash=transcript_hash,
        issued_at=now,
        expires_at=now + ttl_s,
        untrusted_inputs=round_.untrusted_inputs,
        steps=round_.steps,
    )
