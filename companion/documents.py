"""Attached documents: read on the phone, released off it only as the owner's policy says.

`read_document` turns a text, Markdown, HTML or PDF file into a `Document` (its text,
pages and size) within the phone's `documents` limits; anything it cannot read is
`invalid_input` saying why (unknown type, oversize, encrypted, unreadable). HTML
gives its visible text only (no scripts, styles or markup); PDF and HTML are parsed in
a child process bounded in time and memory (`document_text`). A document is private
data: `release` decides per file whether it may go to the home node
(`documents_to_home`: ask once per file and request, always, or never) and never
lets one go to a friend's planner. A request must fit one frame as sent (UTF-8: 200 000
emoji are 800 000 bytes): `within_a_frame` refuses one that does not before anything is
sent. `DocumentProgress` follows the node's reading progress and gives the
`hearth ask --json` "documents" list.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Annotated

import anyio
from pydantic import BaseModel, ConfigDict, Field

from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.frames import DEFAULT_MAX_FRAME, encode_body
from hearth.protocol.wire.messages import MAX_DOCUMENT_CHARS, DocumentPart, PlanRequest, Progress

from .confirm import Confirmation, Confirmer
from .document_text import Kind, extract
from .egress import Destination
from .policy import OwnerPolicy
from .results import DocumentView
from .settings import DocumentLimits

TEXT_SUFFIXES = frozenset({".txt", ".text", ".md", ".markdown"})
HTML_SUFFIXES = frozenset({".html", ".htm", ".xhtml"})
PDF_MAGIC = b"%PDF-"


class Document(BaseModel):
    """A document as read on the phone."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1, max_length=255)]
    pages: int = 0  # 0: a format without pages
    text: str
    chars: int

    def part(self) -> DocumentPart:
        """What a plan request carries of it."""
        return DocumentPart(name=self.name, pages=self.pages, text=self.text)


def _invalid(path: Path, why: str) -> HearthError:
    return HearthError(ErrorCode.INVALID_INPUT, f"cannot attach {_name(path)}: {why}")


def _name(path: Path) -> str:
    """The file's name as valid text: a name's bytes that are not UTF-8 become U+FFFD
    (Python holds them as lone surrogates, which no JSON or frame carries)."""
    return os.fsencode(path.name).decode("utf-8", "replace")


async def read_document(path: Path, limits: DocumentLimits) -> Document:
    """Read one attachment: the file off the event loop, a PDF or HTML page in a child
    process with bounded time and memory (`document_text`)."""
    data = await anyio.to_thread.run_sync(_read_bytes, path, limits.max_bytes)
    suffix = path.suffix.lower()
    kind: Kind | None = None
    if data.startswith(PDF_MAGIC) or suffix == ".pdf":
        kind = "pdf"
    elif suffix in HTML_SUFFIXES:
        kind = "html"
    elif suffix not in TEXT_SUFFIXES:
        kinds = ", ".join(sorted(TEXT_SUFFIXES | HTML_SUFFIXES | {".pdf"}))
        raise _invalid(path, f"unknown type {suffix or '(no suffix)'!r}; known: {kinds}")
    text, pages = "", 0
    if kind != "pdf":
        text = _decoded(path, data)  # HTML too must be UTF-8 text
    if kind is not None:
        read = await extract(
            kind,
            data,
            max_pages=limits.max_pages,
            max_chars=MAX_DOCUMENT_CHARS,
            seconds=limits.max_seconds,
        )
        if read.problem:
            raise _invalid(path, read.problem)
        text, pages = read.text, read.pages
    if len(text) > MAX_DOCUMENT_CHARS:
        raise _invalid(
            path, f"oversize: {len(text)} characters of text (at most {MAX_DOCUMENT_CHARS})"
        )
    return Document(name=_name(path)[:255] or "document", pages=pages, text=text, chars=len(text))


