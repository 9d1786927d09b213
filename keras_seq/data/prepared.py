"""Prepared corpora: token ids written once, memory-mapped by every command that reads them.

``keras-seq data prepare --data X --tokenizer word|char --out DIR`` (:func:`prepare_corpus`)
reads the text of ``X`` in chunks, three times, holding only a chunk, the longest line and
the vocabulary's counts:

1. scan: hash the raw bytes and count the characters (:class:`~keras_seq.data.corpus.StreamedText`
   decodes exactly as :func:`~keras_seq.data.corpus.load_corpus` does); the character count
   places the split cuts;
2. count: the tokens of the train split (up to its cut) fit the vocabulary;
3. encode: every split is encoded and its ids appended to ``DIR/tokens.bin``.

``DIR`` then holds (nanoGPT's ``prepare.py`` writes ``train.bin`` the same way):

* ``tokens.bin``: the ids of train, val and test, one after the other, as flat ``uint16``
  (a vocabulary of at most 65,536 entries) or ``uint32``;
* ``tokenizer.json``: the tokenizer (:meth:`~keras_seq.data.tokenizers.Tokenizer.save`);
* ``prepared.json``: format and version, dtype, token count, each split's ``[start, end)``
  in ``tokens.bin``, the split ratio, the source (name, sha256 of its bytes — the
  ``corpus_sha256`` of every result — characters, notes), the tokenizer's fingerprint,
  per-split statistics and the sha256 of ``tokens.bin``. It is written last, atomically:
  a directory without it is an unfinished prepare.

The splits are the ones :func:`~keras_seq.data.corpus.load_corpus` makes from the same text
with the same ratio (:func:`~keras_seq.data.splits.split_text`: each cut moved to the next
line break), and each split is encoded on its own, as ``train lm`` encodes
``corpus.text(split)``: the ids of every split equal ``tokenizer.encode(corpus.text(split))``.
A long text is encoded in line-aligned pieces (a word or a line is never cut; the word and
char rules give the same ids for a text and for its pieces cut after line breaks).

:class:`PreparedCorpus` opens ``DIR``: ``split(name)`` is a read-only memory-mapped slice
(nothing is read until used), ``tokenizer`` the tokenizer; damaged or mismatched files raise
:class:`~keras_seq.errors.DataError` saying what is wrong and how to fix it.

This module does not import TensorFlow.

Example:

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> source = os.path.join(folder, "t.txt")
>>> _ = open(source, "w").write("the cat sat\\nthe dog sat\\n" * 20)
>>> corpus = prepare_corpus(source, os.path.join(folder, "prep"), tokenizer="word")
>>> corpus.dtype, len(corpus), corpus.split("train")[:4].tolist()
('uint16', 160, [4, 5, 3, 2])
>>> corpus.tokenizer.decode(corpus.split("val")[:4])
'the cat sat\\n'
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
from pathlib import Path

import numpy as np

from keras_seq.atomic import atomic_replace, die, discard, fsync_dir, write_json_atomic
from keras_seq.data.corpus import CHUNK_BYTES, StreamedText
from keras_seq.data.splits import _SNAP_LIMIT, DEFAULT_SPLIT, SPLITS, parse_split, split_sizes
from keras_seq.data.tokenizers import FILENAME as TOKENIZER_FILE
from keras_seq.data.tokenizers import load_tokenizer, make_tokenizer
from keras_seq.errors import DataError
from keras_seq.progress import progress_bar

FORMAT = "keras-seq-prepared"
VERSION = 1
MANIFEST = "prepared.json"
TOKENS = "tokens.bin"
KINDS = ("word", "char")  # subword needs TensorFlow's WordPiece learner on whole texts
BLOCK_CHARS = 1 << 20  # text handed to the tokenizer at a time (line-aligned)


def is_prepared(path) -> bool:
    """Whether ``path`` is a directory holding a ``prepared.json`` (a finished prepare)."""
    try:
        return Path(path).expanduser().is_dir() and (Path(path).expanduser() / MANIFEST).is_file()
    except (OSError, ValueError, TypeError):
        return False


def _rerun_hint(path) -> str:
    return f"run `keras-seq data prepare --data SOURCE --out {path}` again"


# ----------------------------------------------------------------------------------------
# Reading


class PreparedCorpus:
    """A prepared corpus directory, its ids memory-mapped.

    Args:
        path: the directory ``keras-seq data prepare`` wrote.

    Attributes:
        name, sha256, split_spec: the source, as a :class:`~keras_seq.data.corpus.Corpus`
            names them (results that cite a corpus cite these).
        tokenizer: the tokenizer the ids were made with.
        ids: all ids, ``(tokens,)`` ``uint16`` or ``uint32``, read-only.

    Example:

    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> _ = prepare_corpus("python-docs", folder, tokenizer="char")
    >>> corpus = PreparedCorpus(folder)
    >>> corpus.tokenizer.kind, corpus.split("train").dtype.name
    ('char', 'uint16')
    """

    def __init__(self, path):
        self.path = Path(path).expanduser()
        manifest_path = self.path / MANIFEST
        if not manifest_path.is_file():
            raise DataError(f"{self.path} is not a prepared corpus: it has no {MANIFEST} "
                            f"(an unfinished or interrupted prepare?); {_rerun_hint(self.path)}")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise DataError(f"{manifest_path} is damaged ({err}); expected the JSON that "
                            f"keras-seq data prepare writes: {_rerun_hint(self.path)}") from None
        self.manifest = _check_manifest(manifest, manifest_path)
        self.dtype = manifest["dtype"]
        self.n_tokens = manifest["tokens"]
        self.name = manifest["source"]["name"]
        self.sha256 = manifest["source"]["sha256"]
        self.split_spec = manifest["split_spec"]
        self.offsets = {s: tuple(manifest["splits"][s]) for s in SPLITS}
        self.notes = list(manifest["source"].get("notes", []))
        tokens_path = self.path / TOKENS
        itemsize = np.dtype(self.dtype).itemsize
        size = tokens_path.stat().st_size if tokens_path.is_file() else None
        if size != self.n_tokens * itemsize:
            found = "is missing" if size is None else f"has {size:,} bytes"
            raise DataError(
                f"{tokens_path} {found}, but {MANIFEST} says {self.n_tokens:,} {self.dtype} "
                f"ids ({self.n_tokens * itemsize:,} bytes): the file is truncated or from "
                f"another prepare; {_rerun_hint(self.path)}"
            )
        try:
            self.tokenizer = load_tokenizer(self.path / TOKENIZER_FILE)
        except DataError as err:
            raise DataError(f"{err} (in the prepared corpus {self.path}: "
                            f"{_rerun_hint(self.path)})") from None
        expected = manifest["tokenizer"]["fingerprint"]
        if self.tokenizer.fingerprint != expected:
            raise DataError(
                f"{self.path / TOKENIZER_FILE} has fingerprint {self.tokenizer.fingerprint}, "
                f"but the ids in {TOKENS} were made with {expected}: the tokenizer was "
                f"replaced; {_rerun_hint(self.path)}"
            )
        if self.tokenizer.vocab_size > np.iinfo(self.dtype).max + 1:
            raise DataError(f"{manifest_path} says dtype {self.dtype}, too small for a "
                            f"vocabulary of {self.tokenizer.vocab_size:,}; "
                            f"{_rerun_hint(self.path)}")
        self.tokens_path = tokens_path

    def __len__(self) -> int:
        return self.n_tokens

    @property
    def ids(self) -> np.ndarray:
        """All ids, train then val then test: a read-only ``np.memmap``."""
        return self._map(0, self.n_tokens)

    def split(self, name: str) -> np.ndarray:
        """The ids of split ``name`` (``train``, ``val`` or ``test``): a read-only
        ``np.memmap`` of its own (its ``filename`` and ``offset`` locate it in
        ``tokens.bin``, which :func:`read_chunks` and the stream batches use to read
        pieces without keeping them mapped)."""
        if name not in self.offsets:
            raise DataError(f"unknown split {name!r}; expected one of {', '.join(SPLITS)}")
        start, end = self.offsets[name]
        return self._map(start, end)

    def _map(self, start: int, end: int) -> np.ndarray:
        if end <= start:
            return np.zeros(0, self.dtype)
        itemsize = np.dtype(self.dtype).itemsize
        return np.memmap(self.tokens_path, dtype=self.dtype, mode="r",
                         offset=start * itemsize, shape=(end - start,))

    def has_text(self, name: str) -> bool:
        """Whether split ``name`` had any non-blank text (``corpus.text(name).strip()``)."""
        return bool(self.manifest["stats"][name]["nonblank"])

    def text(self, name: str) -> str:
        """Split ``name`` written back as text (``tokenizer.decode``): for word tokens a
        re-spelling that encodes to the same ids; unknown characters of a char corpus come
        back as ``<unk>``. For callers that need a string; the ids are :meth:`split`."""
        return "".join(self.tokenizer.decode(block) for block in read_chunks(self.split(name)))

    def token_lines(self, name: str) -> list[list[str]]:
        """The tokens of split ``name`` per line (``<eos>`` ends a line; unknown words are
        ``<unk>``): what :meth:`~keras_seq.data.tokenizers.Tokenizer.tokenize_lines` and
        ``map_unknown`` give for the text. Holds the split's tokens in memory."""
        if self.tokenizer.eos_id is None:
            raise DataError(f"{self.path} holds {self.tokenizer.kind} tokens, which have no "
                            "lines; prepare it with --tokenizer word")
        vocab, eos = self.tokenizer.vocab, self.tokenizer.eos_id
        lines = []
        for block in read_chunks(self.split(name), 1 << 20):
            line = lines.pop() if lines else []
            for i in block.tolist():
                if i == eos:
                    lines.append(line)
                    line = []
                else:
                    line.append(vocab[i])
            lines.append(line)
        return [line for line in lines if line]

    def describe(self) -> dict:
        """Sizes and provenance, in the shape of :meth:`Corpus.describe` plus the ids."""
        stats = self.manifest["stats"]
        return {
            "name": self.name,
            "sha256": self.sha256,
            "split": self.split_spec,
            "chars": {s: stats[s]["chars"] for s in SPLITS},
            "replaced_bytes": self.manifest["source"]["replaced_bytes"],
            "notes": list(self.notes),
            "prepared": str(self.path),
            "tokens": {s: self.offsets[s][1] - self.offsets[s][0] for s in SPLITS},
            "dtype": self.dtype,
        }

    def check_request(self, *, tokenizer: str | None = None, split_ratio=None,
                      **options) -> None:
        """Refuse a command's tokenizer or split options that differ from this corpus's.

        The tokenizer and the split of a prepared corpus were fixed when it was
        prepared; options left ``None`` are not compared.
        """
        tok = self.tokenizer
        if tokenizer is not None and tokenizer != tok.kind:
            raise DataError(f"{self.path} holds {tok.kind} tokens, but --tokenizer {tokenizer} "
                            f"was asked for: pass --tokenizer {tok.kind}, or prepare the text "
                            f"again with --tokenizer {tokenizer}")
        for key, value in options.items():
            if value is not None and key in tok.options and tok.options[key] != value:
                flag = "--" + key.replace("_", "-")
                raise DataError(f"{self.path} was prepared with {flag} {tok.options[key]}, but "
                                f"{flag} {value} was asked for: leave the flag out, or prepare "
                                "the text again with it")
        if (split_ratio is not None and self.split_spec != "files"
                and parse_split(split_ratio) != parse_split(self.split_spec)):
            raise DataError(f"{self.path} was prepared with --split-ratio {self.split_spec}, but "
                            f"{split_ratio} was asked for: pass --split-ratio {self.split_spec}, "
                            "or prepare the text again with the other split")

    def verify(self) -> None:
        """Read ``tokens.bin`` once: its sha256 must match the manifest and every id must
        be inside the vocabulary (``open`` checks sizes only, reading nothing)."""
        digest, top = hashlib.sha256(), -1
        for block in read_chunks(self.ids):
            digest.update(block.tobytes())
            top = max(top, int(block.max()))
        if digest.hexdigest() != self.manifest["tokens_sha256"]:
            raise DataError(f"{self.path / TOKENS} does not have the sha256 its {MANIFEST} "
                            f"records: the ids were changed or damaged; {_rerun_hint(self.path)}")
        if top >= self.tokenizer.vocab_size:
            raise DataError(f"{self.path / TOKENS} holds id {top}, outside the vocabulary "
                            f"({self.tokenizer.vocab_size:,}); {_rerun_hint(self.path)}")


