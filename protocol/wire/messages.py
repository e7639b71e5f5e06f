"""Every frame type of the Hearth protocols, as frozen pydantic models.

On the wire a frame is one msgpack map: the model's fields plus `t` (type tag) and
`v` (protocol version). Unknown fields are ignored, so shapes can grow within a
version; missing or ill-typed fields are a protocol error.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, JsonValue, model_validator

from .chat import ChatMessage as ChatMessage  # re-exported: one conversation turn
from .chat import Model as Model  # re-exported: the base of every wire value
from .errors import ErrorCode, HearthError
from .generation import MAX_STOPS as MAX_STOPS  # re-exported: an app's generation settings
from .generation import AnswerSettings as AnswerSettings
from .generation import Usage as Usage

PROTOCOL_VERSION = 1

Id = Annotated[str, Field(min_length=1, max_length=128)]
StepId = Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]{1,32}$")]
ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]
Digest = Annotated[bytes, Field(min_length=32, max_length=32)]
Key32 = Annotated[bytes, Field(min_length=32, max_length=32)]


class Message(Model):
    """A frame: a model with a type tag."""

    TYPE: ClassVar[str]


# -- values carried inside frames -------------------------------------------------


class FunctionSpec(Model):
    """An OpenAI-format function: name, description and JSON-schema parameters."""

    name: ToolName
    description: str = ""
    parameters: dict[str, JsonValue] = Field(default_factory=dict)


class ToolSpec(Model):
    """A tool schema as the phone sends it (OpenAI function format)."""

    type: Literal["function"] = "function"
    function: FunctionSpec


def _aware_date_time(value: str | None) -> str | None:
    """An ISO 8601 date-time with its UTC offset (a planner reads it as the phone's
    time: without the offset it would be a guess)."""
    if value is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError("local_time: not an ISO 8601 date-time") from exc
    if moment.utcoffset() is None:
        raise ValueError("local_time: a date-time with its UTC offset")
    if not 1900 <= moment.year <= 9000:  # in UTC and in any zone, a real date
        raise ValueError("local_time: a date-time between the years 1900 and 9000")
    return value


LocalTime = Annotated[str | None, Field(max_length=40), AfterValidator(_aware_date_time)]
ZoneName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_+./-]{1,64}$")]


class DeviceContext(Model):
    """What the phone says about itself; `None` where it does not know. `local_time` is
    the phone's date-time when the request was asked, with its UTC offset, and
    `timezone` its zone (an IANA name where the phone knows it)."""

    timezone: ZoneName = "UTC"
    local_time: LocalTime = None
    locale: str = "en"
    battery: Annotated[int, Field(ge=0, le=100)] | None = None
    charging: bool | None = None
    network: Literal["wifi", "cellular", "ethernet", "offline", "unknown"] = "unknown"
    metered: bool | None = None


MAX_DOCUMENTS = 16  # attached to one request
MAX_UNTRUSTED_INPUTS = 64  # named by one plan or answer: more is a flood, not a record
MAX_DOCUMENT_CHARS = 1_000_000  # what any request may attach in all (a frame is 1 MiB)


class Limits(Model):
    """Bounds the phone sets on a plan session."""

    max_steps: Annotated[int, Field(ge=1, le=64)] = 8
    max_rounds: Annotated[int, Field(ge=1, le=16)] = 4
    deadline_s: Annotated[float, Field(gt=0, le=3600)] = 120.0
    max_tokens: Annotated[int, Field(ge=1, le=8192)] = 512
    max_thinking_tokens: Annotated[int, Field(ge=1, le=32768)] = 1024  # when `thinking`
    max_value_chars: Annotated[int, Field(ge=1, le=1_000_000)] | None = None  # per string value
    max_document_chars: Annotated[int, Field(ge=0, le=MAX_DOCUMENT_CHARS)] = 200_000  # in all


class DocumentPart(Model):
    """An attached document's text, as the phone read it (pages: 0 when it has none)."""

    name: Annotated[str, Field(min_length=1, max_length=255)]
    pages: Annotated[int, Field(ge=0, le=100_000)] = 0
    text: str


class PlanStep(Model):
    """One tool call of a plan; an argument may be `{"$ref": "s1.result.field"}`."""

    id: StepId
    tool: ToolName
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    depends_on: list[StepId] = Field(default_factory=list)


class UntrustedInput(Model):
    """A node-side tool result the planner consumed, with where it came from."""

    tool: ToolName
    source: Annotated[str, Field(max_length=512)]
    digest: Digest


