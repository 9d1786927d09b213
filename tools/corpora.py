"""Code corpora: the text files of the installed Python packages, concatenated, for the
measurements that need more text (or more word types) than tinyshakespeare has.

    python -m tools.corpora code --out corpora --mb 80
    python -m tools.corpora code --out corpora --mb 20 --max-file-kb 200 --max-files 20000

* the first, ``corpora/code-80mb.txt``: the bounded-memory ``ngram train`` timings of
  docs/language-models.md ("Kneser-Ney in bounded memory");
* the second, ``corpora/code-20mb-200kb-20000files.txt``: the V = 50k rows of
  ``keras-seq bench softmax`` (docs/language-models.md, "Measured: full vs adaptive
  softmax"), 79k word types where tinyshakespeare has about 12k.

Every ``.py``, ``.md``, ``.rst`` and ``.txt`` regular file under the roots (default: the
site-packages of the Python that runs this, the project's ``.venv`` for
``.venv/bin/python``; symbolic links not followed) is read in byte order of its path
(``LC_ALL=C sort``), optionally only those under ``--max-file-kb`` KiB (rounded up, as
``find -size -200k`` counts) and the first ``--max-files`` of them; their bytes are
concatenated and cut at ``--mb`` million bytes; the result is decoded as UTF-8 (a bad byte
becomes U+FFFD), its NUL characters dropped (keras-seq refuses a file with one) and written
as UTF-8. The same installed packages give the same file: it prints the sha256 of the
list of files it read (paths relative to their root) and of the text, and the text's word
tokens and types (keras-seq's word tokenizer, line ends not counted), so two machines can
compare. The packages differ with the extras installed (``make demo`` installs fewer than
``make test``); the figures on the pages name the venv they were measured in.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import sys
import sysconfig
import time
from pathlib import Path

#: the suffixes of keras_seq.benchmarks.scaling_text's natural part, the same kind of text
SUFFIXES = (".py", ".md", ".rst", ".txt")


def default_roots() -> list[Path]:
    """The site-packages of this interpreter (the venv's, for ``.venv/bin/python``)."""
    return [Path(sysconfig.get_paths()["purelib"])]


def source_files(roots, max_file_kb: int | None = None,
                 max_files: int | None = None) -> list[Path]:
    """The text files under ``roots``, in byte order of their paths: regular files only
    (no symbolic links), each under ``max_file_kb`` KiB rounded up (``find -size -Nk``),
    the first ``max_files`` of them."""
    found = []
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = Path(folder) / name
                if path.suffix not in SUFFIXES or path.is_symlink() or not path.is_file():
                    continue
                if max_file_kb is not None and \
                        math.ceil(path.stat().st_size / 1024) >= max_file_kb:
                    continue
                found.append(path)
    found.sort(key=lambda p: os.fsencode(p))
    return found[:max_files] if max_files is not None else found


def build_text(files: list[Path], max_bytes: int) -> tuple[str, int]:
    """The files' bytes concatenated, cut at ``max_bytes``, decoded as UTF-8 with bad bytes
    replaced, NUL characters dropped; and how many files it read."""
    chunks, size = [], 0
    for path in files:
        if size >= max_bytes:
            break
        data = path.read_bytes()[:max_bytes - size]
        chunks.append(data)
        size += len(data)
    text = b"".join(chunks).decode("utf-8", errors="replace").replace("\0", "")
    return text, len(chunks)


def word_counts(text: str) -> tuple[int, int]:
    """(word tokens, word types) of ``text`` by keras-seq's word tokenizer (line ends not
    counted), counted in blocks of lines."""
    # lazy: the corpus is written before the (slower) count
    from keras_seq.data.tokenizers import make_tokenizer

    counts = make_tokenizer("word").counter()
    start, block = 0, 1 << 22
    while start < len(text):
        end = text.find("\n", start + block)
        end = len(text) if end < 0 else end + 1
        counts.add(text[start:end])
        start = end
    table = counts.counts()
    return sum(table.values()), len(table)


def corpus_name(mb: float, max_file_kb: int | None, max_files: int | None) -> str:
    parts = [f"code-{mb:g}mb"]
    if max_file_kb is not None:
        parts.append(f"{max_file_kb}kb")
    if max_files is not None:
        parts.append(f"{max_files}files")
    return "-".join(parts) + ".txt"


def write_code_corpus(out: Path, mb: float, roots=None, max_file_kb: int | None = None,
                      max_files: int | None = None, name: str | None = None,
                      count: bool = True, printer=print) -> dict:
    """Write the corpus into the folder ``out``; returns what it printed as a dict."""
    started = time.perf_counter()
    roots = [Path(r) for r in (roots or default_roots())]
    files = source_files(roots, max_file_kb, max_files)
    if not files:
        raise SystemExit(f"no {'/'.join(SUFFIXES)} file under {', '.join(map(str, roots))}")
    text, used = build_text(files, int(mb * 1_000_000))
    out.mkdir(parents=True, exist_ok=True)
    path = out / (name or corpus_name(mb, max_file_kb, max_files))
    data = text.encode("utf-8")
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)
    listing = "\n".join(str(f.relative_to(r)) for f in files[:used]
                        for r in roots if f.is_relative_to(r)).encode()
    record = {"path": str(path), "bytes": len(data), "files": len(files), "files_read": used,
              "roots": [str(r) for r in roots],
              "files_sha256": hashlib.sha256(listing).hexdigest(),
              "sha256": hashlib.sha256(data).hexdigest()}
    if count:
        record["word_tokens"], record["word_types"] = word_counts(text)
    record["seconds"] = round(time.perf_counter() - started, 1)
    for key, value in record.items():
        printer(f"{key:>12}: {value:,}" if isinstance(value, int) else f"{key:>12}: {value}")
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.corpora",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    code = sub.add_parser("code", help="the installed packages' .py/.md/.rst/.txt files")
    code.add_argument("--out", type=Path, required=True, help="folder the corpus goes to")
    code.add_argument("--mb", type=float, required=True,
                      help="at most this many million bytes (before decoding)")
    code.add_argument("--root", type=Path, action="append", default=None,
                      help="a folder to read (repeatable; default: this Python's "
                           "site-packages)")
    code.add_argument("--max-file-kb", type=int, default=None,
                      help="only files under this many KiB, rounded up (find -size -Nk)")
    code.add_argument("--max-files", type=int, default=None,
                      help="only the first N files in path order")
    code.add_argument("--name", default=None, help="file name (default: from the flags)")
    code.add_argument("--no-count", dest="count", action="store_false",
                      help="skip the word count (the slow part)")
    args = parser.parse_args(argv)
    if args.mb <= 0:
        parser.error("--mb must be positive")
    write_code_corpus(args.out, args.mb, args.root, args.max_file_kb, args.max_files,
                      args.name, args.count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