def file_region(ids):
    """``(filename, offset in bytes)`` when ``ids`` is an ``np.memmap`` opened on its own
    region of a file (as :meth:`PreparedCorpus.split` opens it), else ``None``."""
    if isinstance(ids, np.memmap) and isinstance(ids.base, mmap.mmap) and ids.filename:
        return ids.filename, int(ids.offset)
    return None


def read_chunks(ids, size: int = 1 << 22):
    """``ids`` in consecutive arrays of at most ``size``. The region of a memory-mapped
    split is read from the file chunk by chunk (nothing stays mapped, so the process's
    resident memory does not grow with the corpus); any other array is sliced."""
    region = file_region(ids)
    for start in range(0, len(ids), size):
        count = min(size, len(ids) - start)
        if region is None:
            yield np.asarray(ids[start:start + count])
        else:
            yield np.fromfile(region[0], dtype=ids.dtype, count=count,
                              offset=region[1] + start * ids.dtype.itemsize)


def _check_manifest(manifest, path: Path) -> dict:
    """``manifest`` if it is a complete ``prepared.json`` of this version, else a DataError."""
    folder = path.parent
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise DataError(f"{path} is not a keras-seq prepared corpus (format {found!r}, expected "
                        f"{FORMAT!r}); {_rerun_hint(folder)}")
    if manifest.get("version") != VERSION:
        raise DataError(f"{path} is prepared-corpus version {manifest.get('version')!r}; this "
                        f"keras-seq reads version {VERSION}: {_rerun_hint(folder)}")
    problems = []
    if manifest.get("dtype") not in ("uint16", "uint32"):
        problems.append(f"dtype {manifest.get('dtype')!r} (expected uint16 or uint32)")
    n = manifest.get("tokens")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        problems.append(f"token count {n!r}")
    splits = manifest.get("splits")
    edges = [0]
    for s in SPLITS:
        span = splits.get(s) if isinstance(splits, dict) else None
        if (not isinstance(span, list) or len(span) != 2 or span[0] != edges[-1]
                or not all(isinstance(v, int) for v in span) or span[1] < span[0]):
            problems.append(f"split offsets {splits!r} (expected contiguous [start, end) for "
                            "train, val, test from 0)")
            break
        edges.append(span[1])
    else:
        if edges[-1] != n:
            problems.append(f"split offsets that end at {edges[-1]}, not at the {n} tokens")
    for key, fields in (("source", ("name", "sha256", "replaced_bytes")),
                        ("tokenizer", ("fingerprint",)), ("stats", SPLITS)):
        if not isinstance(manifest.get(key), dict) or any(f not in manifest[key] for f in fields):
            problems.append(f"{key!r} without {', '.join(fields)}")
    if not isinstance(manifest.get("split_spec"), str) or "tokens_sha256" not in manifest:
        problems.append("no split_spec or tokens_sha256")
    if problems:
        raise DataError(f"{path} is damaged: {'; '.join(problems)}; {_rerun_hint(folder)}")
    return manifest


