"""Reading a long document on the node: pages per second, and the share of its tokens
read exactly once in the map stage.

    .venv/bin/python bench/documents.py [--pages 20] [--n-ctx 2048] [--runs 3]

A generated PDF (tests/pdf_writer.py: one text stream per page) is read on the phone
side (`companion/documents.py`, pypdf) and then by the node's `DocumentReader` with
the tiny bf16 GGUF in this process, as the planner does before planning: disjoint
chunks that fit the context, a bounded summary of each, the summaries combined.
Reference in the same run: the same chunks only evaluated by the same runtime (one
token generated each), the floor any map stage pays to read every token once.
Prints medians and the ratio; writes bench/results/documents.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import anyio
from rich.console import Console
from rich.table import Table

from hearth.companion.documents import read_document
from hearth.companion.settings import DocumentLimits
from hearth.node.backends import Conversation, GenerationSettings
from hearth.node.backends.llamacpp import LlamaCppBackend
from hearth.node.documents import DocumentReader, Reading
from hearth.protocol.model.runtime import Sampling
from hearth.protocol.model.tiny import make_tiny
from hearth.protocol.wire.messages import ChatMessage, Limits

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
from tests.pdf_writer import minimal_pdf, travel_pages  # noqa: E402

SAMPLING = Sampling(temperature=0.0, seed=1)


async def _nothing(*_: object) -> None:
    return None


async def map_reduce(backend: LlamaCppBackend, doc_text: str, pages: int) -> Reading:
    from hearth.protocol.wire.messages import DocumentPart

    reader = DocumentReader(backend, SAMPLING, anyio.Event(), _nothing)
    question = [ChatMessage(role="user", content="Plan my trip from this itinerary.")]
    room = reader.room(Limits(max_tokens=256), Conversation(messages=question), 1)
    return await reader.read([DocumentPart(name="trip.pdf", pages=pages, text=doc_text)], room)


async def read_only(backend: LlamaCppBackend, doc_text: str) -> int:
    """The reference: every chunk evaluated once, one token generated."""
    reader = DocumentReader(backend, SAMPLING, anyio.Event(), _nothing)
    evaluated = 0
    for chunk in reader._chunks(doc_text):
        conv = Conversation(messages=[ChatMessage(role="user", content=chunk)])
        result = await backend.generate(
            conv,
            grammar=None,
            settings=GenerationSettings(1, SAMPLING),
            on_text=_nothing,
            cancel=anyio.Event(),
        )
        evaluated += result.prompt_tokens
    return evaluated


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="hearth-bench-docs-"))
    bf16, _ = make_tiny(work / "models")
    pdf = work / "trip.pdf"
    pdf.write_bytes(minimal_pdf(travel_pages(args.pages)))
    t0 = time.perf_counter()
    document = anyio.run(read_document, pdf, DocumentLimits(), backend="trio")
    phone_s = time.perf_counter() - t0
    backend = LlamaCppBackend(bf16, args.n_ctx)

    hearth_s: list[float] = []
    reference_s: list[float] = []
    reading: Reading | None = None
    for _ in range(args.runs):
        t0 = time.perf_counter()
        reading = anyio.run(map_reduce, backend, document.text, document.pages, backend="trio")
        hearth_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        anyio.run(read_only, backend, document.text, backend="trio")
        reference_s.append(time.perf_counter() - t0)
    assert reading is not None
    doc = reading.documents[0]
    out = {
        "pages": document.pages,
        "chars": document.chars,
        "n_ctx": args.n_ctx,
        "document_tokens": doc.tokens,
        "chunks": doc.chunks,
        "chunk_tokens": doc.chunk_tokens,
        "map_evaluated_tokens": doc.evaluated,
        "once_share": round(doc.once_share, 4),
        "phone_read_s": round(phone_s, 3),
        "hearth_pages_per_s": round(document.pages / median(hearth_s), 2),
        "reference_pages_per_s": round(document.pages / median(reference_s), 2),
        "runs": args.runs,
    }
    table = Table(title=f"Reading a {document.pages}-page PDF on the node (tiny bf16)")
    for column in ("figure", "Hearth (map-reduce)", "reference (read only)", "ratio"):
        table.add_column(column)
    table.add_row(
        "pages/s (median)",
        str(out["hearth_pages_per_s"]),
        str(out["reference_pages_per_s"]),
        f"{out['hearth_pages_per_s'] / out['reference_pages_per_s']:.2f}",
    )
    table.add_row(
        "document tokens read once",
        f"{out['once_share']:.2%} ({doc.chunk_tokens} in {doc.chunks} chunks of {doc.tokens})",
        "",
        "",
    )
    table.add_row("map-stage tokens evaluated", str(doc.evaluated), "", "")
    Console().print(table)
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "documents.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
