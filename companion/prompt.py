"""The prompt builder: every planner's input, built in one place from labelled values.

A request's planner reads the request, the earlier turns of its conversation (or the
app's own messages) and the attached documents. `Prompt` holds them with their
labels: the user's request is clean; each earlier message carries what it was kept
with (`conversations.TurnLabels`); a message an app hands in as a tool result or as
an assistant's answer is untrusted; a document is private and untrusted (source
`document:NAME`). For each destination the builder gives what that planner may read
(the egress judges each earlier message for it, as it judges observations) and the
labels of all of it, which the plan session starts with. Every text that is not the
request itself is made inert (`protocol.model.inert`) for whichever model reads it: the
phone's own, the home's or a friend's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import reduce

from pydantic import ValidationError

from hearth.protocol.model.inert import Inert
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, DeviceContext, Limits, PlanRequest, ToolSpec

from .conversations import REDACTED_TEXT, KeptTurn, labelled_history
from .documents import Document, within_a_frame
from .egress import REDACTED, REDACTED_ERROR, Destination, Egress
from .events import AskRequest
from .labels import CLEAN, Labels

APP_TOOL_RESULT = "a tool result the app handed in"
EARLIER_TURN = "an earlier turn"  # where a session read private history
APP_ANSWER = "an answer the app handed in"
APP_GIVEN = frozenset({APP_TOOL_RESULT, APP_ANSWER})
"""What an app hands in that may quote the owner's data (the phone's earlier answers,
the results of tools the app ran on it): a private read for the session that reads it."""
CHARS_PER_TOKEN = 3  # schemas and text: counted long (real tokenizers give 3.5 to 4)
TEMPLATE_TOKENS = 512  # the chat template, the tool-call format, the system prompt
INERT = Inert()  # the common templates' markers: every model here is read through one
REDACTED_JSON = json.dumps(REDACTED)  # a redacted result, as history shows it


def document_labels(document: Document) -> Labels:
    """An attached document: the owner's (private), written by anyone (untrusted)."""
    return Labels(private=True, untrusted=frozenset({f"document:{document.name}"}))


def given_labels(message: ChatMessage) -> Labels:
    """A message an app keeps itself: a tool result it ran is untrusted input, and so is
    an assistant's answer (a planner wrote it, maybe after reading a page: the app
    resends it without its labels)."""
    if message.role == "tool":
        return Labels(untrusted=frozenset({APP_TOOL_RESULT}))
    if message.role == "assistant":
        return Labels(untrusted=frozenset({APP_ANSWER}))
    return CLEAN


def given(message: ChatMessage, destination: Destination) -> tuple[ChatMessage, Labels]:
    """A message an app keeps itself, as `destination`'s planner may read it: a friend's
    reads a redaction marker for an answer or tool result (`APP_GIVEN`: they may quote
    the owner's data, and the app's copy carries no labels that would say so)."""
    labels = given_labels(message)
    if destination is Destination.FRIEND and labels.untrusted & APP_GIVEN:
        return message.model_copy(update={"content": REDACTED_TEXT}), labels
    return message, labels


