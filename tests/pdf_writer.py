"""A minimal PDF writer (one Helvetica text stream per page), for tests and bench:
pypdf reads PDFs well but writes no text, and reportlab is not a dependency."""

from __future__ import annotations

import random
import zlib


def _escaped(line: str) -> str:
    return line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


PAGE = (
    b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] "
    b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>"
)


def _head(kids: list[int]) -> list[bytes]:
    listed = " ".join(f"{k} 0 R" for k in kids)
    return [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{listed}] /Count {len(kids)} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]


def minimal_pdf(pages: list[list[str]]) -> bytes:
    """A PDF whose page i shows the lines `pages[i]` (ASCII) top to bottom."""
    objects = _head([4 + 2 * i for i in range(len(pages))])
    for i, lines in enumerate(pages):
        shown = " T* ".join(f"({_escaped(line)}) Tj" for line in lines)
        stream = f"BT /F1 11 Tf 14 TL 50 780 Td {shown} ET".encode("latin-1")
        objects.append(PAGE % (5 + 2 * i))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    return _file(objects)


def pdf_bomb(operators: int, pages: int) -> bytes:
    """A hostile PDF of a few kilobytes: one page whose compressed content stream
    inflates to `operators` text operators that show nothing, named `pages` times."""
    stream = zlib.compress(b"BT /F1 11 Tf " + b"() Tj " * operators + b"ET", 9)
    objects = _head([4] * pages)
    objects.append(PAGE % 5)
    objects.append(
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream"
    )
    return _file(objects)


def _file(objects: list[bytes]) -> bytes:
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


WORDS = [
    *("train", "leaves", "station", "platform", "ticket", "hotel", "booking", "museum"),
    *("dinner", "flight", "gate", "luggage", "taxi", "meeting", "conference", "morning"),
    *("evening", "itinerary", "reservation"),
]


def travel_pages(count: int, lines: int = 40, seed: int = 0) -> list[list[str]]:
    """`count` pages of plain itinerary-like prose (about 2,400 characters each)."""
    rng = random.Random(seed)
    return [
        [f"Page {p + 1}: " + " ".join(rng.choice(WORDS) for _ in range(8)) for _ in range(lines)]
        for p in range(count)
    ]