class Plan(Model):
    """The signed body of an action plan: bound to one phone, session, round and request."""

    plan_id: Id
    signer: Id
    audience: Id
    session_id: Id
    round: Annotated[int, Field(ge=1)]
    request_id: Id
    request_hash: Digest
    transcript_hash: Digest
    issued_at: float
    expires_at: float
    untrusted_inputs: Annotated[list[UntrustedInput], Field(max_length=MAX_UNTRUSTED_INPUTS)] = (
        Field(default_factory=list)
    )
    steps: list[PlanStep]


class Signed(Model):
    """Opaque signed bytes: verify the signature first, decode the payload after."""

    payload: bytes
    signature: Annotated[bytes, Field(min_length=64, max_length=64)]


class Observation(Model):
    """What one step did, as the phone's policy lets it be told."""

    step_id: StepId
    status: Literal["ok", "error", "refused", "skipped", "timed_out"]
    result: JsonValue = None
    error: str | None = None
    untrusted: bool = False
    source: str | None = None


class ModelInfo(Model):
    """The model a node serves."""

    name: str
    quant: str = ""
    n_ctx: int = 0
    backend: str = ""
    chars_per_token: Annotated[float, Field(ge=0.5, le=16)] | None = None
    """How many characters of tool schemas one of its tokens holds, as its tokenizer
    counts them (None: not known), so a phone cuts the tools it offers to fit."""


# -- frames ------------------------------------------------------------------------


class PlanRequest(Message):
    """Phone → node: plan this request with these tools."""

    TYPE = "plan_request"
    request_id: Id
    conversation: list[ChatMessage]
    tools: list[ToolSpec] = Field(default_factory=list)
    device: DeviceContext = Field(default_factory=DeviceContext)
    limits: Limits = Field(default_factory=Limits)
    node_tools: list[ToolName] = Field(default_factory=list)
    thinking: bool = False
    tool_choice: Literal["auto", "required", "none"] = "auto"  # for the first round
    documents: Annotated[list[DocumentPart], Field(max_length=MAX_DOCUMENTS)] = Field(
        default_factory=list
    )
    """Attached documents (an older node ignores them); the node reads a long one in
    chunks, streaming `Progress(stage="reading")`, and plans with what it read."""
    generation: AnswerSettings | None = None  # an app's sampling (an older node ignores it)

    @model_validator(mode="after")
    def _documents_within_limits(self) -> PlanRequest:
        total = sum(len(d.text) for d in self.documents)
        if total > self.limits.max_document_chars:
            raise ValueError(
                f"documents hold {total} characters; the limit is {self.limits.max_document_chars}"
            )
        return self


class Progress(Message):
    """Node → phone: what the planner is doing."""

    TYPE = "progress"
    request_id: Id
    stage: str
    detail: str = ""
    # stage "reading": which of the request's documents (from 0), which chunk (from 1) of how many
    document: Annotated[int, Field(ge=0)] | None = None
    chunk: Annotated[int, Field(ge=0)] | None = None
    chunks: Annotated[int, Field(ge=0)] | None = None


class Token(Message):
    """Node → phone: streamed model text (thinking flagged)."""

    TYPE = "token"
    request_id: Id
    text: str
    thinking: bool = False


class ActionPlan(Message):
    """Node → phone: a signed `Plan` (verify before decode)."""

    TYPE = "action_plan"
    request_id: Id
    plan: Signed


class Observations(Message):
    """Phone → node: the results of a plan's steps."""

    TYPE = "observations"
    request_id: Id
    plan_id: Id
    round: Annotated[int, Field(ge=1)]
    results: list[Observation]
    tools: list[ToolSpec] = Field(default_factory=list)
    """Tools offered from the next round on, beside the request's: those what the rounds
    so far showed point to (an older node ignores them)."""


class Final(Message):
    """Node → phone: the answer; the session ends."""

    TYPE = "final"
    request_id: Id
    answer: str
    rounds: Annotated[int, Field(ge=0)] = 0
    usage: Usage | None = None  # every round's tokens, as the node's backend counted them
    finish: Literal["stop", "length"] = "stop"  # "length": the token limit cut the answer
    untrusted_inputs: Annotated[list[UntrustedInput], Field(max_length=MAX_UNTRUSTED_INPUTS)] = (
        Field(default_factory=list)
    )
    """What the node read itself before it answered (its own tools' results, the
    documents): the answer was written after reading them (an older phone ignores it)."""


