"""An attachment whose file name is not UTF-8 (Linux names are bytes; Python carries the
stray ones as lone surrogates, which no JSON or frame can): read, named with U+FFFD."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from hearth.companion.documents import DocumentLimits, read_document
from hearth.protocol.wire.errors import ErrorCode, HearthError

pytestmark = pytest.mark.hostile


def named(tmp_path: Path, text: str) -> Path:
    path = Path(os.fsdecode(os.fsencode(tmp_path) + b"/notes-\xff\xfe.txt"))
    path.write_text(text)
    return path


def test_a_file_name_that_is_not_utf8_is_read_with_replacement_characters(tmp_path) -> None:
    """Before: a pydantic ValidationError escaped (`hearth ask --attach` said internal)."""
    document = anyio.run(read_document, named(tmp_path, "hello"), DocumentLimits())
    assert document.name == "notes-\ufffd\ufffd.txt" and document.text == "hello"
    document.part().model_dump_json()  # it can go in a frame


def test_a_refused_file_whose_name_is_not_utf8_is_said_in_valid_text(tmp_path) -> None:
    with pytest.raises(HearthError) as refused:
        anyio.run(read_document, named(tmp_path, "x" * 100), DocumentLimits(max_bytes=10))
    assert refused.value.code == ErrorCode.INVALID_INPUT
    refused.value.message.encode()  # no lone surrogate in what is printed
