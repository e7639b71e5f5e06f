"""The owner's policy for this phone: `policy.toml` under the companion's home.

    never_remote_tools = ["contacts_search"]   # their schemas never leave the phone
    private_to_home = false                   # private results may go to the home node?
    offload_on_metered = false                # plan remotely on a metered network?
    confidence_threshold = 0.35               # escalate a local answer below this
    long_request_chars = 400                  # longer requests go to the home node
    many_tools = 8                            # more candidate tools than this: remote
    documents_to_home = "ask"                 # attachments leave the phone: ask, always, never
    friend_planners = "never"                 # friends plan: never, ask, when-home-unreachable
    wait_for_home = true                      # keep a request for the home while it is away
    wait_for_home_max_age = "24h"             # then drop it, with a note ("90m", "2d", "3600s")

An invalid file is `invalid_input` naming the line or the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from hearth.protocol.kit.tomlfile import read_toml, validated

POLICY_FILE = "policy.toml"
DURATION = r"^[1-9][0-9]{0,6}[smhd]$"
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def duration_s(text: str) -> float:
    """`"90m"` → 5400.0 (a number and one unit: s, m, h or d)."""
    return float(int(text[:-1]) * _UNIT_S[text[-1]])


class OwnerPolicy(BaseModel):
    """What the owner allows; unknown keys are errors, so typos are caught."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    never_remote_tools: list[str] = Field(default_factory=list)
    private_to_home: bool = False
    offload_on_metered: bool = False
    confidence_threshold: Annotated[float, Field(ge=0, le=1)] = 0.35
    long_request_chars: Annotated[int, Field(ge=1)] = 400
    many_tools: Annotated[int, Field(ge=1)] = 8
    documents_to_home: Literal["ask", "always", "never"] = "ask"
    friend_planners: Literal["never", "ask", "when-home-unreachable"] = "never"
    wait_for_home: bool = True
    wait_for_home_max_age: Annotated[str, Field(pattern=DURATION)] = "24h"

    @property
    def wait_for_home_max_age_s(self) -> float:
        """`wait_for_home_max_age` in seconds."""
        return duration_s(self.wait_for_home_max_age)


def load_policy(home: Path) -> OwnerPolicy:
    path = home / POLICY_FILE
    return validated(OwnerPolicy, read_toml(path), path)
