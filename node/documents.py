"""Reading a request's documents before planning: whole when they fit, else map-reduce.

The planner's context has room for the tools, the conversation, the answer and
some document text. Documents that fit go in whole. A longer one is cut into
disjoint chunks that each fit the context with a short instruction (so every
token of it is read exactly once in the map stage), each chunk is summarised by
the model within a bounded number of tokens, and the summaries are combined
(reduce): joined when they fit, else read again the same way, a bounded number of
times. `Progress(stage="reading")` frames say which chunk is being read. A
document is untrusted input: the plans made after reading it say so.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from hearth.protocol.model.inert import Inert
from hearth.protocol.model.runtime import THINK_CLOSE, Sampling
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.messages import ChatMessage, DocumentPart, Limits, UntrustedInput

from .backends import Backend, Conversation, GenerationSettings, ignore_text
from .backends.llamacpp import LlamaCppBackend

UNKNOWN_CONTEXT = 4096  # tokens, for an upstream that does not say its context
TEMPLATE_MARGIN = 384  # tokens an upstream's chat template may add around messages and tools
WRAPPER = 32  # tokens of the message that carries one document to the planner
MAP_TEMPLATE = 64  # tokens the chat template adds around the map instruction and a chunk
MAX_SUMMARY_TOKENS = 256
MAX_LEVELS = 3  # reduce passes before what is left is cut to fit
CUT = "\n…(the rest did not fit)"
MAP_INSTRUCTION = (
    "You read one part of a longer document for someone planning a task with it. "
    "Summarise this part: keep names, dates, times, places, numbers and decisions; "
    "drop everything else. Answer with the summary only."
)

Count = Callable[[str], int]
# (stage, document, chunk, chunks): stage "reading" the document, "combining" its summaries
OnChunk = Callable[[str, int, int, int], Awaitable[None]]


COMMON_INERT = Inert()  # an upstream's tokenizer is unknown: the common templates' markers


def inert_for(backend: Backend) -> Inert:
    """What breaks chat-template markers in text for `backend`'s model, built once per
    model (its own special tokens too), not on every request."""
    return backend.inert if isinstance(backend, LlamaCppBackend) else COMMON_INERT


def special_tokens(backend: Backend) -> list[str]:
    """The texts of the node's own model's special tokens (none known for an upstream)."""
    return backend.runtime.special_texts if isinstance(backend, LlamaCppBackend) else []


def token_counter(backend: Backend) -> Count:
    """Exact counts with the node's own model; an upstream's tokenizer is unknown, so
    its text is counted as one token per two bytes (more than any real tokenizer)."""
    if isinstance(backend, LlamaCppBackend):
        runtime = backend.runtime
        return lambda text: len(runtime.tokenize(text))
    return lambda text: (len(text.encode()) + 1) // 2


@dataclass
class DocumentReading:
    """How one document was read."""

    name: str
    pages: int
    tokens: int  # of the document
    chunks: int = 0  # 0: it went in whole
    chunk_tokens: int = 0  # the document's tokens as the map stage read them
    evaluated: int = 0  # tokens the model evaluated in the map stage (instruction included)
    text: str = ""  # what planning gets: the document, or its combined summaries

    @property
    def once_share(self) -> float:
        """The share of the document's tokens read exactly once in the map stage (chunks
        are disjoint: 1.0 but for tokens split differently at a chunk's edge)."""
        if not self.chunks:
            return 1.0
        return min(self.tokens, self.chunk_tokens) / max(self.tokens, self.chunk_tokens, 1)


@dataclass
class Reading:
    """What planning gets from the documents: messages for the conversation, and the
    untrusted inputs the plans must name."""

    documents: list[DocumentReading] = field(default_factory=list)

    def messages(self) -> list[ChatMessage]:
        out = []
        for doc in self.documents:
            how = f", read in {doc.chunks} parts and summarised" if doc.chunks else ""
            pages = f", {doc.pages} pages" if doc.pages else ""
            out.append(
                ChatMessage(
                    role="user",
                    content=f"Attached document {json.dumps(doc.name)}{pages}{how}:\n{doc.text}",
                )
            )
        return out

    def untrusted(self) -> list[UntrustedInput]:
        return [
            UntrustedInput(
                tool="document",
                source=doc.name,
                digest=hashlib.sha256(doc.text.encode()).digest(),
            )
            for doc in self.documents
        ]