# ----------------------------------------------------------------------------------------
# Cutting a stream of text into splits, as split_text cuts the whole text


def cut_pieces(pieces, n_chars: int, fractions):
    """Yield ``(split, text)`` for a stream of text ``pieces`` (``n_chars`` in all) cut by
    ``fractions`` exactly where :func:`~keras_seq.data.splits.split_text` cuts the whole
    text: each cut moved forward past the next line break if that is fewer than
    ``_SNAP_LIMIT`` characters away. Holds at most a piece and ``_SNAP_LIMIT`` characters.

    >>> list(cut_pieces(["one\\ntw", "o\\nthree\\n", "four\\n"], 19, (0.5, 0.5, 0.0)))
    [('train', 'one\\ntw'), ('train', 'o\\nthree\\n'), ('val', 'four\\n')]
    """
    n_train, n_val, _ = split_sizes(n_chars, fractions)
    nominal = [n_train, n_train + n_val]
    buf, base, k, prev = "", 0, 0, 0  # buffer, its offset in the text, next cut, last cut
    before = ""  # the character just before the buffer

    def decide(final: bool):
        """The position of cut ``k``, or None while more text is needed."""
        c = max(nominal[k], prev)
        if c <= 0:
            return 0
        if c - 1 < base:  # c is the previous cut: its search starts one character back
            if before == "\n":
                return c
            start = 0
        else:
            start = c - 1 - base
        if start >= len(buf):
            return min(c, n_chars) if final else None
        newline = buf.find("\n", start)
        if newline != -1:
            newline += base
            return newline + 1 if newline - c < _SNAP_LIMIT else c
        if final or base + len(buf) - c >= _SNAP_LIMIT:
            return min(c, n_chars)
        return None

    def drain(final: bool):
        nonlocal buf, base, k, prev, before
        while k < 2:
            cut = decide(final)
            if cut is None:  # hand on what lies safely before the cut's search start
                keep = min(max(nominal[k], prev) - 1 - base, len(buf))
                if keep > 0:
                    yield SPLITS[k], buf[:keep]
                    before, buf, base = buf[keep - 1], buf[keep:], base + keep
                return
            if cut > base:
                yield SPLITS[k], buf[:cut - base]
                before = buf[cut - base - 1]
            buf, base = buf[cut - base:], cut
            prev, k = cut, k + 1
        if buf:
            yield SPLITS[2], buf
            base += len(buf)
            buf = ""

    for piece in pieces:
        buf += piece
        yield from drain(final=False)
    yield from drain(final=True)


