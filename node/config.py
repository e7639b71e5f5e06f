"""The node's settings: `config.toml` under its home, validated by pydantic.

A bad file is `invalid_input` (exit 9) naming the field; command-line flags of
`hearth-node serve` override the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from hearth.protocol.kit.tomlfile import read_toml, validated

CONFIG_FILE = "config.toml"


class FriendCaps(BaseModel):
    """`[friends]`: the most this node gives one request of a friend's phone (a phone whose
    home is another node). A request asking for more is planned within these caps, and
    the phone is told so (`Progress(stage="limits")`); the defaults cover what a phone
    asks by default, so only a greedy request is cut down."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    deadline_s: Annotated[float, Field(gt=0, le=3600)] = 120.0  # also how long it holds its slot
    max_rounds: Annotated[int, Field(ge=1, le=16)] = 4
    max_steps: Annotated[int, Field(ge=1, le=64)] = 8
    max_tokens: Annotated[int, Field(ge=1, le=8192)] = 1024  # per round
    max_thinking_tokens: Annotated[int, Field(ge=1, le=32768)] = 1024
    per_phone: Annotated[int, Field(ge=1, le=64)] = 1  # sessions one friend's phone holds at once


class NodeConfig(BaseModel):
    """Settings of `hearth-node serve`; unknown keys are errors, so typos are caught."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = ""
    listen: list[str] = Field(default_factory=lambda: ["/ip4/0.0.0.0/tcp/4001"])
    pair_listen: str = ""  # default: the first listen address's IP, any port
    model: str = ""
    upstream: str = ""
    upstream_model: str = ""
    script: str = ""  # a JSON file of exact plans to play instead of a model (tests)
    n_ctx: Annotated[int, Field(ge=512, le=262144)] = 8192
    max_sessions: Annotated[int, Field(ge=1, le=64)] = 2
    max_queue: Annotated[int, Field(ge=0, le=1024)] = 8
    per_peer: Annotated[int, Field(ge=1, le=64)] = 2
    plan_for_friends: bool = False  # plan for phones whose home is another node (with `planner`)
    friend_sessions: Annotated[int, Field(ge=0, le=64)] = 1  # at once, never before own phones
    friends: FriendCaps = FriendCaps()  # what one friend's request gets at most
    plan_ttl_s: Annotated[float, Field(gt=0, le=86400)] = 300.0
    observation_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 120.0
    request_timeout_s: Annotated[float, Field(gt=0, le=300)] = 30.0
    mdns: bool = True
    metrics_port: Annotated[int, Field(ge=0, le=65535)] = 0
    dashboard_port: Annotated[int, Field(ge=0, le=65535)] = 0  # 0: no dashboard
    keepalive_s: Annotated[float, Field(ge=1, le=60)] = 3.0
    key_grace_s: Annotated[float, Field(ge=0, le=30 * 86400)] = 86400.0
    search_backend: Literal["index", "searxng"] = "index"  # what this node answers as an exit
    searxng_url: str = ""
    search_exit_per_minute: Annotated[int, Field(ge=1, le=100000)] = 30  # per previous hop
    search_view_log: str = ""  # opt-in audit: what this exit decrypted from each request


def pairing_listen(config: NodeConfig) -> str:
    """Where the pairing listener listens: configured, or beside the main listener."""
    if config.pair_listen:
        return config.pair_listen
    first = config.listen[0].split("/")
    return f"/{first[1]}/{first[2]}/tcp/0"


def load_config(home: Path, **overrides: object) -> NodeConfig:
    """The config file merged with overrides (those not None)."""
    path = home / CONFIG_FILE
    data = read_toml(path)
    data.update({k: v for k, v in overrides.items() if v is not None})
    return validated(NodeConfig, data, path)
