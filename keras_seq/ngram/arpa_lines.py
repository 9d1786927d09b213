"""ARPA n-gram lines built as bytes by numpy: ``%.7g`` numbers and word columns, vectorised.

Writing the text of an ARPA file line by line in Python costs about 2 µs a line, which is
half of a bounded Kneser-Ney run (:mod:`keras_seq.ngram.external`). Here a block of lines is
assembled without a Python loop over its rows:

- :func:`format_g7` formats floats exactly as ``"%.7g" % v`` does, into a fixed-width byte
  matrix: each value is rounded to 7 significant digits in float64, and the few values
  whose 8th digit lies too close to a rounding tie for float64 to decide (and non-finite
  values and extreme magnitudes) are formatted by Python itself;
- :func:`write_arpa_lines` gathers the pieces of every line (the number, the words from a
  :class:`WordBytes` table, the separators) into one byte buffer with a single index.

The text is the one ``"%.7g\\t%s …" % row`` gives, byte for byte (tests/test_arpa_lines.py
compares them on random and adversarial values).

Example:

>>> import io
>>> import numpy as np
>>> words = WordBytes(["<unk>", "<s>", "</s>", "the", "cat"])
>>> buf = io.StringIO()
>>> write_arpa_lines(buf, words, np.array([[3, 4], [1, 3]]), [-0.30103, -1.5], None)
>>> buf.getvalue()
'-0.30103\\tthe cat\\n-1.5\\t<s> the\\n'
>>> format_g7([0.1, -99.0, 1e-05, 123456789.0])
['0.1', '-99', '1e-05', '1.234568e+08']
"""

from __future__ import annotations

import importlib

import numpy as np

try:  # the compiled writer (setup.py builds it where a C compiler is found). By name: a
    # compiled leaf imports nothing back, but `from keras_seq.ngram import _ngram_c` reads,
    # to the import-circle checks (tests/test_architecture.py), as importing the package.
    _ngram_c = importlib.import_module("keras_seq.ngram._ngram_c")
except ImportError:  # no compiler at install time: the numpy code below, the same bytes
    _ngram_c = None

NGRAM_C = _ngram_c  # the compiled kernels' module (lines, merge), or None without one
KERNELS = ("c", "numpy")
KERNEL = "c" if _ngram_c is not None else "numpy"  # the one arpa_lines uses by default
LOG_ZERO = -99.0
WIDTH = 16  # bytes of the longest %.7g string ("-1.234567e-100" is 14)
_POW10 = 10.0 ** np.arange(23)  # exact in float64


class WordBytes:
    """A vocabulary as one UTF-8 buffer, each word followed by a space, with each word's
    offset and length (built once per file: encoding every word per block would cost
    more than the block).

    >>> WordBytes(["a", "ü"]).lengths.tolist()
    [1, 2]
    """

    def __init__(self, words):
        encoded = [w.encode("utf-8") for w in words]
        self.lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        self.offsets = np.cumsum(self.lengths + 1) - self.lengths - 1
        self.buffer = np.frombuffer(b"".join(w + b" " for w in encoded), dtype=np.uint8)


def format_g7(values) -> list[str]:
    """``["%.7g" % v for v in values]``, vectorised.

    >>> format_g7([-0.0, 2.5e-7, 1234567.5, float("inf")])
    ['-0', '2.5e-07', '1234568', 'inf']
    """
    matrix, lengths = format_g7_bytes(values)
    return [bytes(row[:n]).decode("ascii") for row, n in zip(matrix, lengths.tolist())]