def _split_pieces(stream: StreamedText, fractions, on_bytes=None):
    """``(split, text)`` pieces of a source: its own split files, or cut by ``fractions``."""
    if stream.split_files:
        return stream.pieces(on_bytes)
    return cut_pieces((text for _, text in stream.pieces(on_bytes)), stream.chars, fractions)


def _blocks(pieces, size: int = BLOCK_CHARS):
    """``(split, text)`` pieces regrouped into line-aligned blocks of about ``size``
    characters, never across a split boundary (a line longer than ``size`` is one block)."""
    split, held, held_len = None, [], 0
    for name, text in pieces:
        if name != split and held:
            yield split, "".join(held)
            held, held_len = [], 0
        split = name
        held.append(text)
        held_len += len(text)
        if held_len >= size:
            joined = "".join(held)
            cut = joined.rfind("\n") + 1
            if cut:
                yield split, joined[:cut]
                joined = joined[cut:]
            held, held_len = ([joined], len(joined)) if joined else ([], 0)
    if held:
        yield split, "".join(held)


# ----------------------------------------------------------------------------------------
# Writing


def _progress(total: int, desc: str, quiet: bool):
    return progress_bar(total=total, desc=desc, unit="B", unit_scale=True,
                        disable=True if quiet else None, leave=False)


