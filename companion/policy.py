"""The owner's policy for this phone: `policy.toml` under the companion's home.

    never_remote_tools = ["contacts_search"]   # their schemas never leave the phone
    private_to_home = false                   # private results may go to the home node?
    offload_on_metered = false                # plan remotely on a metered network?
    confidence_threshold = 0.35               # escalate a local answer below this
    long_request_chars = 400                  # longer requests go to the home node
    many_tools = 8                            # more candidate tools than this: remote

An invalid file is `invalid_input` naming the line or the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from hearth.protocol.console import read_toml, validated

POLICY_FILE = "policy.toml"


class OwnerPolicy(BaseModel):
    """What the owner allows; unknown keys are errors, so typos are caught."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    never_remote_tools: list[str] = Field(default_factory=list)
    private_to_home: bool = False
    offload_on_metered: bool = False
    confidence_threshold: Annotated[float, Field(ge=0, le=1)] = 0.35
    long_request_chars: Annotated[int, Field(ge=1)] = 400
    many_tools: Annotated[int, Field(ge=1)] = 8


def load_policy(home: Path) -> OwnerPolicy:
    path = home / POLICY_FILE
    return validated(OwnerPolicy, read_toml(path), path)
