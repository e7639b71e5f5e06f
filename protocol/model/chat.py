"""Rendering a conversation with the model's own chat template (Jinja2, sandboxed).

A plan session keeps its model state between rounds, so later rounds are rendered
as a continuation: only the text that the new messages add after the previous
assistant turn, never a re-rendering of what the model already read.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from jinja2.sandbox import ImmutableSandboxedEnvironment

from hearth.protocol.wire.errors import ErrorCode, HearthError

from .callformats import (
    PROBE_TOOL,
    QWEN_XML,
    CallFormat,
    UnsupportedModel,
    default_template,
    format_of,
)

Message = dict[str, Any]
PROBE = {  # the one tool a template is judged with
    "type": "function",
    "function": {
        "name": PROBE_TOOL,
        "description": "probe",
        "parameters": {"type": "object", "properties": {}},
    },
}


def _raise(message: str) -> None:
    raise HearthError(ErrorCode.INVALID_INPUT, f"chat template: {message}")


class ChatTemplate:
    """A model's chat template, ready to render conversations with tools."""

    def __init__(
        self,
        source: str,
        *,
        eos_token: str = "<|im_end|>",
        bos_token: str = "",
        call_format: CallFormat = QWEN_XML,
    ) -> None:
        self.call_format = call_format
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.filters["tojson"] = lambda value, indent=None: json.dumps(
            value, ensure_ascii=False, indent=indent
        )
        env.globals["raise_exception"] = _raise
        self._template = env.from_string(source)
        self.chatml = "<|im_start|>" in source  # ChatML turns: a continuation can be cut out
        self.dated = "date_string" in source  # it states the time itself (Llama 3.x's do)
        self.eos_token = eos_token
        self.bos_token = bos_token
        self.time_in_user = not self.dated and self._system_before_tools()

    def _system_before_tools(self) -> bool:
        """Whether this template writes the system message before the tools (Hermes-style
        templates do): the time line then goes with the request, so the tools block stays
        the prompt's shared, cached start."""
        probe = [
            {"role": "system", "content": "hearth-time-probe"},
            {"role": "user", "content": "hi"},
        ]
        try:
            text = self.render(probe, [PROBE])
        except Exception:  # a template's own error: it is judged when the model loads
            return False
        line, tools = text.find("hearth-time-probe"), text.find(PROBE_TOOL)
        return 0 <= line < tools

    @classmethod
    def for_model(cls, source: str, model: str, *, bos_token: str = "") -> ChatTemplate:
        """A GGUF's own template (`source`; a model without one gets `default_template`)
        with the call format it teaches; `UnsupportedModel` when it teaches none Hearth
        reads, or cannot render a conversation with tools."""
        text = source or default_template()
        try:
            template = cls(text, bos_token=bos_token)
        except Exception as exc:  # Jinja's syntax errors, whatever their type
            raise UnsupportedModel(model, f"its chat template does not compile ({exc})") from exc
        probe = [{"role": "user", "content": "hello"}]
        try:
            rendered = template.render(probe, [PROBE])
        except Exception as exc:  # a template's own error, whatever its type
            raise UnsupportedModel(model, f"its chat template fails to render ({exc})") from exc
        found = format_of(rendered, text)
        if found is None:
            raise UnsupportedModel(
                model, "its chat template teaches no tool-call format Hearth reads"
            )
        template.call_format = found
        return template

    def render(
        self,
        messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        *,
        add_generation_prompt: bool = True,
        thinking: bool = False,
        now: str | None = None,
    ) -> str:
        """The conversation as the model reads it; `now` (the phone's time, as
        `phone_time` words it) goes to the template's `date_string` where it has one,
        else into one system line."""
        dated: dict[str, str] = {}
        if now and self.dated:
            dated["date_string"] = now
        elif now:
            messages = with_time_line(messages, now, in_request=self.time_in_user)
        return self._template.render(
            messages=messages,
            tools=tools or None,
            add_generation_prompt=add_generation_prompt,
            enable_thinking=thinking,
            eos_token=self.eos_token,
            bos_token=self.bos_token,
            **dated,
        )

    def continuation(
        self,
        history: list[Message],
        new_messages: list[Message],
        tools: list[dict[str, Any]] | None = None,
        *,
        thinking: bool = False,
        now: str | None = None,
    ) -> str | None:
        """The text after the last assistant turn of `history` (which ends with it) up to
        the next generation prompt; None if the template renders history differently
        once new messages follow, or its turns are not ChatML's (then the caller renders
        everything again)."""
        if not self.chatml:  # where its turns end is the template's own: render anew
            return None
        before = self.render(
            history, tools, add_generation_prompt=False, thinking=thinking, now=now
        )
        after = self.render(history + new_messages, tools, thinking=thinking, now=now)
        if not after.startswith(before):
            return None
        return self.eos_token + "\n" + after[len(before) :]