def prepare_corpus(data, out, *, tokenizer: str = "word", max_vocab: int | None = None,
                   min_count: int | None = None, lower: bool | None = None,
                   split: str = DEFAULT_SPLIT, data_dir=None, chunk_bytes: int = CHUNK_BYTES,
                   block_chars: int = BLOCK_CHARS, quiet: bool = True) -> PreparedCorpus:
    """Tokenize ``data`` (a registry name, a .txt file or a directory) into directory
    ``out`` in bounded memory (see the module docstring) and return it opened.

    Args:
        data: the corpus, as ``--data`` names it.
        out: the directory to write; it may exist only as an earlier prepared corpus
            (replaced) or empty.
        tokenizer, max_vocab, min_count, lower: the tokenizer (``word`` or ``char``).
        split: train/val/test shares for a source without its own split files.
        chunk_bytes: raw bytes read at a time; block_chars: text tokenized at a time.
        quiet: no progress bars (they go to stderr on a terminal otherwise).
    """
    if tokenizer not in KINDS:
        raise DataError(f"data prepare takes --tokenizer {' or '.join(KINDS)}, got {tokenizer!r} "
                        "(subword vocabularies are learned from a whole text in memory)")
    tok = make_tokenizer(tokenizer, max_vocab=max_vocab, min_count=min_count, lower=lower)
    fractions = parse_split(split)
    out = Path(out).expanduser()
    _claim(out)
    stream = StreamedText(str(data), data_dir=data_dir, chunk_bytes=chunk_bytes)
    total_bytes, sha256 = _scan_source(stream, quiet)
    _fit_vocabulary(tok, stream, fractions, total_bytes, block_chars, quiet)
    dtype = "uint16" if tok.vocab_size <= 1 << 16 else "uint32"
    stats, digest, n_tokens = _encode_splits(tok, stream, fractions, out, dtype, total_bytes,
                                             block_chars, quiet)
    if stream.sha256 != sha256 or stream.bytes != total_bytes:
        discard(out / TOKENS)
        raise DataError(f"{stream.name} changed while it was being prepared (its sha256 "
                        "differs between the first and the last pass); prepare it again "
                        "once nothing writes to it")
    tok.save(out / TOKENIZER_FILE)
    write_json_atomic(out / MANIFEST, {
        "format": FORMAT,
        "version": VERSION,
        "dtype": dtype,
        "tokens": n_tokens,
        "splits": _split_offsets(stats),
        "split_spec": "files" if stream.split_files else split,
        "source": {"name": stream.name, "sha256": sha256, "bytes": total_bytes,
                   "chars": stream.chars, "replaced_bytes": stream.replaced_bytes,
                   "notes": stream.notes},
        "tokenizer": tok.describe(),
        "stats": stats,
        "tokens_sha256": digest,
    })
    return PreparedCorpus(out)