async def read_documents(paths: list[Path], limits: DocumentLimits) -> list[Document]:
    """Every attachment of a request, in order."""
    return [await read_document(p, limits) for p in paths]


def _read_bytes(path: Path, max_bytes: int) -> bytes:
    """A regular file's bytes, at most `max_bytes` (a FIFO or device is never opened
    for reading, so it cannot block; the size is checked on the open file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _invalid(path, f"unreadable ({exc.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise _invalid(path, "unreadable: not a regular file")
    with os.fdopen(fd, "rb") as f:
        if info.st_size > max_bytes:
            raise _invalid(path, f"oversize: {info.st_size} bytes (at most {max_bytes})")
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew while being read
        raise _invalid(path, f"oversize: more than {max_bytes} bytes")
    return data


def _decoded(path: Path, data: bytes) -> str:
    if b"\0" in data:
        raise _invalid(path, "unreadable: binary content, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _invalid(path, "unreadable: not UTF-8 text") from None


async def release(
    documents: list[Document],
    policy: OwnerPolicy,
    confirmer: Confirmer,
    *,
    request_id: str,
    destination: Destination,
) -> list[bool]:
    """Whether each document may go to `destination`, in order: to the home node as
    `documents_to_home` says (asking the confirmer once per file; `--yes` answers it,
    since the user chose the file), to anywhere else never."""
    if destination is not Destination.HOME or policy.documents_to_home == "never":
        return [False] * len(documents)
    if policy.documents_to_home == "always":
        return [True] * len(documents)
    allowed = []
    for doc in documents:
        pages = f"{doc.pages} pages, " if doc.pages else ""
        question = Confirmation(
            kind="document",
            plan_id=request_id,
            summary=f"Send an attached document to your home node? ({pages}{doc.chars} chars)",
            arguments={"name": doc.name},
        )
        allowed.append(await confirmer.confirm(question))
    return allowed


def within_a_frame(request: PlanRequest, max_frame: int = DEFAULT_MAX_FRAME) -> PlanRequest:
    """`request`, if it fits the one frame a node reads it from; else `invalid_input`
    saying how large it is and its documents' share, before anything is sent (the limits
    count characters, a frame counts the bytes of their UTF-8)."""
    size = len(encode_body(request))
    if size <= max_frame:
        return request
    documents = ", ".join(f"{d.name} {len(d.text.encode())} bytes" for d in request.documents)
    holds = f"; its documents as UTF-8: {documents}" if documents else ""
    raise HearthError(
        ErrorCode.INVALID_INPUT,
        f"the request is {size} bytes as sent{holds}; a request to a node carries at most "
        f"{max_frame} bytes: attach less, or ask on the phone (--route local)",
    )


class DocumentProgress:
    """A request's documents, and how the node is reading them (`Progress` frames with
    stage "reading" carry the document's index and its chunk count)."""

    def __init__(self, documents: list[Document], sent: list[bool]) -> None:
        self.documents = documents
        self.sent = sent
        self.chunks = [0] * len(documents)

    def parts(self) -> list[DocumentPart]:
        """What the plan request carries: the documents allowed to leave."""
        return [d.part() for d, ok in zip(self.documents, self.sent, strict=True) if ok]

    async def observe(self, progress: Progress) -> None:
        """Note a node's progress frame (others, and out-of-range indexes, are ignored);
        an `on_progress` for `run_plan_session`."""
        if progress.stage != "reading" or progress.document is None or progress.chunks is None:
            return
        sent = [i for i, ok in enumerate(self.sent) if ok]  # the node numbers what it got
        if 0 <= progress.document < len(sent):
            self.chunks[sent[progress.document]] = progress.chunks

    def views(self) -> list[DocumentView]:
        """`hearth ask --json` "documents"."""
        return [
            DocumentView(name=d.name, pages=d.pages, chunks=c, sent=ok)
            for d, c, ok in zip(self.documents, self.chunks, self.sent, strict=True)
        ]