class DocumentReader:
    """Reads documents with one backend, within one request's limits."""

    def __init__(
        self,
        backend: Backend,
        sampling: Sampling,
        cancel: anyio.Event,
        on_chunk: OnChunk,
        count: Count | None = None,
        scope: str = "",
    ) -> None:
        self.backend = backend
        self.scope = scope  # whose request: the model state kept from its chunks is its own
        self.sampling = sampling
        self.cancel = cancel
        self.on_chunk = on_chunk
        self.count = count or token_counter(backend)
        self.inert = inert_for(backend)
        self.n_ctx = backend.info.n_ctx or UNKNOWN_CONTEXT
        self.summary_tokens = max(16, min(MAX_SUMMARY_TOKENS, self.n_ctx // 8))
        overhead = self.count(MAP_INSTRUCTION) + MAP_TEMPLATE
        self.chunk_tokens = max(1, self.n_ctx - self.summary_tokens - overhead)

    def room(self, limits: Limits, conv: Conversation, documents: int) -> int:
        """Tokens left for `documents` documents once the planning prompt (rendered with
        the node's own template, or estimated for an upstream) and the answer have theirs."""
        if isinstance(self.backend, LlamaCppBackend):
            used = self.count(self.backend.render(conv))
        else:
            openai = [conv.openai_messages(), conv.openai_tools()]
            used = self.count(json.dumps(openai)) + TEMPLATE_MARGIN
        # a block closed at its budget also holds its closing tokens (as the runtime counts)
        thought = limits.max_thinking_tokens + self.count(THINK_CLOSE) if conv.thinking else 0
        return max(0, self.n_ctx - used - limits.max_tokens - thought - WRAPPER * documents)

    async def read(self, documents: list[DocumentPart], room: int) -> Reading:
        """Each document whole if all fit in `room`, else each within its share of it."""
        texts = [self.inert(d.text) for d in documents]
        counts = [await anyio.to_thread.run_sync(self.count, t) for t in texts]
        readings = [
            DocumentReading(name=self.inert(d.name), pages=d.pages, tokens=n, text=t)
            for d, t, n in zip(documents, texts, counts, strict=True)
        ]
        if sum(counts) <= room:
            return Reading(readings)
        share = room // len(documents)
        for index, reading in enumerate(readings):
            if reading.tokens > share:
                await self._reduce(index, reading, share)
        return Reading(readings)

    async def _reduce(self, index: int, reading: DocumentReading, share: int) -> None:
        text = reading.text
        for level in range(MAX_LEVELS):
            chunks = await anyio.to_thread.run_sync(self._chunks, text)
            summaries = []
            for number, chunk in enumerate(chunks, 1):
                await self.on_chunk("combining" if level else "reading", index, number, len(chunks))
                summaries.append(await self._summary(reading, chunk, number, len(chunks), level))
            if level == 0:
                reading.chunks = len(chunks)
            # a summary of untrusted text is untrusted text: its markers are broken too
            parts = (f"[part {i}] {s.strip()}" for i, s in enumerate(summaries, 1))
            text = self.inert("\n".join(parts))
            if self.count(text) <= share:
                break
        reading.text = self._cut(text, share)

    async def _summary(
        self, reading: DocumentReading, chunk: str, number: int, chunks: int, level: int
    ) -> str:
        tokens = self.count(chunk)
        conv = Conversation(
            messages=[
                ChatMessage(role="system", content=MAP_INSTRUCTION),
                ChatMessage(role="user", content=f"Part {number} of {chunks}:\n{chunk}"),
            ],
            scope=self.scope,
        )
        result = await self.backend.generate(
            conv,
            grammar=None,
            settings=GenerationSettings(self.summary_tokens, self.sampling),
            on_text=ignore_text,
            cancel=self.cancel,
        )
        if result.finish == "cancelled":
            raise HearthError(ErrorCode.CANCELLED, "plan session cancelled")
        if level == 0:  # the document itself, not summaries of it
            reading.chunk_tokens += tokens
            reading.evaluated += result.prompt_tokens
        return result.text

    def _chunks(self, text: str) -> list[str]:
        """Disjoint, in order, each within `chunk_tokens`; cut at a page, line or word
        break where one is near (blocking: tokenizes)."""
        total = max(1, self.count(text))
        per_token = len(text) / total
        width = max(1, int(self.chunk_tokens * per_token * 0.9))
        chunks: list[str] = []
        start = 0
        while start < len(text):
            end = min(len(text), start + width)
            if end < len(text):
                for brk in ("\f", "\n", " "):
                    at = text.rfind(brk, start + width // 2, end)
                    if at > start:
                        end = at + 1
                        break
            while end - start > 1 and self.count(text[start:end]) > self.chunk_tokens:
                end = start + (end - start) // 2  # dense text: fewer characters per token
            chunks.append(text[start:end])
            start = end
        return chunks

    def _cut(self, text: str, tokens: int) -> str:
        """`text` within `tokens` (a marker says what was cut)."""
        if self.count(text) <= tokens:
            return text
        keep = max(0, int(len(text) * tokens / max(1, self.count(text)) * 0.9) - len(CUT))
        while keep and self.count(text[:keep] + CUT) > tokens:
            keep //= 2
        return text[:keep] + CUT
