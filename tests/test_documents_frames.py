"""Documents larger as UTF-8 than a frame: the limits count characters, a frame counts
bytes (200 000 emoji are 800 000 bytes). `hearth ask --attach` refuses such a request
with a typed `invalid_input` before anything reaches the node."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
import trio

from hearth.companion.documents import read_document, within_a_frame
from hearth.companion.settings import DocumentLimits
from hearth.protocol.wire.errors import ErrorCode, HearthError
from hearth.protocol.wire.frames import DEFAULT_MAX_FRAME, encode
from hearth.protocol.wire.messages import ChatMessage, DocumentPart, Limits, PlanRequest
from hearth.protocol.wire.session import PlanSession, Side

from .hostile.script import Script
from .nodes import BIN, cli
from .pdf_writer import _file as pdf_file  # the writer's objects-to-file step

pytestmark = pytest.mark.hostile

EMOJI = "\U0001f600"  # four bytes as UTF-8


def request_with(text: str) -> PlanRequest:
    return PlanRequest(
        request_id="r",
        conversation=[ChatMessage(role="user", content="summarise")],
        documents=[DocumentPart(name="faces.txt", text=text)],
        limits=Limits(max_document_chars=1_000_000),
    )


def test_a_request_past_the_frame_as_utf8_is_invalid_input_before_it_is_encoded() -> None:
    fits = request_with(EMOJI * 200_000)  # 800 000 bytes: one frame holds it
    assert within_a_frame(fits) is fits
    assert len(encode(fits)) <= DEFAULT_MAX_FRAME
    over = request_with(EMOJI * 300_000)  # 300 000 characters, 1 200 000 bytes
    with pytest.raises(HearthError) as info:
        within_a_frame(over)
    assert info.value.code is ErrorCode.INVALID_INPUT
    assert "faces.txt 1200000 bytes" in info.value.message and "1048576" in info.value.message
    # what the phone would otherwise have sent: a frame the node cannot read
    with pytest.raises(HearthError) as sent:
        PlanSession(Side.PHONE).send(over)
    assert sent.value.code is ErrorCode.PROTOCOL_ERROR


@pytest.mark.timeout(300)
def test_ask_attaching_emoji_past_a_frame_is_invalid_input_and_nothing_is_sent(
    bench, tmp_path
) -> None:
    bench.script.write_text(Script(rounds=[], answer="Read it.").model_dump_json())
    home = str(bench.phone)
    cli("hearth", "config", "set", "limits.max_document_chars", "1000000", "--home", home)
    (tmp_path / "faces.txt").write_text(EMOJI * 300_000)
    asked = [str(BIN / "hearth"), "ask", "--json", "--yes", "--route", "remote",
             "--home", home, "--attach", "faces.txt", "summarise this"]  # fmt: skip
    env = {**os.environ, "HEARTH_NO_MDNS": "1"}
    done = subprocess.run(asked, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 9, done.stdout + done.stderr
    (line,) = done.stdout.strip().splitlines()
    error = json.loads(line)["error"]
    assert error["code"] == "invalid_input" and "faces.txt 1200000 bytes" in error["message"]
    assert not bench.heard.exists() or bench.plan_requests() == []  # the node heard nothing
    # the same file within a frame's bytes is sent and read
    (tmp_path / "faces.txt").write_text(EMOJI * 200_000)
    done = subprocess.run(asked, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["documents"][0]["sent"] is True
    (heard,) = bench.plan_requests()
    assert len(heard["documents"][0]["text"]) == 200_000


def surrogate_pdf() -> bytes:
    """One page whose font maps glyph A to a lone UTF-16 surrogate, and C and D to the two
    halves of one pair (pypdf decodes such a map with "surrogatepass")."""
    cmap = (
        b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /X def\n"
        b"1 begincodespacerange <00> <FF> endcodespacerange\n"
        b"4 beginbfchar <41> <D800> <42> <0042> <43> <D83D> <44> <DE00> endbfchar\n"
        b"endcmap CMapName currentdict /CMap defineresource pop end end"
    )
    content = b"BT /F1 11 Tf 50 780 Td (ABCD) Tj ET"

    def stream(data: bytes) -> bytes:
        return b"<< /Length %d >>\nstream\n" % len(data) + data + b"\nendstream"

    return pdf_file(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /ToUnicode 6 0 R >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents 5 0 R >>",
            stream(content),
            stream(cmap),
        ]
    )


@pytest.mark.timeout(120)
def test_a_pdf_whose_font_maps_to_lone_surrogates_is_read_as_valid_text(tmp_path) -> None:
    pdf = tmp_path / "odd.pdf"
    pdf.write_bytes(surrogate_pdf())  # was: "not read within 60 s and 1024 MiB"
    document = trio.run(read_document, pdf, DocumentLimits())
    assert document.text.startswith("\ufffdB" + EMOJI) and document.pages == 1
    assert len(encode(request_with(document.text))) < 1000  # it can be sent
