"""A compact binary n-gram model for a device, and per-token streaming with it (numpy only).

The ARPA text file is the exchange format; this is the form to ship. Like KenLM's binary
``trie`` (kept simple), it stores a :class:`~keras_seq.ngram.backoff.BackoffModel` as
plain arrays in one file:

* order 1: log10 p and log10 backoff of every vocabulary id (type id == word id);
* order n ≥ 2, a trie level: ``w{n}`` the last word of every n-gram, sorted by
  (context, word) exactly as :class:`~keras_seq.ngram.counts.NgramTable`, and ``o{n}``
  the offsets of the children of every (n-1)-gram (both uint16 where the values fit,
  else uint32), so the n-grams with context ``c`` are rows ``o{n}[c]:o{n}[c+1]`` and an
  n-gram is found by a binary search in that slice;
* log10 probabilities and backoffs of orders ≥ 2 **quantized** (KenLM's ``-q 8 -b 8``):
  one codebook per order and per kind, bins of equal count over the sorted values, each
  bin worth the mean of its values, refined by a few Lloyd (1-D k-means) steps (see
  :func:`quantize`); ``-inf`` and an exact ``0`` (a context never extended) get codes of
  their own, so they stay exact. With as many distinct values as codes the codebook is
  the values themselves (lossless). Unigrams are kept as float32, not quantized (as
  KenLM does: every backoff chain ends in them). ``quantize_bits=None`` stores every
  value as float64, bit-exact.

File layout (little-endian)::

    prefix   8s magic "KSNGRAM\\0" | u32 version | u32 header bytes | u32 header crc32
             | u32 body crc32 | u64 body bytes
    header   JSON: format, order, counts, vocabulary, quantize_bits, strict, the model's
             metadata (tokenizer fingerprint, corpus, … as in ARPA's ``# keras-seq`` line)
             and every array's dtype, shape and offset
    body     zero padding to a 64-byte boundary, then the arrays (each 64-byte aligned)

Both checksums are verified on load, so a truncated file or any flipped bit is refused
with a :class:`~keras_seq.errors.DataError` that names the file. The arrays are memory
mapped by default (``read_compact(path, mmap=True)``): the model costs no RAM beyond the
pages that scoring touches. The writer is atomic (a temporary file in the same folder,
flushed and fsynced, then ``os.replace``).

Scoring is the backoff rule of :mod:`keras_seq.ngram.backoff`, with the same arithmetic in
the same order, so :func:`keras_seq.ngram.scorer.evaluate` gives the ARPA model's
perplexity exactly when unquantized, and within what the codebooks cost otherwise.

:class:`NgramStream` is the keyboard's view: one token at a time, ``step`` (advance and
return that token's log10 p), ``score`` (one candidate) and ``suggest`` (top-k next
tokens, vectorised over the vocabulary), on a :class:`CompactNgram` or a BackoffModel;
:func:`keras_seq.export.streaming.bench_ngram_stream` times it per token.

Example:

>>> import os, tempfile
>>> from keras_seq.ngram.kneser_ney import train_kneser_ney
>>> from keras_seq.ngram.scorer import evaluate
>>> lines = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "ran"]] * 3
>>> model = train_kneser_ney(lines, order=3, discount_fallback=True)
>>> path = os.path.join(tempfile.mkdtemp(), "kn3.bin")
>>> write_compact(model, path, quantize_bits=None)
>>> compact = read_compact(path)
>>> compact.counts == model.counts, compact.quantize_bits
(True, None)
>>> abs(evaluate(compact, lines).ppl / evaluate(model, lines).ppl - 1) < 1e-12
True
"""

from __future__ import annotations

import json
import math
import os
import secrets
import struct
import zlib

import numpy as np

from keras_seq.atomic import fsync_dir
from keras_seq.errors import DataError, KerasSeqError
from keras_seq.ngram.arpa import write_arpa
from keras_seq.ngram.backoff import BackoffModel, backoff_log10probs
from keras_seq.ngram.counts import (
    BOS,
    EOS,
    MAX_ORDER,
    NgramTable,
    TokenStream,
    Vocabulary,
    unigram_table,
)

MAGIC = b"KSNGRAM\x00"
VERSION = 1
FORMAT = "keras-seq-compact-ngram"
ALIGN = 64
_PREFIX = struct.Struct("<8sIIIIQ")  # magic, version, header len, header crc, body crc, body len
_DTYPES = {"<f8", "<f4", "|u1", "<u2", "<u4"}  # every dtype a valid file can hold
NEG_INF = -math.inf