@dataclass(frozen=True)
class Prompt:
    """What a request's planner may read, labelled, per destination."""

    text: str | None  # the request; None: the conversation ends with what to answer
    history: dict[Destination, list[tuple[ChatMessage, Labels]]] = field(default_factory=dict)
    documents: list[Document] = field(default_factory=list)
    out_after_private: tuple[str, ...] = ()  # the conversation's covered open-world calls

    def earlier(self, destination: Destination, inert: Inert = INERT) -> list[ChatMessage]:
        """The earlier messages `destination`'s planner may read, inert (`inert`: the
        reading model's own, where the phone knows it)."""
        return [
            m.model_copy(update={"content": inert(m.content)})
            for m, _ in self.history.get(destination, [])
        ]

    def conversation(self, destination: Destination) -> list[ChatMessage]:
        """The messages for `destination`'s planner: the earlier ones, then the request."""
        current = [] if self.text is None else [ChatMessage(role="user", content=self.text)]
        return [*self.earlier(destination), *current]

    def labels(self, destination: Destination, documents_sent: list[bool] | None = None) -> Labels:
        """Everything `destination`'s planner reads, its labels joined: what its session
        starts with (`documents_sent`: which documents go to it; the phone reads all)."""
        read = [labels for _, labels in self.history.get(destination, [])]
        read += [document_labels(d) for d in self._sent(documents_sent)]
        return reduce(Labels.__or__, read, CLEAN)

    def private_reads(
        self, destination: Destination, documents_sent: list[bool] | None = None
    ) -> frozenset[str]:
        """Where `destination`'s planner reads private data in its input: an earlier turn
        it may see whole, an answer or tool result an app hands in (`APP_GIVEN`: the
        app's copy carries no labels), a document (`document:NAME`)."""
        history = self.history.get(destination, [])
        turns = {EARLIER_TURN for _, labels in history if labels.private}
        turns |= {s for _, labels in history for s in labels.untrusted & APP_GIVEN}
        return frozenset(turns | {f"document:{d.name}" for d in self._sent(documents_sent)})

    def shown(self, destination: Destination, documents_sent: list[bool] | None = None) -> str:
        """What `destination`'s planner is shown beside the request (the earlier messages,
        newest first, and the documents sent): what the tools it is offered are chosen
        from too. A redaction points to no tool."""
        earlier = [
            m.content
            for m, _ in reversed(self.history.get(destination, []))
            if REDACTED_ERROR not in m.content and m.content != REDACTED_JSON
        ]
        return "\n".join([*earlier, *(d.text for d in self._sent(documents_sent))])

    def _sent(self, documents_sent: list[bool] | None) -> list[Document]:
        """The documents that go to the planner (`None`: all, as on the phone)."""
        if documents_sent is None:
            return list(self.documents)
        return [d for d, ok in zip(self.documents, documents_sent, strict=False) if ok]

    def offer(
        self,
        tools: list[ToolSpec],
        matched: frozenset[str],
        *,
        n_ctx: int,
        max_tokens: int,
        destination: Destination,
        held: str = "",
        chars_per_token: float | None = None,
    ) -> list[ToolSpec]:
        """`tools` cut to what fits the planner's context of `n_ctx` tokens (0: unknown,
        none cut) beside the conversation, what the planner `held` already (the results
        of the rounds so far) and the answer's `max_tokens`, counted in the planner's
        `chars_per_token` (its node measures it; unknown: `CHARS_PER_TOKEN`): ranked for
        the cut (those the request's words point to first), offered in the order given.
        `invalid_input`, naming the sizes, when the conversation alone does not fit, or a
        tool the request points to does not."""
        if n_ctx <= 0:
            return tools
        cpt = chars_per_token or CHARS_PER_TOKEN
        asked = sum(_tokens(m.content, cpt) for m in self.conversation(destination))
        asked += _tokens(held, cpt) if held else 0
        used = asked + max_tokens + TEMPLATE_TOKENS
        if used > n_ctx:
            raise HearthError(
                ErrorCode.INVALID_INPUT,
                f"the request with its history is about {asked} tokens and the answer may take "
                f"{max_tokens}; the planner's context holds {n_ctx} tokens: ask with less "
                "history (a new conversation) or a shorter request",
            )
        ranked = sorted(tools, key=lambda t: t.function.name not in matched)  # stable
        offered: set[str] = set()
        for tool in ranked:
            size = _tokens(tool.model_dump_json(), cpt)
            if used + size > n_ctx:
                if tool.function.name in matched:
                    raise HearthError(
                        ErrorCode.INVALID_INPUT,
                        f"the tools this request names do not fit the planner's context of "
                        f"{n_ctx} tokens: {tool.function.name} is about {size} tokens, "
                        f"{n_ctx - used} are left beside the request ({asked}) and its answer "
                        f"({max_tokens})",
                    )
                break
            offered.add(tool.function.name)
            used += size
        return [t for t in tools if t.function.name in offered]  # in the order given

    def local_text(self, inert: Inert = INERT) -> str | None:
        """The request for the phone's own model, the documents after it (inert)."""
        if self.text is None or not self.documents:
            return self.text
        attached = (f"Attached {inert(d.name)}:\n{inert(d.text)}" for d in self.documents)
        return "\n\n".join([self.text, *attached])

    def plan_request(
        self,
        destination: Destination,
        *,
        request_id: str,
        request: AskRequest,
        tools: list[ToolSpec],
        limits: Limits,
        device: DeviceContext,
        egress: Egress,
        documents_sent: list[bool],
    ) -> PlanRequest:
        """The plan request to the home node or a friend's (`invalid_input` when it holds
        more than a request may, or does not fit one frame)."""
        documents = zip(self.documents, documents_sent, strict=False)
        try:
            planned = PlanRequest(
                request_id=request_id,
                tools=tools,
                limits=limits,
                conversation=self.conversation(destination),
                device=device,
                tool_choice=request.tool_choice,
                thinking=request.thinking,
                generation=request.generation,
                documents=[
                    d.part().model_copy(update={"text": INERT(d.text)})
                    for d, sent in documents
                    if sent
                ],
            )
        except ValidationError as exc:  # documents beyond the request's limits, say
            problem = exc.errors(include_url=False, include_input=False)[0]
            raise HearthError(ErrorCode.INVALID_INPUT, problem["msg"]) from None
        return within_a_frame(egress.request(planned))  # before it is sent


def _tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    return int(len(text) / chars_per_token) + 1


def build(
    request: AskRequest,
    turns: list[KeptTurn],
    documents: list[Document],
    egress: Egress,
    *,
    text: str | None,
    max_turns: int,
    max_chars: int,
) -> Prompt:
    """The prompt of `request` (`text`: what to answer; None: the conversation ends
    with it): the app's own messages when it gives them, else the conversation's kept
    `turns` as each destination may see them."""
    history: dict[Destination, list[tuple[ChatMessage, Labels]]] = {}
    for destination in Destination:
        if request.history:
            history[destination] = [given(m, destination) for m in request.history]
        else:
            history[destination] = labelled_history(
                turns, egress, destination, max_turns=max_turns, max_chars=max_chars
            )
    spent = tuple(dict.fromkeys(t for turn in turns for t in turn.labels.out_after_private))
    return Prompt(text=text, history=history, documents=documents, out_after_private=spent)
