"""tools/corpora.py: the code corpora of docs/language-models.md, built the same way on
every run (file order, size filter, cut, decoding), checked on a small folder."""

from __future__ import annotations

import hashlib

from keras_seq.data.tokenizers import make_tokenizer
from tools import corpora


def _tree(root):
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "a").mkdir()
    (root / "pkg" / "b.py").write_bytes(b"b = 2\n")
    (root / "pkg" / "a-b.md").write_bytes(b"dash\n")          # '-' sorts before '/' ...
    (root / "pkg" / "a" / "x.py").write_bytes(b"x\n")         # ... as LC_ALL=C sort has it
    (root / "pkg" / "sub" / "c.txt").write_bytes(b"caf\xc3\xa9 \xff nul\x00 end\n")
    (root / "pkg" / "big.rst").write_bytes(b"x " * 1100)      # 2,200 bytes: 3 KiB rounded up
    (root / "pkg" / "skip.json").write_bytes(b"{}")
    (root / "pkg" / "link.py").symlink_to(root / "pkg" / "b.py")
    return root


def test_files_in_byte_order_of_their_paths_without_links_or_other_suffixes(tmp_path):
    root = _tree(tmp_path)
    names = [p.relative_to(root).as_posix() for p in corpora.source_files([root])]
    assert names == ["pkg/a-b.md", "pkg/a/x.py", "pkg/b.py", "pkg/big.rst", "pkg/sub/c.txt"]
    # find -size -3k: under 3 KiB rounded up, so the 2,200-byte file (3 KiB) is out
    small = corpora.source_files([root], max_file_kb=3, max_files=3)
    assert [p.name for p in small] == ["a-b.md", "x.py", "b.py"]


def test_the_corpus_is_cut_decoded_and_the_same_every_time(tmp_path):
    root = _tree(tmp_path / "root")
    lines = []
    first = corpora.write_code_corpus(tmp_path / "out", 0.000_023, roots=[root],
                                      max_file_kb=3, printer=lines.append)
    text = (tmp_path / "out" / "code-2.3e-05mb-3kb.txt").read_text(encoding="utf-8")
    assert text == "dash\nx\nb = 2\ncafé \ufffd nu"                 # 23 bytes
    assert first["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    words = [t for t in make_tokenizer("word").tokens(text) if t != "<eos>"]
    assert first["files_read"] == 4
    assert (first["word_tokens"], first["word_types"]) == (len(words), len(set(words)))
    again = corpora.write_code_corpus(tmp_path / "out", 0.000_023, roots=[root],
                                      max_file_kb=3, printer=lambda _: None)
    assert again["sha256"] == first["sha256"]
    nul = corpora.write_code_corpus(tmp_path / "out", 1, roots=[root], name="all.txt",
                                    count=False, printer=lambda _: None)
    assert "\0" not in (tmp_path / "out" / "all.txt").read_text(encoding="utf-8")
    assert nul["files_read"] == 5 and "word_tokens" not in nul
    assert any(line.strip().startswith("sha256:") for line in lines)