# --------------------------------------------------------------------------- quantization
def quantize(values, bits: int, iterations: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Codes and codebook for ``values`` with ``2**bits`` codes (``codebook[codes]`` ≈ values).

    ``-inf`` and ``0.0`` keep exact codes of their own. The other values start in bins of
    equal count over their sorted order, each worth the mean of its values (KenLM's
    binning), then ``iterations`` Lloyd steps (1-D k-means: every value to its nearest
    code, every code the mean of its values) lower the squared error; on python-docs
    KN5 they cut the 8-bit perplexity cost from 0.41% to 0.11%. With no more distinct
    values than free codes the codebook holds them all and the result is exact.

    >>> codes, book = quantize([-1.5, -0.25, 0.0, float("-inf"), -1.5], bits=8)
    >>> book[codes].tolist()
    [-1.5, -0.25, 0.0, -inf, -1.5]
    >>> codes, book = quantize(np.linspace(-3, -1, 1000), bits=2)  # 4 codes, no 0 / -inf
    >>> book.size, float(np.abs(book[codes] - np.linspace(-3, -1, 1000)).max()) < 0.26
    (4, True)
    """
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if np.isnan(values).any() or np.isposinf(values).any():
        raise DataError("cannot quantize NaN or +inf log-probabilities")
    if not 1 <= int(bits) <= 16:
        raise DataError(f"quantize_bits must be 1..16 or None, got {bits!r}")
    special = [v for v in (NEG_INF, 0.0) if (values == v).any()]
    free = (1 << int(bits)) - len(special)
    codes = np.zeros(values.size, dtype=np.uint8 if bits <= 8 else np.uint16)
    rest_mask = np.isfinite(values) & (values != 0.0)
    rest = values[rest_mask]
    if rest.size and free < 1:
        raise DataError(f"{bits} quantization bit(s) leave no code for ordinary values")
    book = np.unique(rest)
    if book.size <= free:  # lossless
        codes[rest_mask] = len(special) + np.searchsorted(book, rest)
    else:
        ordered = np.sort(rest)
        edges = ordered[(np.arange(1, free) * ordered.size) // free]  # free - 1 thresholds
        book = _bin_means(rest, np.searchsorted(edges, rest, side="right"), free)
        for _ in range(iterations):
            new = _bin_means(rest, _nearest(book, rest), book.size)
            if np.array_equal(new, book):
                break
            book = new
        codes[rest_mask] = len(special) + _nearest(book, rest)
    for i, v in enumerate(special):
        codes[values == v] = i
    return codes, np.concatenate([np.asarray(special, dtype=np.float64), book])


def _bin_means(values: np.ndarray, bins: np.ndarray, n_bins: int) -> np.ndarray:
    """Mean of the values in each non-empty bin (ascending when the bins are)."""
    count = np.bincount(bins, minlength=n_bins)
    total = np.bincount(bins, weights=values, minlength=n_bins)
    keep = count > 0
    return total[keep] / count[keep]


def _nearest(book: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Index of the nearest entry of the ascending ``book`` for each value."""
    return np.searchsorted((book[1:] + book[:-1]) / 2, values)


# --------------------------------------------------------------------------------- writing
def _check_bits(bits):
    if bits is None:
        return None
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 16:
        raise DataError(f"quantize_bits must be an integer from 1 to 16, or None for float64 "
                        f"(exact); got {bits!r}")
    return int(bits)


def _arrays_of(model: BackoffModel, bits) -> dict[str, np.ndarray]:
    V, N = len(model.vocab), model.order
    if len(model.tables[0]) != V or not np.array_equal(model.tables[0].keys, np.arange(V)):
        raise KerasSeqError("the model's unigram table is not one entry per vocabulary id")
    uni = np.float64 if bits is None else np.float32
    arrays = {"p1": np.asarray(model.log10_prob[0], dtype=uni)}
    if N > 1:
        arrays["b1"] = np.asarray(model.log10_backoff[0], dtype=uni)
    for n in range(2, N + 1):
        table = model.tables[n - 1]
        if len(table) >= 1 << 32:
            raise KerasSeqError(f"{len(table):,} {n}-grams do not fit 32-bit offsets")
        arrays[f"w{n}"] = table.word.astype(_uint_for(V - 1))
        # table.prefix is sorted (the keys are), so this is where each context's rows start.
        starts = np.searchsorted(table.prefix, np.arange(len(model.tables[n - 2]) + 1))
        arrays[f"o{n}"] = starts.astype(_uint_for(len(table)))
        kinds = [("p", model.log10_prob[n - 1])]
        if n < N:
            kinds.append(("b", model.log10_backoff[n - 1]))
        for kind, values in kinds:
            if bits is None:
                arrays[f"{kind}{n}"] = np.asarray(values, dtype=np.float64)
            else:
                arrays[f"{kind}{n}"], arrays[f"{kind}{n}_cb"] = quantize(values, bits)
    return arrays


def _uint_for(largest: int):
    return np.uint16 if largest < 1 << 16 else np.uint32


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def write_compact(model, path, quantize_bits: int | None = 8) -> None:
    """Write ``model`` (a BackoffModel, e.g. from ``train_kneser_ney`` or ``read_arpa``, or
    a :class:`CompactNgram`) as one compact binary file at ``path``, atomically.

    ``quantize_bits``: bits per probability and backoff of orders ≥ 2 (8: KenLM's
    ``-q 8 -b 8``; 1..16), or ``None`` to store float64 (exact).

    Raises:
        KerasSeqError: not a backoff model, bad ``quantize_bits``, or the file cannot be
            written (the message names it; no partial file is left behind).

    >>> import os, tempfile
    >>> from keras_seq.ngram.kneser_ney import train_kneser_ney
    >>> model = train_kneser_ney([["a", "b"], ["b", "a"]], order=2, discount_fallback=True)
    >>> path = os.path.join(tempfile.mkdtemp(), "m.bin")
    >>> write_compact(model, path)
    >>> open(path, "rb").read(8)
    b'KSNGRAM\\x00'
    """
    if isinstance(model, CompactNgram):
        model = model.to_backoff_model()
    if not isinstance(model, BackoffModel):
        raise KerasSeqError(f"write_compact takes a BackoffModel (train_kneser_ney, read_arpa) "
                            f"or a CompactNgram, got {type(model).__name__}")
    bits = _check_bits(quantize_bits)
    arrays = _arrays_of(model, bits)
    table, offset = {}, 0
    for name, arr in arrays.items():
        table[name] = {"dtype": arr.dtype.str, "shape": list(arr.shape), "offset": offset}
        offset = _align(offset + arr.nbytes)
    header = {
        "format": FORMAT, "order": model.order, "counts": model.counts,
        "vocab_size": len(model.vocab), "quantize_bits": bits, "strict": model.strict,
        "metadata": model.metadata, "vocab": model.vocab.words, "arrays": table,
    }
    head = json.dumps(header, sort_keys=True, default=str).encode("utf-8")
    start = _align(_PREFIX.size + len(head))
    parts = [bytes(start - _PREFIX.size - len(head))]
    at = 0
    for name, arr in arrays.items():
        parts.append(bytes(table[name]["offset"] - at))
        parts.append(memoryview(np.ascontiguousarray(arr)).cast("B"))
        at = table[name]["offset"] + arr.nbytes
    body_crc, body_len = 0, 0
    for part in parts:
        body_crc = zlib.crc32(part, body_crc)
        body_len += len(part)
    prefix = _PREFIX.pack(MAGIC, VERSION, len(head), zlib.crc32(head), body_crc, body_len)
    _atomic_write(os.fspath(path), [prefix, head, *parts])


def _atomic_write(path: str, parts) -> None:
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    try:
        # O_EXCL: never someone else's file; mode 0o666 so the umask applies as for open().
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise KerasSeqError(f"cannot write compact n-gram file {path}: {err}") from err
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    fsync_dir(folder)  # make the rename itself durable (best effort)


# --------------------------------------------------------------------------------- reading
def read_compact(path, mmap: bool = True) -> CompactNgram:
    """Load a file written by :func:`write_compact`.

    ``mmap=True`` maps the arrays read-only instead of reading them into memory. Both
    checksums are verified either way (this reads the file once).

    Raises:
        DataError: missing file, not a compact n-gram file, another format version,
            truncated or corrupt (checksum or structure); the message names the file.

    >>> import os, tempfile
    >>> from keras_seq.ngram.kneser_ney import train_kneser_ney
    >>> model = train_kneser_ney([["a", "b"], ["b", "a"]], order=2, discount_fallback=True,
    ...                          metadata={"tokenizer_fingerprint": "word:1"})
    >>> path = os.path.join(tempfile.mkdtemp(), "m.bin")
    >>> write_compact(model, path)
    >>> read_compact(path).metadata["tokenizer_fingerprint"]
    'word:1'
    >>> _ = open(path, "r+b").truncate(100)
    >>> read_compact(path)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    keras_seq.errors.DataError: corrupt compact n-gram file .../m.bin: truncated: ...
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            raw_prefix = f.read(_PREFIX.size)
            if not raw_prefix:
                raise DataError(f"{name} is empty, not a keras-seq compact n-gram file")
            if raw_prefix[:8] != MAGIC[:len(raw_prefix)]:
                raise DataError(f"{name} is not a keras-seq compact n-gram file (no "
                                f"{MAGIC!r} magic; an ARPA file is read with read_arpa)")
            if len(raw_prefix) < _PREFIX.size:
                raise _corrupt(name, f"truncated: {size} bytes, shorter than the header")
            _, version, head_len, head_crc, body_crc, body_len = _PREFIX.unpack(raw_prefix)
            if version != VERSION:
                raise DataError(f"{name} is compact n-gram format version {version}; this "
                                f"keras-seq reads version {VERSION} (rewrite it with "
                                "write_compact)")
            expected = _PREFIX.size + head_len + body_len
            if size != expected:
                what = "truncated" if size < expected else "trailing bytes"
                raise _corrupt(name, f"{what}: {size} bytes, the header says {expected}")
            head = f.read(head_len)
        if zlib.crc32(head) != head_crc:
            raise _corrupt(name, "header checksum mismatch")
        # np.asarray: a plain ndarray view of the map (slicing a np.memmap costs ~1 µs).
        buf = np.asarray(np.memmap(name, dtype=np.uint8, mode="r") if mmap
                         else np.fromfile(name, dtype=np.uint8))
        buf.flags.writeable = False
        if buf.size != expected:
            raise _corrupt(name, "the file changed while it was being read")
        if zlib.crc32(buf[_PREFIX.size + head_len:]) != body_crc:
            raise _corrupt(name, "body checksum mismatch (a flipped bit or a partial copy?)")
        header = json.loads(head.decode("utf-8"))
        return _build(name, header, buf, _align(_PREFIX.size + head_len))
    except FileNotFoundError:
        raise DataError(f"no such compact n-gram file: {name}") from None
    except OSError as err:
        raise DataError(f"cannot read compact n-gram file {name}: {err}") from None
    except KerasSeqError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError) as err:
        raise _corrupt(name, f"{type(err).__name__}: {err}") from None


def _corrupt(name: str, what: str) -> DataError:
    return DataError(f"corrupt compact n-gram file {name}: {what}")


def _build(name: str, header: dict, buf: np.ndarray, start: int) -> CompactNgram:
    if header.get("format") != FORMAT:
        raise _corrupt(name, f"format {header.get('format')!r}, expected {FORMAT!r}")
    N, V = header["order"], header["vocab_size"]
    counts, words = header["counts"], header["vocab"]
    if not (isinstance(N, int) and 1 <= N <= MAX_ORDER and len(counts) == N):
        raise _corrupt(name, f"order {N!r} with counts {counts!r}")
    vocab = Vocabulary(words)
    if vocab.words != words or len(words) != V or counts[0] != V:
        raise _corrupt(name, "the vocabulary does not start with <unk> <s> </s>, repeats a "
                       "word, or disagrees with the counts")
    arrays = {}
    for key, spec in header["arrays"].items():
        dtype = str(spec["dtype"])
        if dtype not in _DTYPES:
            raise _corrupt(name, f"array {key} has dtype {dtype!r}")
        shape = tuple(int(s) for s in spec["shape"])
        lo = start + int(spec["offset"])
        hi = lo + int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if int(spec["offset"]) % ALIGN or lo < start or hi > buf.size:
            raise _corrupt(name, f"array {key} lies outside the file")
        arrays[key] = buf[lo:hi].view(dtype).reshape(shape)
    bits = header["quantize_bits"]
    expect = {"p1": (V,)}
    if N > 1:
        expect["b1"] = (V,)
    for n in range(2, N + 1):
        expect[f"w{n}"] = (counts[n - 1],)
        expect[f"o{n}"] = (counts[n - 2] + 1,)
        for kind in ("p", "b") if n < N else ("p",):
            expect[f"{kind}{n}"] = (counts[n - 1],)
            if bits is not None:
                expect[f"{kind}{n}_cb"] = None  # any length up to 2**bits: checked below
    for key, shape in expect.items():
        if key not in arrays:
            raise _corrupt(name, f"array {key} is missing")
        if shape is not None and arrays[key].shape != shape:
            raise _corrupt(name, f"array {key} has shape {arrays[key].shape}, expected {shape}")
    for n in range(2, N + 1):
        off, w = arrays[f"o{n}"], arrays[f"w{n}"]
        if off[0] != 0 or off[-1] != counts[n - 1] or (off.size > 1 and
                                                       (np.diff(off.astype(np.int64)) < 0).any()):
            raise _corrupt(name, f"the {n}-gram offsets are not a partition of the {n}-grams")
        if w.size and int(w.max()) >= V:
            raise _corrupt(name, f"a {n}-gram word id is outside the vocabulary")
        if bits is not None:
            for kind in ("p", "b") if n < N else ("p",):
                codes, book = arrays[f"{kind}{n}"], arrays[f"{kind}{n}_cb"]
                if book.ndim != 1 or book.size > 1 << bits or (
                        codes.size and int(codes.max()) >= book.size):
                    raise _corrupt(name, f"codebook {kind}{n}_cb does not cover its codes")
    return CompactNgram(vocab, arrays, header, name, buf.size)


# ---------------------------------------------------------------------------------- model
class CompactNgram:
    """A backoff n-gram model read from a compact file (:func:`read_compact`).

    Scores like the :class:`~keras_seq.ngram.backoff.BackoffModel` it was written from:
    :func:`keras_seq.ngram.scorer.evaluate` takes it as it is (it has ``vocab`` and
    ``token_log10probs``). Orders are 1-based in every method (``prob(2)``: the bigrams).

    Attributes:
        vocab: the :class:`~keras_seq.ngram.counts.Vocabulary`.
        metadata: what the model carried (tokenizer fingerprint, corpus, discounts, …).
        strict: unseen full-order n-grams score ``-inf`` (MLE) instead of backing off.
        quantize_bits: bits per code for orders ≥ 2, or ``None`` (float64).
        path, size_bytes: the file and its size on disk.

    >>> import os, tempfile
    >>> from keras_seq.ngram.kneser_ney import train_kneser_ney
    >>> model = train_kneser_ney([["a", "b", "c"]] * 3, order=3, discount_fallback=True)
    >>> path = os.path.join(tempfile.mkdtemp(), "m.bin")
    >>> write_compact(model, path, quantize_bits=None)
    >>> compact = read_compact(path)
    >>> compact.order, compact.counts
    (3, [6, 4, 3])
    >>> bool(np.array_equal(compact.prob(2), model.log10_prob[1]))
    True
    """

    def __init__(self, vocab: Vocabulary, arrays: dict, header: dict, path=None, size_bytes=0):
        self.vocab = vocab
        self._a = arrays
        self.counts: list[int] = [int(c) for c in header["counts"]]
        self.metadata: dict = dict(header.get("metadata") or {})
        self.strict = bool(header["strict"])
        self.quantize_bits = header["quantize_bits"]
        self.path = path
        self.size_bytes = int(size_bytes)

    @property
    def order(self) -> int:
        return len(self.counts)

    def __repr__(self) -> str:
        q = f"{self.quantize_bits}-bit" if self.quantize_bits else "float64"
        return (f"CompactNgram(order={self.order}, counts={self.counts}, {q}, "
                f"{self.size_bytes:,} bytes, path={self.path!r})")

    def _values(self, key: str, rows):
        arr = self._a[key]
        book = self._a.get(key + "_cb")
        picked = arr if rows is None else arr[rows]
        if book is not None:
            return book.take(picked)
        return np.asarray(picked, dtype=np.float64)

    def prob(self, n: int, rows=None) -> np.ndarray:
        """log10 p of the order-``n`` n-grams at ``rows`` (all of them by default), float64."""
        return self._values(f"p{n}", rows)

    def backoff(self, n: int, rows=None) -> np.ndarray:
        """log10 backoff of the order-``n`` n-grams at ``rows`` (0 for the highest order)."""
        if n == self.order:
            shape = self.counts[n - 1] if rows is None else np.shape(rows)
            return np.zeros(shape)
        return self._values(f"b{n}", rows)

    def words(self, n: int) -> np.ndarray:
        """Last word id of every order-``n`` n-gram (``n`` ≥ 2), sorted within a context."""
        return self._a[f"w{n}"]

    def children(self, n: int, context: int) -> tuple[int, int]:
        """Rows ``lo, hi`` of the order-``n`` n-grams whose first n-1 words are row
        ``context`` of order n-1."""
        off = self._a[f"o{n}"]
        return int(off[context]), int(off[context + 1])

    def keys(self, n: int) -> np.ndarray:
        """``context * V + word`` of every order-``n`` n-gram, sorted (NgramTable's keys)."""
        off = self._a[f"o{n}"].astype(np.int64)
        context = np.repeat(np.arange(off.size - 1, dtype=np.int64), np.diff(off))
        return context * len(self.vocab) + self.words(n).astype(np.int64)

    def find(self, n: int, context, word) -> np.ndarray:
        """Rows of the order-``n`` n-grams (``context`` row of order n-1, ``word``); -1
        where absent or where ``context`` is -1. Vectorised binary search in each
        context's slice of the trie."""
        word = np.asarray(word, dtype=np.int64)
        context = np.asarray(context, dtype=np.int64)
        if n == 1:
            return word.copy()
        w, off = self._a[f"w{n}"], self._a[f"o{n}"]
        ok = (context >= 0) & (context < off.size - 1)
        c = np.where(ok, context, 0)
        lo = off[c].astype(np.int64)
        hi = np.where(ok, off[c + 1].astype(np.int64), lo)
        end = hi.copy()
        while True:
            active = lo < hi
            if not active.any():
                break
            mid = (lo + hi) >> 1
            less = w[np.where(active, mid, 0)] < word
            lo = np.where(active & less, mid + 1, lo)
            hi = np.where(active & ~less, mid, hi)
        hit = lo < end
        hit[hit] = w[lo[hit]] == word[hit]
        return np.where(hit, lo, -1)

    def token_log10probs(self, stream: TokenStream) -> np.ndarray:
        """log10 p of every predicted token of ``stream`` (BackoffModel's rule and order of
        arithmetic, so an unquantized file gives back the same floats)."""
        N = self.order
        ids, pos = stream.ids, stream.pos
        ending = [ids]
        for n in range(2, N + 1):
            e = np.full(ids.size, -1, dtype=np.int64)
            j = np.flatnonzero(pos >= n - 1)
            e[j] = self.find(n, ending[-1][j - 1], ids[j])
            ending.append(e)
        return backoff_log10probs(ending, pos, N, self.strict, self.prob, self.backoff)

    def to_backoff_model(self) -> BackoffModel:
        """The model as a :class:`~keras_seq.ngram.backoff.BackoffModel` (dequantized
        values), e.g. to write it as ARPA again."""
        V = len(self.vocab)
        tables = [unigram_table(V)]
        probs, backs = [self.prob(1)], [self.backoff(1)]
        for n in range(2, self.order + 1):
            keys = self.keys(n)
            tables.append(NgramTable(n, keys, keys // V, keys % V))
            probs.append(self.prob(n))
            backs.append(self.backoff(n))
        return BackoffModel(self.vocab, tables, probs, backs, dict(self.metadata), self.strict)


class _BackoffView:
    """A BackoffModel seen through CompactNgram's accessors (for :class:`NgramStream`)."""

    def __init__(self, model: BackoffModel):
        self.model = model
        self.vocab, self.order, self.counts = model.vocab, model.order, model.counts
        self.strict = model.strict

    def prob(self, n, rows=None):
        p = self.model.log10_prob[n - 1]
        return p if rows is None else p[rows]

    def backoff(self, n, rows=None):
        b = self.model.log10_backoff[n - 1]
        return b if rows is None else b[rows]

    def words(self, n):
        return self.model.tables[n - 1].word

    def keys(self, n):
        return self.model.tables[n - 1].keys

    def children(self, n, context):
        s = self.model.tables[n - 1].context_slice(context)
        return s.start, s.stop


# ------------------------------------------------------------------------------- streaming
INDEXES = ("hash", "trie")


class NgramStream:
    """Score one token at a time with a backoff n-gram (a keyboard's n-gram).

    Works on a :class:`CompactNgram` or a :class:`~keras_seq.ngram.backoff.BackoffModel`.
    The history starts as ``<s>`` (:meth:`reset`). :meth:`step` scores a token and appends
    it; after ``</s>`` the history starts again at ``<s>``, and stepping ``<s>`` itself just
    resets (returns 0.0, like the scorer, which never predicts ``<s>``). So stepping
    through ``model.vocab.encode(lines).ids`` gives :func:`~keras_seq.ngram.scorer.evaluate`'s
    token log-probs, the same floats. :meth:`score` rates one candidate without moving;
    :meth:`distribution` / :meth:`suggest` rate the whole vocabulary at once (vectorised).

    ``index``: ``"hash"`` (default) builds Python dicts of the n-grams when the stream is
    made (KenLM's ``probing`` idea: fastest lookups, but ~170 bytes of RAM per n-gram:
    15 MiB for python-docs' 93k-n-gram KN5; p50 step ~2.3 µs there); ``"trie"``
    binary-searches the model's arrays (no extra memory, a memory-mapped file stays on
    disk; p50 step ~4.7 µs).

    >>> from keras_seq.ngram.kneser_ney import train_kneser_ney
    >>> model = train_kneser_ney([["the", "cat", "sat"], ["the", "dog", "sat"]] * 3,
    ...                          order=3, discount_fallback=True)
    >>> s = NgramStream(model)
    >>> the, cat = model.vocab.index["the"], model.vocab.index["cat"]
    >>> round(10 ** s.step(the), 3), round(10 ** s.score(cat), 3)
    (0.792, 0.417)
    >>> [model.vocab.words[i] for i, _ in s.suggest(2)]
    ['cat', 'dog']
    """

    def __init__(self, model, index: str = "hash"):
        if isinstance(model, BackoffModel):
            src = _BackoffView(model)
        elif isinstance(model, CompactNgram):
            src = model
        else:
            raise KerasSeqError(f"NgramStream takes a BackoffModel or a CompactNgram, got "
                                f"{type(model).__name__}")
        if index not in INDEXES:
            raise KerasSeqError(f"index must be one of {INDEXES}, got {index!r}")
        self.model, self.index = model, index
        self._src = src
        self._V, self._N, self._strict = len(src.vocab), src.order, src.strict
        self._unigram = np.array(src.prob(1), dtype=np.float64)
        self._unigram.flags.writeable = False
        N = self._N
        # Per order n: _find[n](context row, word) -> row or -1; _p[n](row), _b[n](row):
        # one value; _kids[n](context row) -> (lo, hi); _pvec[n](slice) -> float64 values.
        self._find: list = [None, None]
        self._p: list = [None, self._unigram.tolist().__getitem__]
        self._b: list = [None, np.asarray(src.backoff(1), dtype=np.float64).tolist().__getitem__]
        self._kids: list = [None, None]
        self._pvec: list = [None, None]
        self._words: list = [None, None]
        for n in range(2, N + 1):
            self._kids.append(self._children_of(src, n))
            self._pvec.append(self._values_of(src, "p", n))
            self._words.append(src.words(n))
            if index == "hash":
                table = dict(zip(src.keys(n).tolist(), range(src.counts[n - 1])))
                self._find.append(self._hash_find(table, self._V))
                self._p.append(src.prob(n).tolist().__getitem__)
                self._b.append(src.backoff(n).tolist().__getitem__ if n < N
                               else lambda r: 0.0)
            else:
                self._find.append(self._trie_find(self._kids[n], self._words[n]))
                if n == N:
                    self._p.append(self._values_of(src, "p", n, scalar=True))
                    self._b.append(lambda r: 0.0)
                else:
                    self._p.append(self._values_of(src, "p", n, scalar=True))
                    self._b.append(self._values_of(src, "b", n, scalar=True))
        self.reset()

    @staticmethod
    def _hash_find(table: dict, V: int):
        get = table.get
        return lambda c, w: get(c * V + w, -1)

    @staticmethod
    def _trie_find(children, words):
        def find(c, w):
            lo, hi = children(c)
            if lo == hi:
                return -1
            i = lo + int(words[lo:hi].searchsorted(w))
            return i if i < hi and words[i] == w else -1

        return find

    @staticmethod
    def _children_of(src, n: int):
        if isinstance(src, CompactNgram):
            off = src._a[f"o{n}"]
            return lambda c: (int(off[c]), int(off[c + 1]))
        prefix = src.model.tables[n - 1].prefix
        return lambda c: (int(prefix.searchsorted(c)), int(prefix.searchsorted(c, "right")))

    @staticmethod
    def _values_of(src, kind: str, n: int, scalar: bool = False):
        """``rows -> log10 values`` of one order (``scalar``: one row -> a float)."""
        if isinstance(src, CompactNgram):
            arr = src._a[f"{kind}{n}"]
            book = src._a.get(f"{kind}{n}_cb")
            if book is not None:
                if scalar:
                    book = book.tolist()
                    return lambda r: book[arr[r]]
                return lambda rows: book.take(arr[rows])
        else:
            arr = src.prob(n) if kind == "p" else src.backoff(n)
        if scalar:
            return lambda r: float(arr[r])
        return arr.__getitem__

    def reset(self) -> None:
        """Start a new sentence: the history is ``<s>``."""
        self._ctx = [BOS] + [-1] * (self._N - 2) if self._N > 1 else []
        self._pos = 1  # sentence position of the next token (<s> is position 0)

    @property
    def history_length(self) -> int:
        """Words since ``<s>``."""
        return self._pos - 1

    def _check(self, token) -> int:
        t = int(token)
        if not 0 <= t < self._V:
            raise DataError(f"token id {token!r} is outside the model's vocabulary "
                            f"(0..{self._V - 1})")
        return t

    def _advance(self, w: int):
        """log10 p(w | history) and the context rows after w (suffix lengths 1..N-1)."""
        N, old = self._N, self._ctx
        avail = min(N, self._pos + 1)
        new = [w]
        longest, row = 1, w
        for n in range(2, avail + 1):
            c = old[n - 2]
            r = self._find[n](c, w) if c >= 0 else -1
            if r >= 0:
                longest, row = n, r
            if n < N:
                new.append(r)
        new.extend([-1] * (N - 1 - len(new)))
        p = self._p[longest](row)
        for k in range(longest, avail):
            c = old[k - 1]
            if c >= 0:
                p += self._b[k](c)
        if self._strict and longest < avail:
            p = NEG_INF
        return p, new

    def score(self, token_id: int) -> float:
        """log10 p(token | history) for one candidate; the history does not change
        (``<s>`` gets ``-inf``: it is never predicted)."""
        w = self._check(token_id)
        if w == BOS:
            return NEG_INF
        return self._advance(w)[0]

    def step(self, token_id: int) -> float:
        """Score ``token_id`` given the history, then append it; returns log10 p.

        ``</s>`` ends the sentence (the history becomes ``<s>`` again); ``<s>`` resets and
        returns 0.0.
        """
        w = self._check(token_id)
        if w == BOS:
            self.reset()
            return 0.0
        p, new = self._advance(w)
        if w == EOS:
            self.reset()
        else:
            self._ctx = new[: self._N - 1]
            self._pos += 1
        return p

    def distribution(self) -> np.ndarray:
        """log10 p(w | history) for every vocabulary id ``w`` (float64, ``<s>``: ``-inf``),
        vectorised: the unigrams plus each context's backoff, overwritten by the n-grams
        each context has seen."""
        N, old = self._N, self._ctx
        avail = min(N, self._pos + 1)
        dist = self._unigram.copy()
        exact = None
        for k in range(1, avail):
            c = old[k - 1]
            exact = None
            if c < 0:
                continue
            dist += self._b[k](c)
            lo, hi = self._kids[k + 1](c)
            exact = self._words[k + 1][lo:hi]
            if hi > lo:
                dist.put(exact, self._pvec[k + 1](slice(lo, hi)))
        if self._strict and avail > 1:
            keep = dist[exact] if exact is not None else None
            dist[:] = NEG_INF
            if exact is not None:
                dist[exact] = keep
        dist[BOS] = NEG_INF
        return dist

    def sparse_distribution(self) -> tuple[float, list[tuple[np.ndarray, np.ndarray]]]:
        """:meth:`distribution` without building it: ``(offset, [(ids, log10 p), …])``. Every
        word's log10 p is its unigram's plus ``offset`` (the history's backoffs), except the
        ``ids`` of each pair, which get the pair's values, later pairs overwriting earlier
        ones. A few hundred numbers instead of the vocabulary: a mixture that keeps the
        unigrams in its own order needs only these (:mod:`keras_seq.runtime.mixture`).
        Not for a strict model (``strict``: unseen words get ``-inf``).

        >>> from keras_seq.ngram.kneser_ney import train_kneser_ney
        >>> model = train_kneser_ney([["the", "cat", "sat"], ["the", "dog", "sat"]] * 3,
        ...                          order=3, discount_fallback=True)
        >>> s = NgramStream(model)
        >>> _ = s.step(model.vocab.index["the"])
        >>> offset, pairs = s.sparse_distribution()
        >>> dense = s._unigram + offset
        >>> for ids, values in pairs:
        ...     dense[ids] = values
        >>> dense[1] = -np.inf  # <s>
        >>> bool(np.allclose(dense, s.distribution()))
        True
        """
        N, old = self._N, self._ctx
        avail = min(N, self._pos + 1)
        offset, pairs = 0.0, []
        for k in range(1, avail):
            c = old[k - 1]
            if c < 0:
                continue
            b = self._b[k](c)
            offset += b
            pairs = [(ids, values + b) for ids, values in pairs]
            lo, hi = self._kids[k + 1](c)
            if hi > lo:
                pairs.append((self._words[k + 1][lo:hi],
                              np.asarray(self._pvec[k + 1](slice(lo, hi)), np.float64)))
        return offset, pairs

    def suggest(self, k: int = 3) -> list[tuple[int, float]]:
        """The ``k`` most likely next tokens as ``(token id, log10 p)``, best first (ties:
        lower id first). One vectorised pass over the vocabulary."""
        if k < 1:
            raise DataError(f"suggest needs k >= 1, got {k}")
        dist = self.distribution()
        k = min(int(k), dist.size)
        if k <= 16:  # a few argmax passes beat a partition of the whole vocabulary
            best = []
            for _ in range(k):
                i = int(dist.argmax())  # the first of equal maxima: the lower id
                if dist[i] == NEG_INF:
                    break
                best.append((i, float(dist[i])))
                dist[i] = NEG_INF
            else:
                return best
            for i, v in best:  # ran into -inf: undo, take the general path
                dist[i] = v
        threshold = np.partition(dist, dist.size - k)[dist.size - k]
        cand = np.flatnonzero(dist >= threshold)
        best = cand[np.lexsort((cand, -dist[cand]))[:k]]
        return [(int(i), float(dist[i])) for i in best]


# ------------------------------------------------------------------------------ size on disk
class _CountingWriter:
    def __init__(self):
        self.bytes = 0

    def write(self, text: str) -> None:
        self.bytes += len(text.encode("utf-8"))

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)


def model_size_bytes(model) -> int:
    """Bytes on disk: a CompactNgram's file, or the ARPA text a BackoffModel writes."""
    if isinstance(model, CompactNgram):
        return model.size_bytes

    sink = _CountingWriter()
    write_arpa(model, sink)
    return sink.bytes