USER_TURN = "<|im_start|>user"
TIME_LINE = "The phone's local time: {now}."


def phone_time(now: dt.datetime) -> str:
    """An aware date-time as every planner reads the phone's time:
    `2026-12-07 10:53, Monday (Europe/Berlin, UTC+01:00)` (no zone name where it has
    none, only its offset)."""
    offset = now.strftime("%z") or "+0000"
    utc = f"UTC{offset[:3]}:{offset[3:5]}"
    zone = getattr(now.tzinfo, "key", None)
    where = f"{zone}, {utc}" if zone else utc
    return f"{now:%Y-%m-%d %H:%M}, {now:%A} ({where})"


def stated_time(local_time: str | None, zone: str) -> str | None:
    """The phone's time as a request carries it (`DeviceContext.local_time`, its
    `timezone`), as `phone_time` words it; None when the request carries none."""
    if local_time is None:
        return None
    moment = dt.datetime.fromisoformat(local_time)
    try:
        named = moment.astimezone(ZoneInfo(zone))
    except (ValueError, OverflowError, OSError, ZoneInfoNotFoundError):
        return phone_time(moment)  # a zone this host does not know: the offset says it
    return phone_time(named if named.utcoffset() == moment.utcoffset() else moment)


def with_time_line(messages: list[Message], now: str, *, in_request: bool = False) -> list[Message]:
    """`messages` with the phone's time in their system message (one is added first
    when there is none), or (`in_request`) as the first line of the last user message."""
    line = TIME_LINE.format(now=now)
    if in_request:
        last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=None)
        if last is not None:
            told = {**messages[last], "content": f"{line}\n\n{messages[last].get('content') or ''}"}
            return [*messages[:last], told, *messages[last + 1 :]]
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        content = first.get("content") or ""
        return [{**first, "content": f"{content}\n\n{line}" if content else line}, *messages[1:]]
    return [{"role": "system", "content": line}, *messages]


def split_at_first_user_turn(prompt: str) -> tuple[str, str]:
    """`(prefix, rest)`: everything before the first user turn (system prompt, tool
    schemas) is the same for every request with the same tools, so a runtime can keep
    it evaluated; `("", prompt)` when there is no user turn."""
    prefix, sep, rest = prompt.partition(USER_TURN)
    return (prefix, sep + rest) if sep else ("", prompt)


def split_shared(prompt: str, now: str | None = None) -> tuple[str, str]:
    """`(prefix, rest)` as `split_at_first_user_turn`, the phone's time (`now`, as the
    prompt states it) kept out of the prefix: it ends at the start of the line that
    states the time, so the tools block stays shared from one minute to the next."""
    prefix, rest = split_at_first_user_turn(prompt)
    at = prefix.find(now) if now else -1
    if at < 0:
        return prefix, rest
    line = prefix.rfind("\n", 0, at) + 1
    return prompt[:line], prompt[line:]
