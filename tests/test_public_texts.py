"""tools/public_texts.py: the character vectors of an R lazy-load database (the Austen
novels' package) are read without R, other objects skipped; names are checked."""

import doctest
import struct
import zlib

import pytest

from tools import public_texts
from tools.public_texts import R_CHARSXP, R_STRSXP, r_lazy_load_strings

R_INTSXP = 13


def _serialized(kind: int, items: list) -> bytes:
    head = b"X\n" + struct.pack(">iii", 3, 0x40200, 0x30500) + struct.pack(">i", 5) + b"UTF-8"
    body = struct.pack(">ii", kind, len(items))
    for item in items:
        if kind == R_STRSXP:
            raw = item.encode()
            body += struct.pack(">ii", R_CHARSXP, len(raw)) + raw
        else:
            body += struct.pack(">i", item)
    return head + body


def _rdb(*blobs: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(b)) + zlib.compress(b) for b in blobs)


def test_the_character_vectors_of_a_lazy_load_database_are_read_in_order():
    data = _rdb(_serialized(R_STRSXP, ["EMMA", "", "By Jane Austen"]),
                _serialized(R_INTSXP, [1, 2, 3]),
                _serialized(R_STRSXP, ["PERSUASION", "Chapter 1 — Sir Walter"]))
    assert r_lazy_load_strings(data) == [["EMMA", "", "By Jane Austen"],
                                         ["PERSUASION", "Chapter 1 — Sir Walter"]]
    with pytest.raises(ValueError, match="not R's XDR serialization"):
        r_lazy_load_strings(_rdb(b"RDA2\n" + b"\0" * 20))


def test_the_docstring_examples_run():
    assert doctest.testmod(public_texts).failed == 0


def test_an_unknown_text_is_refused_naming_the_choices(capsys, tmp_path):
    with pytest.raises(SystemExit):
        public_texts.main(["--out", str(tmp_path), "kjv", "bible"])
    assert "unknown text(s) bible; choose from kjv, jargon, austen" in capsys.readouterr().err
