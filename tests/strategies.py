"""Hypothesis strategies for every Hearth wire message."""

from __future__ import annotations

from hypothesis import strategies as st

from hearth.protocol.wire import messages as m
from hearth.protocol.wire.errors import ErrorCode

text = st.text(max_size=40)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=20)
step_ids = st.from_regex(r"[A-Za-z0-9_-]{1,8}", fullmatch=True)
tool_names = st.from_regex(r"[a-z_]{1,12}", fullmatch=True)
key32 = st.binary(min_size=32, max_size=32)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(text, children, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(text, json_values, max_size=4)
signed = st.builds(
    m.Signed, payload=st.binary(max_size=64), signature=st.binary(min_size=64, max_size=64)
)

chat = st.builds(
    m.ChatMessage, role=st.sampled_from(["system", "user", "assistant", "tool"]), content=text
)
tool_spec = st.builds(
    m.ToolSpec,
    function=st.builds(
        m.FunctionSpec,
        name=tool_names,
        description=text,
        parameters=st.just({"type": "object", "properties": {"x": {"type": "string"}}}),
    ),
)
observation = st.builds(
    m.Observation,
    step_id=step_ids,
    status=st.sampled_from(["ok", "error", "refused", "skipped"]),
    result=json_values,
    error=st.none() | text,
)

MESSAGES = {
    m.PlanRequest: st.builds(
        m.PlanRequest,
        request_id=ids,
        conversation=st.lists(chat, max_size=3),
        tools=st.lists(tool_spec, max_size=2),
        node_tools=st.lists(tool_names, max_size=2),
    ),
    m.Progress: st.builds(m.Progress, request_id=ids, stage=text, detail=text),
    m.Token: st.builds(m.Token, request_id=ids, text=text, thinking=st.booleans()),
    m.ActionPlan: st.builds(m.ActionPlan, request_id=ids, plan=signed),
    m.Observations: st.builds(
        m.Observations,
        request_id=ids,
        plan_id=ids,
        round=st.integers(1, 9),
        results=st.lists(observation, max_size=3),
    ),
    m.Final: st.builds(m.Final, request_id=ids, answer=text, rounds=st.integers(0, 9)),
    m.Cancel: st.builds(m.Cancel, request_id=st.none() | ids, reason=text),
    m.ErrorFrame: st.builds(
        m.ErrorFrame,
        code=st.sampled_from(list(ErrorCode)),
        message=text,
        retry_after=st.none() | st.floats(0, 100),
        request_id=st.none() | ids,
    ),
    m.HealthRequest: st.builds(m.HealthRequest),
    m.Health: st.builds(
        m.Health,
        peer_id=ids,
        name=text,
        roles=st.lists(text, max_size=3),
        sessions=st.integers(0, 99),
        queue=st.integers(0, 99),
    ),
    m.PairRequest: st.builds(
        m.PairRequest,
        token=key32,
        name=st.text(max_size=20),
        device=st.sampled_from(["phone", "node"]),
    ),
    m.PairResult: st.builds(
        m.PairResult,
        member=ids,
        roles=st.lists(text, max_size=2),
        swarm_key=key32,
        roster=signed,
        founder=ids,
        node=ids,
        addrs=st.lists(text, max_size=2),
    ),
    m.RosterUpdate: st.builds(m.RosterUpdate, roster=signed),
    m.RosterPull: st.builds(m.RosterPull, have=st.integers(0, 99)),
    m.SwarmKeyRotation: st.builds(
        m.SwarmKeyRotation,
        key=key32,
        key_id=st.integers(1, 9),
        previous_valid_until=st.floats(0, 1e10),
        roster_version=st.integers(1, 99),
    ),
    m.OnionKeysRequest: st.builds(m.OnionKeysRequest),
    m.OnionKeys: st.builds(
        m.OnionKeys,
        announcements=st.lists(
            st.builds(m.SignedAnnouncement, peer_id=ids, signed=signed), max_size=3
        ),
    ),
    m.SearchPacket: st.builds(m.SearchPacket, data=st.binary(max_size=2048)),
    m.SearchReply: st.builds(m.SearchReply, data=st.binary(max_size=2048)),
}
any_message = st.one_of(*MESSAGES.values())