def _scan_source(stream: StreamedText, quiet: bool) -> tuple[int, str]:
    """Pass 1: read the whole source once; its ``(bytes, sha256)``."""
    bar = _progress(_source_bytes(stream), "prepare 1/3 scan", quiet)
    for _ in stream.pieces(bar.update):
        pass
    bar.close()
    return stream.bytes, stream.sha256


def _fit_vocabulary(tok, stream: StreamedText, fractions, total_bytes: int, block_chars: int,
                    quiet: bool) -> None:
    """Pass 2: fit ``tok``'s vocabulary on the counts of the train split's tokens."""
    bar = _progress(total_bytes, "prepare 2/3 count", quiet)
    counts, nonblank = tok.counter(), False
    for name, text in _blocks(_split_pieces(stream, fractions, bar.update), block_chars):
        if name != "train":
            if not stream.split_files:
                break  # the rest is val and test: nothing more to count
            continue
        nonblank = nonblank or bool(text.strip())
        counts.add(text)
    bar.close()
    if not nonblank:
        raise DataError(f"corpus {stream.name!r} has an empty training split; expected text "
                        "with at least one non-blank line")
    tok.fit_counts(counts)


def _encode_splits(tok, stream: StreamedText, fractions, out: Path, dtype: str,
                   total_bytes: int, block_chars: int, quiet: bool) -> tuple[dict, str, int]:
    """Pass 3: encode every split into ``out/tokens.bin``; (per-split stats, the file's
    sha256, the token count)."""
    stats = {s: {"chars": 0, "lines": 0, "tokens": 0, "oov_tokens": 0, "nonblank": False}
             for s in SPLITS}
    last_char = dict.fromkeys(SPLITS, "")
    digest, n_tokens = hashlib.sha256(), 0
    bar = _progress(total_bytes, "prepare 3/3 encode", quiet)
    with atomic_replace(out / TOKENS) as (tmp, crash), open(tmp, "wb") as f:
        for name, text in _blocks(_split_pieces(stream, fractions, bar.update), block_chars):
            ids, unknown = tok.encode_counting(text)
            blob = ids.astype(dtype).tobytes()
            f.write(blob)
            digest.update(blob)
            if crash == "mid-write":
                f.flush()
                die()
            _add_block_stats(stats[name], text, len(ids), unknown)
            last_char[name] = text[-1]
            n_tokens += len(ids)
        f.flush()
        os.fsync(f.fileno())
    bar.close()
    for name in SPLITS:  # a last line without a line break is a line too (data stats)
        stats[name]["lines"] += bool(last_char[name]) and last_char[name] != "\n"
    return stats, digest.hexdigest(), n_tokens


