"""The phone's settings in `config.toml` under its home: the local model, the API port
and the limits a request asks the planner to keep; what `hearth config get|set` reads
and changes, validated, so nobody has to edit the file by hand.

The file may hold more (`[[mcp]]` servers): `set` keeps everything else, comments
included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from hearth.protocol.kit.tomlfile import read_toml, validated
from hearth.protocol.transport.keys import write_secret
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import Limits

CONFIG_FILE = "config.toml"
GGUF_MAGIC = b"GGUF"
PHONE_LIMITS = Limits(max_steps=20, max_rounds=10, max_tokens=768, deadline_s=300)
"""The phone's defaults, sized for multi-step work (read, then act: up to 20 tool calls
over 10 rounds); a `[limits]` table changes only the keys it sets."""
# a Host name (lower case), an IPv6 address in brackets, either with a port or not
HostName = Annotated[
    str, Field(pattern=r"^([a-z0-9]([a-z0-9.-]{0,252})|\[[0-9a-f:.]{2,45}\])(:[0-9]{1,5})?$")
]


class DocumentLimits(BaseModel):
    """How large an attached document may be (`hearth ask --attach`)."""

    model_config = ConfigDict(extra="forbid")

    max_bytes: Annotated[int, Field(ge=1, le=256 * 1024 * 1024)] = 16 * 1024 * 1024
    max_pages: Annotated[int, Field(ge=1, le=10_000)] = 200
    max_seconds: Annotated[float, Field(gt=0, le=3600)] = 60.0  # to read a PDF or HTML file


class PhoneSettings(BaseModel):
    """What `config.toml` sets (other tables, such as `[[mcp]]`, pass through)."""

    model_config = ConfigDict(extra="allow")

    model: str = ""
    """The local (Q4) GGUF; empty: none (requests then need the home node)."""
    api_port: Annotated[int, Field(ge=1, le=65535)] = 7733
    """The local API's port on 127.0.0.1 (`hearth serve`)."""
    api_running: Annotated[int, Field(ge=1, le=64)] = 2
    """API requests answered at once (the home node takes 2 of one phone's at once by
    default: its `per_peer`); the rest wait their turn, in order."""
    api_queue: Annotated[int, Field(ge=16, le=1024)] = 32
    """API requests that may wait for their turn; one more is `busy` (429, Retry-After)."""
    api_hosts: Annotated[list[HostName], Field(max_length=16)] = Field(default_factory=list)
    """Host names the API accepts besides 127.0.0.1, localhost and [::1] (with the API's
    port unless one is given), e.g. `host.docker.internal` for a front end in a container."""
    limits: Limits = PHONE_LIMITS
    """What a request asks the planner to keep to (the phone enforces it)."""
    history_turns: Annotated[int, Field(ge=0, le=64)] = 8
    """Earlier turns of a conversation sent with a request (the most recent ones)."""
    history_chars: Annotated[int, Field(ge=0, le=200_000)] = 8000
    """At most this many characters of them (older turns are dropped first)."""
    documents: DocumentLimits = DocumentLimits()
    """Size and page limits of attached documents."""
    timezone: str = ""
    """The phone's time zone, an IANA name such as `Europe/Berlin` (empty: this host's)."""
    clock: str = ""
    """The phone's clock, an ISO 8601 date-time with its offset: it reads that when the
    process starts and runs on from there (empty: the system clock)."""

    @field_validator("timezone")
    @classmethod
    def _is_a_zone(cls, value: str) -> str:
        if value:
            from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

            try:
                ZoneInfo(value)
            except (ValueError, OSError, ZoneInfoNotFoundError):  # a folder of zones too
                raise ValueError(f"no time zone named {value!r} (an IANA name)") from None
        return value

    @field_validator("clock")
    @classmethod
    def _is_a_moment(cls, value: str) -> str:
        if value:
            import datetime as dt

            try:
                moment = dt.datetime.fromisoformat(value)
            except ValueError:
                raise ValueError("not an ISO 8601 date-time") from None
            if moment.utcoffset() is None:
                raise ValueError("give its UTC offset, e.g. 2026-12-07T09:00:00+01:00")
            if not 1900 <= moment.year <= 9000:
                raise ValueError("a date-time between the years 1900 and 9000")
        return value

    @field_validator("limits", mode="before")
    @classmethod
    def _over_the_phones_defaults(cls, value: Any) -> Any:
        """A partial `[limits]` table changes its own keys; the rest keep the phone's
        defaults (not the wire model's)."""
        if isinstance(value, dict):
            return PHONE_LIMITS.model_dump() | value
        return value

    @field_validator("model")
    @classmethod
    def _is_a_gguf(cls, value: str, info: ValidationInfo) -> str:
        """On `set`, the file must be there and be a GGUF (a model moved away later is
        reported when it is needed, not by every command)."""
        if not value or not (info.context or {}).get("set"):
            return value
        path = Path(value).expanduser()
        if not path.is_file():
            raise ValueError(f"no file at {path}")
        with path.open("rb") as f:
            if f.read(4) != GGUF_MAGIC:
                raise ValueError(f"{path} is not a GGUF model file")
        return str(path.resolve())


def keys() -> list[str]:
    """Every key `get` and `set` take: `model`, `api_port`, `limits.max_steps`, …"""
    out: list[str] = []
    for name, field in PhoneSettings.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            out += [f"{name}.{sub}" for sub in kind.model_fields]
        else:
            out.append(name)
    return out


def load_settings(home: Path) -> PhoneSettings:
    """The settings in force (defaults for what the file leaves out)."""
    path = home / CONFIG_FILE
    return validated(PhoneSettings, read_toml(path), path)


def settings_in_force(home: Path) -> dict[str, Any]:
    """Every setting by its key, with the value in force."""
    dumped = load_settings(home).model_dump(mode="json")
    return {key: _at(dumped, key) for key in keys()}


def get_setting(home: Path, key: str) -> Any:
    """One setting's value in force (a `limits.*` key names one limit)."""
    return _at(load_settings(home).model_dump(mode="json"), _known(key))


def set_setting(home: Path, key: str, value: str) -> Any:
    """Set `key` to `value` (read as its setting's type), checked before anything is
    written; returns the value as stored."""
    import tomlkit

    path = home / CONFIG_FILE
    read_toml(path)  # a file that does not parse is reported as such first
    document = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
    *tables, name = _known(key).split(".")
    where: Any = document
    for table in tables:
        where = where.setdefault(table, tomlkit.table())
    where[name] = value
    try:
        settings = PhoneSettings.model_validate(document.unwrap(), context={"set": True})
    except ValidationError as exc:
        problem = exc.errors(include_url=False)[0]
        where_ = ".".join(map(str, problem["loc"])) or key
        raise HearthError(ErrorCode.INVALID_INPUT, f"{where_}: {problem['msg']}") from None
    stored = _at(settings.model_dump(mode="json"), key)
    where[name] = stored  # typed, as pydantic read it: 7734, not "7734"
    write_secret(path, tomlkit.dumps(document).encode())
    return stored


def _known(key: str) -> str:
    if key not in keys():
        raise HearthError(
            ErrorCode.INVALID_INPUT, f"unknown setting {key!r}; settings: {', '.join(keys())}"
        )
    return key


def _at(settings: dict[str, Any], key: str) -> Any:
    value: Any = settings
    for part in key.split("."):
        value = value[part]
    return value
