"""A phone process for the crash tests: runs (or resumes) a plan on real files.

python -m tests.crash_phone HOME run PLAN_JSON
python -m tests.crash_phone HOME resume yes|no
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import trio

from hearth.companion.executor import SessionState
from hearth.companion.tools.registry import Annotations, Tier, ToolContext
from hearth.protocol.wire.messages import Plan

from .phone_kit import make_executor


def main() -> None:
    home, mode = Path(sys.argv[1]), sys.argv[2]
    answer = sys.argv[3] == "yes" if mode == "resume" else True
    executor, _, _data = make_executor(home, answer=answer)
    log = home / "effects.log"

    @executor.registry.tool(
        tier=Tier.READ_ONLY,
        annotations=Annotations(
            read_only=True, destructive=False, idempotent=True, open_world=False
        ),
    )
    async def pause(ctx: ToolContext, seconds: float) -> dict:
        """Wait (a window in which the test kills the process)."""
        await trio.sleep(seconds)
        return {"waited": seconds}

    @executor.registry.tool(
        tier=Tier.READ_ONLY,
        annotations=Annotations(
            read_only=False, destructive=False, idempotent=False, open_world=False
        ),
    )
    async def append_then_wait(ctx: ToolContext, line: str, seconds: float) -> dict:
        """Append a line to the effects log (not idempotent), then wait."""
        with log.open("a") as f:
            f.write(line + "\n")
        await trio.sleep(seconds)
        return {"appended": line}

    if mode == "run":
        plan = Plan.model_validate_json(Path(sys.argv[3]).read_text())
        print("started", flush=True)
        obs = trio.run(lambda: executor.execute(plan, SessionState()))
        print(json.dumps([o.status for o in obs]), flush=True)
    else:
        print(json.dumps(trio.run(executor.resume)), flush=True)


if __name__ == "__main__":
    main()