def _add_block_stats(st: dict, text: str, n_ids: int, unknown: int) -> None:
    """Add one encoded block of text (``n_ids`` ids, ``unknown`` of them OOV) to ``st``."""
    st["chars"] += len(text)
    st["lines"] += text.count("\n")
    st["tokens"] += n_ids
    st["oov_tokens"] += unknown
    st["nonblank"] = st["nonblank"] or bool(text.strip())


def _split_offsets(stats: dict) -> dict[str, list[int]]:
    """Each split's ``[start, end)`` in ``tokens.bin`` (the splits are stored in order)."""
    offsets, start = {}, 0
    for name in SPLITS:
        offsets[name] = [start, start + stats[name]["tokens"]]
        start += stats[name]["tokens"]
    return offsets


def _claim(out: Path) -> None:
    """Make ``out`` ready for a prepare: refuse a file or a folder holding other things;
    an earlier prepared corpus there loses its ``prepared.json`` first, so that a prepare
    killed half-way never leaves a directory that looks complete."""
    ours = {MANIFEST, TOKENS, TOKENIZER_FILE, f".{TOKENS}.tmp", f".{MANIFEST}.tmp",
            f".{TOKENIZER_FILE}.tmp"}
    if out.exists() and not out.is_dir():
        raise DataError(f"--out {out} is a file; expected a directory for the prepared corpus")
    if out.is_dir():
        others = sorted(p.name for p in out.iterdir() if p.name not in ours)
        if others:
            raise DataError(f"--out {out} already holds {', '.join(others[:3])}"
                            f"{' …' if len(others) > 3 else ''}; expected a new or empty "
                            "folder (or an earlier prepared corpus, which is replaced)")
        discard(out / MANIFEST)
        fsync_dir(out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise DataError(f"cannot create --out {out}: {err.strerror or err}") from None


def _source_bytes(stream: StreamedText) -> int | None:
    """The size of a file or directory source (for the first progress bar), else None."""
    try:
        return sum(Path(part.label).stat().st_size for part in stream.parts)
    except OSError:
        return None