class Cancel(Message):
    """Either side: stop this session."""

    TYPE = "cancel"
    request_id: Id | None = None
    reason: str = ""


class ErrorFrame(Message):
    """Either side: a typed error (code of the one table)."""

    TYPE = "error"
    code: ErrorCode
    message: str
    retry_after: float | None = None
    request_id: Id | None = None


class HealthRequest(Message):
    """Ask a member for its capabilities and load."""

    TYPE = "health_request"


class MemberAddrs(Model):
    """Where a member was last reached, as its home knows it (a phone dials it later)."""

    peer_id: Id
    addrs: Annotated[list[Annotated[str, Field(max_length=1024)]], Field(max_length=16)]


class Health(Message):
    """Capabilities, load and model info, for routing and status."""

    TYPE = "health"
    peer_id: Id
    name: str = ""
    roles: list[str] = Field(default_factory=list)
    model: ModelInfo | None = None
    sessions: Annotated[int, Field(ge=0)] = 0
    queue: Annotated[int, Field(ge=0)] = 0
    capacity: Annotated[int, Field(ge=0)] = 0
    version: str = ""
    addrs: Annotated[list[str], Field(max_length=64)] = Field(default_factory=list)
    """Where the node listens, then circuit addresses through its relays."""
    members: Annotated[list[MemberAddrs], Field(max_length=64)] = Field(default_factory=list)
    """Members a phone may dial (the `planner` role), for a phone member only."""


class PairRequest(Message):
    """Redeemer → node, on the pairing listener: the one-time token and who I am."""

    TYPE = "pair_request"
    token: Key32
    name: Annotated[str, Field(max_length=64)] = ""
    device: Literal["phone", "node"] = "phone"


class PairResult(Message):
    """Node → redeemer: what it needs to join the swarm."""

    TYPE = "pair_result"
    member: Id
    roles: list[str]
    swarm_key: Key32
    roster: Signed
    founder: Id
    node: Id
    addrs: list[str]


class RosterUpdate(Message):
    """A signed roster (push on change, answer to a pull)."""

    TYPE = "roster"
    roster: Signed


class RosterPull(Message):
    """Ask for the newest roster; `have` is the version already held."""

    TYPE = "roster_pull"
    have: Annotated[int, Field(ge=0)] = 0


class SwarmKeyRotation(Message):
    """A new swarm key, sent to members on their authenticated streams after a revocation."""

    TYPE = "swarm_key"
    key: Key32
    key_id: Annotated[int, Field(ge=1)]
    previous_valid_until: float
    roster_version: Annotated[int, Field(ge=1)]


class SignedAnnouncement(Model):
    """A node's onion-key announcement, signed by that node (verify, then decode)."""

    peer_id: Id
    signed: Signed


MAX_ANNOUNCEMENTS = 256  # onion-key announcements in one message


class OnionKeysRequest(Message):
    """Member → node on `/hearth/search/1`: the onion-key announcements you hold."""

    TYPE = "onion_keys_request"


class OnionKeys(Message):
    """Onion-key announcements, answered to a request or pushed to the founder."""

    TYPE = "onion_keys"
    announcements: Annotated[list[SignedAnnouncement], Field(max_length=MAX_ANNOUNCEMENTS)]


class SearchPacket(Message):
    """One onion request packet (its size is checked, and counted, by the hop)."""

    TYPE = "search_packet"
    data: Annotated[bytes, Field(max_length=64 * 1024)]


class SearchReply(Message):
    """One onion reply (fixed size on every link)."""

    TYPE = "search_reply"
    data: Annotated[bytes, Field(max_length=64 * 1024)]


MESSAGE_TYPES: dict[str, type[Message]] = {
    cls.TYPE: cls
    for cls in (
        PlanRequest,
        Progress,
        Token,
        ActionPlan,
        Observations,
        Final,
        Cancel,
        ErrorFrame,
        HealthRequest,
        Health,
        PairRequest,
        PairResult,
        RosterUpdate,
        RosterPull,
        SwarmKeyRotation,
        OnionKeysRequest,
        OnionKeys,
        SearchPacket,
        SearchReply,
    )
}


def error_frame(exc: Exception, request_id: str | None = None) -> ErrorFrame:
    """The error frame for an exception: its own code if it has one, else `internal`."""
    if isinstance(exc, HearthError):
        return ErrorFrame(
            code=exc.code, message=exc.message, retry_after=exc.retry_after, request_id=request_id
        )
    return ErrorFrame(code=ErrorCode.INTERNAL, message=type(exc).__name__, request_id=request_id)
