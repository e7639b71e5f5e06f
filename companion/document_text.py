"""A PDF's or an HTML page's text, extracted in a child process with bounded memory and time.

Neither pypdf nor `html.parser` has a time limit, and a hostile file exploits both: a
kilobyte of PDF content stream inflates to millions of operators (and a page tree may
name that page hundreds of times), and 60 kB of unclosed HTML start tags keeps the
parser busy for minutes (its cost grows with the square of them). A worker thread
reading such a file could be neither stopped nor bounded. `extract` runs
`python -m hearth.companion.document_text` on the bytes instead: the child caps its own
address space, CPU time and file writes (setrlimit) before it parses anything, and it
is killed at the deadline or when the caller is cancelled.
"""

from __future__ import annotations

import io
import math
import resource
import subprocess
import sys
from html.parser import HTMLParser
from typing import Literal

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError

SECONDS = 60.0  # to read one file, the child's start included
MEMORY = 1 << 30  # bytes of address space the child may use
PAGE_BREAK = "\f"  # between a PDF's pages in the text
Kind = Literal["pdf", "html"]
# elements whose content is never visible text
HIDDEN_ELEMENTS = frozenset({"script", "style", "template", "noscript", "head", "svg", "iframe"})
BLOCK_ELEMENTS = frozenset(
    {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
     "header", "footer", "blockquote", "pre", "table", "ul", "ol", "dt", "dd", "hr", "title"}
)  # fmt: skip


class Extracted(BaseModel):
    """What the child read: the text of each page (one for HTML), or why it could not."""

    model_config = ConfigDict(extra="forbid")

    pages: int = 0  # 0: a format without pages
    texts: list[str] = []
    problem: str = ""  # "" when read

    @property
    def text(self) -> str:
        return PAGE_BREAK.join(self.texts)


async def extract(
    kind: Kind,
    data: bytes,
    *,
    max_pages: int,
    max_chars: int,
    seconds: float = SECONDS,
    memory: int = MEMORY,
) -> Extracted:
    """`data`'s text, read in a child process (killed after `seconds` or on cancellation)."""
    limits = (max_pages, max_chars, memory, math.ceil(seconds))
    command = [sys.executable, "-m", __name__, kind, *(str(n) for n in limits)]
    too_much = f"unreadable {kind.upper()}: not read within {seconds:g} s and {memory >> 20} MiB"
    with anyio.move_on_after(seconds) as scope:
        if data:
            done = await anyio.run_process(command, input=data, check=False)
        else:  # no input: the child must not read this process's stdin (a terminal)
            done = await anyio.run_process(command, stdin=subprocess.DEVNULL, check=False)
    if scope.cancelled_caught or done.returncode != 0:
        return Extracted(problem=too_much)
    try:
        return Extracted.model_validate_json(done.stdout)
    except ValidationError:
        return Extracted(problem=too_much)


def _pdf(data: bytes, max_pages: int, max_chars: int) -> Extracted:
    from pypdf import PdfReader
    from pypdf.errors import FileNotDecryptedError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):  # an owner password alone is fine
            return Extracted(problem="encrypted: it needs a password")
        pages = len(reader.pages)
        if pages > max_pages:
            return Extracted(problem=f"oversize: {pages} pages (at most {max_pages})")
        texts: list[str] = []
        total = 0
        for page in reader.pages:
            texts.append(_well_formed(page.extract_text() or ""))
            total += len(texts[-1])
            if total > max_chars:
                return Extracted(problem=f"oversize: more than {max_chars} characters of text")
    except FileNotDecryptedError:
        return Extracted(problem="encrypted: it needs a password")
    except Exception as exc:  # pypdf raises many kinds (PdfReadError, KeyError…) on a bad file
        return Extracted(problem=f"unreadable PDF ({type(exc).__name__})")
    return Extracted(pages=pages, texts=texts)


def _well_formed(text: str) -> str:
    """`text` as valid Unicode: pypdf decodes a font's UTF-16 with "surrogatepass", so a
    hostile one yields lone surrogates (which no JSON or UTF-8 can carry); a pair becomes
    its character, a lone one U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


class _VisibleText(HTMLParser):
    """The text a reader would see: no script, style or other hidden content. Inside a
    hidden element only its own name is counted, so every tag costs O(1)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = ""  # the outermost hidden element we are in, if any
        self.depth = 0  # of that element's name, nested

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.hidden:
            self.depth += tag == self.hidden
        elif tag in HIDDEN_ELEMENTS:
            self.hidden, self.depth = tag, 1
        elif tag in BLOCK_ELEMENTS:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if not self.hidden and tag in BLOCK_ELEMENTS:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self.hidden:
            self.depth -= tag == self.hidden
            if not self.depth:
                self.hidden = ""
        elif tag in BLOCK_ELEMENTS:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def _html(data: bytes, max_chars: int) -> Extracted:
    parser = _VisibleText()
    parser.feed(data.decode("utf-8-sig"))  # the parent checked that it is UTF-8 text
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    text = "\n".join(line for line in lines if line)
    if len(text) > max_chars:
        return Extracted(problem=f"oversize: more than {max_chars} characters of text")
    return Extracted(texts=[text])


def main(argv: list[str]) -> int:
    """The child: limits first, then the file on stdin; what it read as JSON on stdout."""
    kind, *numbers = argv
    max_pages, max_chars, memory, cpu = (int(n) for n in numbers)
    for which, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu)):
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    data = sys.stdin.buffer.read()
    done = _pdf(data, max_pages, max_chars) if kind == "pdf" else _html(data, max_chars)
    sys.stdout.buffer.write(done.model_dump_json().encode())
    return 0


if __name__ == "__main__":  # the child
    raise SystemExit(main(sys.argv[1:]))