def format_g7_bytes(values) -> tuple[np.ndarray, np.ndarray]:
    """``"%.7g" % v`` of each value as a ``(n, WIDTH)`` uint8 matrix and the lengths."""
    v = np.asarray(values, dtype=np.float64).ravel()
    out = np.zeros((v.size, WIDTH), dtype=np.uint8)
    lengths = np.zeros(v.size, dtype=np.int64)
    a = np.abs(v)
    ok = np.isfinite(v) & (a >= 1e-15) & (a < 1e15)
    a = np.where(ok, a, 1.0)  # the others are formatted by Python below
    e = np.floor(np.log10(a)).astype(np.int64)
    s = _scaled(a, e)  # a * 10**(6 - e), which should lie in [1e6, 1e7)
    e += (s >= 1e7).astype(np.int64) - (s < 1e6)  # log10 is off by one near powers of ten
    s = _scaled(a, e)
    # Every step above rounds once (powers of ten up to 1e22 are exact), so s is within
    # ~1e-9 of the true value: a fraction more than 1e-7 from .5 rounds the way printf does.
    frac = s - np.floor(s)
    ok &= (np.abs(frac - 0.5) > 1e-7) & (s >= 1e6) & (s < 1e7)
    m = np.floor(s + 0.5).astype(np.int64)
    carry = m >= 10_000_000  # 9999999.5 and up round to 1.000000e(e+1)
    m = np.where(carry, m // 10, m)
    e += carry
    digits = np.empty((v.size, 7), dtype=np.uint8)
    rest = np.where(ok, m, 0).astype(np.uint32)  # < 10**7; 32-bit division is faster
    for i in range(6, -1, -1):
        digits[:, i] = rest % 10
        rest //= 10
    kept = 7 - np.argmax(digits[:, ::-1] != 0, axis=1)  # digits left after stripping zeros
    negative = np.signbit(v)
    # one layout per (exponent, digits kept, sign); e is in -15..16 here, so the key fits
    # 16 bits, which numpy's stable argsort sorts by radix, in linear time
    key = (((e + 64) * 8 + kept) * 2 + negative).astype(np.uint16)
    rows = np.flatnonzero(ok)
    rows = rows[np.argsort(key[rows], kind="stable")]
    for group in np.split(rows, np.flatnonzero(np.diff(key[rows])) + 1):
        if group.size:
            _fill_group(out, lengths, group, digits[group] + 48, int(e[group[0]]),
                        int(kept[group[0]]), bool(negative[group[0]]))
    zero = v == 0  # backoffs of n-grams that are no context: "0", or "-0" for -0.0
    negative_zero = np.flatnonzero(zero & negative)
    out[zero, 0] = ord("0")
    lengths[zero] = 1
    out[negative_zero, 0], out[negative_zero, 1] = ord("-"), ord("0")
    lengths[negative_zero] = 2
    for i in np.flatnonzero(~ok & ~zero).tolist():
        text = f"{v[i]:.7g}".encode("ascii")
        out[i, :len(text)] = np.frombuffer(text, dtype=np.uint8)
        lengths[i] = len(text)
    return out, lengths


def _scaled(a, e):
    k = 6 - e
    return np.where(k >= 0, a * _POW10[np.clip(k, 0, 22)], a / _POW10[np.clip(-k, 0, 22)])


def _fill_group(out, lengths, rows, digits, exp, kept, negative) -> None:
    """Rows whose strings share one layout: exponent, digits kept and sign."""
    pieces = [b"-"] if negative else []
    d = digits[:, :kept]
    if -4 <= exp < 7:  # printf's %f style with 6 - exp decimals, trailing zeros stripped
        if exp >= 0:
            whole = d[:, :exp + 1] if kept > exp else np.concatenate(
                [d, np.full((len(rows), exp + 1 - kept), 48, np.uint8)], axis=1)
            pieces.append(whole)
            if kept > exp + 1:
                pieces += [b".", d[:, exp + 1:]]
        else:
            pieces += [b"0." + b"0" * (-exp - 1), d]
    else:  # %e style, at least two exponent digits
        pieces.append(d[:, :1])
        if kept > 1:
            pieces += [b".", d[:, 1:]]
        pieces.append(f"e{'-' if exp < 0 else '+'}{abs(exp):02d}".encode("ascii"))
    matrix = np.concatenate(
        [np.broadcast_to(np.frombuffer(p, np.uint8), (len(rows), len(p)))
         if isinstance(p, bytes) else p for p in pieces], axis=1)
    out[rows, :matrix.shape[1]] = matrix
    lengths[rows] = matrix.shape[1]


def clip_log10(values) -> np.ndarray:
    """Non-finite values and values below ``LOG_ZERO`` (-99) become -99."""
    values = np.asarray(values, dtype=np.float64)
    return np.maximum(np.where(np.isfinite(values), values, LOG_ZERO), LOG_ZERO)


def write_arpa_lines(f, words: WordBytes, cols: np.ndarray, log10_prob,
                     log10_backoff=None) -> None:
    """Lines ``p<TAB>w1 … wn[<TAB>backoff]`` for rows of word ids ``cols`` (``(rows, n)``).

    ``words`` is a :class:`WordBytes` of the vocabulary; ``log10_backoff=None`` for the
    highest order. Numbers are ``%.7g`` (``-inf`` → -99); ``f`` is a text file.
    """
    write_utf8(f, arpa_lines(words, cols, log10_prob, log10_backoff))


def available_kernel(caller: str, kernel: str | None, default: str) -> str:
    """``kernel`` (``default`` for None) if it is one this install has, else a ValueError
    that names ``caller`` and the kernels there are.

    >>> available_kernel("merge", None, "numpy")
    'numpy'
    """
    kernel = default if kernel is None else kernel
    if kernel not in KERNELS or (kernel == "c" and _ngram_c is None):
        raise ValueError(f"{caller}: kernel {kernel!r} is not available; expected one of "
                         f"{[k for k in KERNELS if k != 'c' or _ngram_c is not None]}")
    return kernel


def arpa_lines(words: WordBytes, cols: np.ndarray, log10_prob, log10_backoff=None,
               kernel: str | None = None) -> bytes:
    """The UTF-8 bytes :func:`write_arpa_lines` writes for these rows.

    ``kernel``: ``"c"`` (the compiled writer, ``_ngram_c.c``), ``"numpy"`` (the reference),
    or ``None`` for :data:`KERNEL`. Both give the same bytes.
    """
    if available_kernel("arpa_lines", kernel, KERNEL) == "c":
        cols = np.ascontiguousarray(cols, dtype=np.int64)
        backoff = None if log10_backoff is None else clip_log10(log10_backoff)
        return _ngram_c.lines(words.buffer, words.offsets, words.lengths, cols,
                             cols.shape[1], clip_log10(log10_prob), backoff)
    return _numpy_lines(words, cols, log10_prob, log10_backoff)


def _numpy_lines(words: WordBytes, cols: np.ndarray, log10_prob, log10_backoff) -> bytes:
    cols = np.asarray(cols)
    rows, n = cols.shape
    if rows == 0:
        return b""
    line = np.arange(rows)
    prob, prob_len = format_g7_bytes(clip_log10(log10_prob))
    prob[line, prob_len] = ord("\t")
    if log10_backoff is None:
        tail, tail_len = np.full((rows, 1), ord("\n"), np.uint8), np.ones(rows, np.int64)
    else:  # "<TAB>backoff<NEWLINE>"
        digits, digits_len = format_g7_bytes(clip_log10(log10_backoff))
        tail = np.empty((rows, WIDTH + 2), np.uint8)
        tail[:, 0], tail[:, 1:-1] = ord("\t"), digits
        tail[line, digits_len + 1] = ord("\n")
        tail_len = digits_len + 2
    # Each line is n + 2 pieces of one source buffer (the words, then the numbers), each a
    # (start, size): "p<TAB>", "w1 ", …, "wn", then "<TAB>backoff<NEWLINE>" or "<NEWLINE>".
    source = np.concatenate([words.buffer, prob.ravel(), tail.ravel()])
    start = np.empty((rows, n + 2), np.int64)
    size = np.empty((rows, n + 2), np.int64)
    start[:, 0] = words.buffer.size + line * WIDTH
    size[:, 0] = prob_len + 1
    start[:, 1:-1] = np.take(words.offsets, cols)
    size[:, 1:-1] = np.take(words.lengths, cols)
    size[:, 1:-2] += 1  # the space after each word but the last
    start[:, -1] = words.buffer.size + prob.size + line * tail.shape[1]
    size[:, -1] = tail_len
    start, size = start.ravel(), size.ravel()
    at = np.cumsum(size) - size  # where each piece begins in the output
    total = int(at[-1] + size[-1])
    index = np.repeat(start - at, size)
    index += np.arange(total)
    return np.take(source, index).tobytes()  # take with intp indices: the fastest gather


def write_utf8(f, data: bytes) -> None:
    """``data`` into text file ``f``: straight into its byte buffer when it has one and
    writes UTF-8 (decoding and encoding again would cost more than building the lines)."""
    buffer = getattr(f, "buffer", None)
    if buffer is not None and (getattr(f, "encoding", "") or "").lower().replace("-", "") \
            == "utf8":
        f.flush()
        buffer.write(data)
    else:
        f.write(data.decode("utf-8"))
