"""Write and read ARPA files (the text format of SRILM, KenLM and most n-gram tools).

Layout::

    # keras-seq {"smoothing": "kn", "tokenizer_fingerprint": ..., ...}
    \\data\\
    ngram 1=<count>
    ...
    \\1-grams:
    <log10 p>\\t<w1>\\t<log10 backoff>
    ...
    \\N-grams:
    <log10 p>\\t<w1 … wN>
    \\end\\

Text before ``\\data\\`` is ignored by ARPA readers (KenLM included), so keras-seq keeps
its metadata there as one ``# keras-seq {json}`` line. Probability 0 is written as
``-99`` (the usual log-zero) and read back as ``-inf``. A file without ``<unk>`` gets
``<unk>`` at log10 p = -100, as KenLM does.

Example:

>>> import io
>>> from keras_seq.ngram.kneser_ney import train_kneser_ney
>>> model = train_kneser_ney([["a", "b"], ["b", "a"]], order=2, discount_fallback=True)
>>> buf = io.StringIO()
>>> write_arpa(model, buf)
>>> read_arpa(io.StringIO(buf.getvalue())).counts == model.counts
True
"""

from __future__ import annotations

import itertools
import json
import os
import re

import numpy as np

from keras_seq.errors import DataError
from keras_seq.ngram.arpa_lines import LOG_ZERO, WordBytes, write_arpa_lines
from keras_seq.ngram.backoff import BackoffModel
from keras_seq.ngram.counts import (
    BOS_TOKEN,
    EOS_TOKEN,
    MAX_ORDER,
    UNK_TOKEN,
    NgramTable,
    Vocabulary,
    check_order,
    unigram_table,
    word_ids,
)

META_PREFIX = "# keras-seq "
_NGRAM_LINE = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)\s*$")
_SECTION = re.compile(r"^\\(\d+)-grams:\s*$")


LINES_PER_WRITE = 100_000


def write_arpa(model: BackoffModel, path_or_file, progress=None) -> None:
    """Write ``model`` as ARPA to a path or a text file object.

    ``progress`` (optional) is called with the number of lines written per order.
    """
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "w", encoding="utf-8", newline="\n") as f:
            return write_arpa(model, f, progress)
    f = path_or_file
    check_arpa_words(model.vocab.words)
    write_arpa_header(f, model.metadata, model.strict, model.counts)
    words = WordBytes(model.vocab.words)
    N = model.order
    for n in range(1, N + 1):
        f.write(f"\n\\{n}-grams:\n")
        backoff = model.log10_backoff[n - 1] if n < N else None
        cols = word_ids(model.tables, n)
        for lo in range(0, len(cols), LINES_PER_WRITE):
            hi = lo + LINES_PER_WRITE
            write_arpa_lines(f, words, cols[lo:hi], model.log10_prob[n - 1][lo:hi],
                             None if backoff is None else backoff[lo:hi])
        if progress:
            progress(len(model.log10_prob[n - 1]))
    f.write("\n\\end\\\n")


def check_arpa_words(words) -> None:
    """Refuse a vocabulary that ARPA cannot hold (empty words, words with whitespace)."""
    bad = next((w for w in words if not w or _FIELDS.search(w)), None)
    if bad is not None:
        raise DataError(f"cannot write the word {bad!r} to an ARPA file: its fields are split "
                        "on whitespace, so a word must be non-empty and hold no whitespace")


def write_arpa_header(f, metadata: dict, strict: bool, counts) -> None:
    """The ``# keras-seq`` metadata line, ``\\data\\`` and one ``ngram n=count`` per order."""
    meta = dict(metadata)
    meta["strict"] = strict
    f.write(META_PREFIX + json.dumps(meta, sort_keys=True, default=str) + "\n")
    f.write("\\data\\\n")
    for n, count in enumerate(counts, start=1):
        f.write(f"ngram {n}={count}\n")


def _malformed(where: str, what: str, line: int | None = None) -> DataError:
    at = f", line {line:,}" if line is not None else ""
    return DataError(f"malformed ARPA file {where}{at}: {what}")


class _Lines:
    """Iterate ``(line number, text)`` over a file; bytes are decoded as strict UTF-8 and a
    decoding error names its line (an ARPA file is UTF-8 throughout)."""

    def __init__(self, f, name: str):
        self.f, self.name, self.number = f, name, 0

    def __iter__(self):
        try:
            for line in self.f:
                self.number += 1
                if isinstance(line, bytes):
                    try:
                        line = line.decode("utf-8")
                    except UnicodeDecodeError as err:
                        raise _malformed(self.name, f"byte {err.start + 1} is not UTF-8 "
                                         f"({err.reason}); is this a binary file?",
                                         self.number) from None
                yield self.number, line
        except UnicodeDecodeError as err:  # a text stream the caller opened
            raise _malformed(self.name, f"not UTF-8 text ({err.reason})",
                             self.number + 1) from None


def read_arpa(path_or_file) -> BackoffModel:
    """Read an ARPA file into a :class:`~keras_seq.ngram.backoff.BackoffModel`.

    Every refusal is a :class:`DataError` that names the file and the line.

    Raises:
        DataError: bytes that are not UTF-8; a missing or repeated ``\\data\\`` entry or
            section; sections out of order; an order above ``MAX_ORDER``; counts that
            disagree with the header; a probability that is not a number ≤ 0 (a backoff
            that is NaN or +inf); n-grams whose shorter prefix is missing, or that appear
            twice; a missing ``\\end\\``; a damaged ``# keras-seq`` metadata line.

    >>> import io
    >>> read_arpa(io.StringIO("\\\\data\\\\\\nngram 1=3\\n\\n\\\\1-grams:\\n-1\\t<s>\\n"))
    Traceback (most recent call last):
    ...
    keras_seq.errors.DataError: malformed ARPA file <stream>, line 5: missing \\end\\ ...
    """
    if isinstance(path_or_file, (str, os.PathLike)):
        if not os.path.isfile(path_or_file):
            raise DataError(f"no such ARPA file: {path_or_file}")
        try:
            with open(path_or_file, "rb") as f:
                return _read(_Lines(f, str(path_or_file)), str(path_or_file))
        except OSError as err:
            raise DataError(f"cannot read the ARPA file {path_or_file}: "
                            f"{err.strerror or err}") from None
    return _read(_Lines(path_or_file, "<stream>"), "<stream>")


_SPACE = " \t\r\n\f\v"  # ARPA fields are split on ASCII whitespace only
_FIELDS = re.compile(r"[ \t\r\n\f\v]+")


def _read(lines: _Lines, name: str) -> BackoffModel:
    meta: dict = {}
    for number, line in lines:
        if line.startswith(META_PREFIX):
            try:
                meta = json.loads(line[len(META_PREFIX):])
            except (json.JSONDecodeError, RecursionError) as err:
                raise _malformed(name, f"the keras-seq metadata is not JSON ({err}); remove "
                                 "the line or write the model again", number) from None
            if not isinstance(meta, dict):
                raise _malformed(name, "the keras-seq metadata is not a JSON object", number)
        if line.strip(_SPACE) == "\\data\\":
            break
    else:
        raise _malformed(name, "no \\data\\ line; is this an ARPA language model?",
                         lines.number)
    header: dict[int, int] = {}
    header_line: dict[int, int] = {}
    pending = None  # a section line that ended the header without a blank line
    for number, line in lines:
        line = line.strip(_SPACE)
        if not line:
            if header:
                break
            continue
        if header and _SECTION.match(line):
            pending = (number, line)
            break
        m = _NGRAM_LINE.match(line)
        if not m:
            raise _malformed(name, f"expected 'ngram N=count' in the header, got {line[:80]!r}",
                             number)
        n = int(m.group(1))
        if not 1 <= n <= MAX_ORDER:
            raise _malformed(name, f"n-gram order {n} is outside 1..{MAX_ORDER}", number)
        if n in header:
            raise _malformed(name, f"ngram {n} appears twice in the header (first on line "
                             f"{header_line[n]})", number)
        header[n], header_line[n] = int(m.group(2)), number
    if not header or sorted(header) != list(range(1, len(header) + 1)):
        raise _malformed(name, f"header orders {sorted(header)} are not 1..N", lines.number)
    N = check_order(len(header))
    sections: dict[int, list[tuple[int, str]]] = {}
    section_line: dict[int, int] = {}
    current = None
    ended = False
    body = lines if pending is None else itertools.chain([pending], lines)
    for number, line in body:
        line = line.strip(_SPACE)
        if not line:
            continue
        if line == "\\end\\":
            ended = True
            break
        m = _SECTION.match(line)
        if m:
            current = int(m.group(1))
            if current not in header:
                raise _malformed(name, f"section \\{current}-grams: is not in the header",
                                 number)
            if current != len(sections) + 1:
                raise _malformed(name, f"section \\{current}-grams: is out of order or repeated"
                                 f" (expected \\{len(sections) + 1}-grams:)", number)
            sections[current], section_line[current] = [], number
            continue
        if current is None:
            raise _malformed(name, f"n-gram line before any \\N-grams: section: {line[:80]!r}",
                             number)
        sections[current].append((number, line))
    if not ended:
        raise _malformed(name, "missing \\end\\ (truncated file?)", lines.number)
    for n in range(1, N + 1):
        if n not in sections:
            raise _malformed(name, f"missing section \\{n}-grams:", lines.number)
        if len(sections[n]) != header[n]:
            raise _malformed(
                name, f"header says ngram {n}={header[n]} (line {header_line[n]}) but the "
                f"section has {len(sections[n])} lines", section_line[n]
            )
    return _build(sections, section_line, N, meta, name)


def _parse_section(lines: list[tuple[int, str]], n: int, has_backoff: bool, name: str):
    probs = np.empty(len(lines))
    backs = np.zeros(len(lines))
    grams = []
    for i, (number, line) in enumerate(lines):
        parts = _FIELDS.split(line)
        if len(parts) not in (n + 1, n + 2) or (len(parts) == n + 2 and not has_backoff):
            raise _malformed(name, f"bad {n}-gram line {line[:80]!r}", number)
        try:
            probs[i] = float(parts[0])
            if len(parts) == n + 2:
                backs[i] = float(parts[-1])
        except ValueError:
            raise _malformed(name, f"bad number in {n}-gram line {line[:80]!r}",
                             number) from None
        if np.isnan(probs[i]) or probs[i] > 1e-6:
            raise _malformed(name, f"log10 probability {parts[0]!r} is not a number ≤ 0",
                             number)
        if np.isnan(backs[i]) or backs[i] == np.inf:
            raise _malformed(name, f"log10 backoff {parts[-1]!r} is not a finite number",
                             number)
        grams.append(parts[1:n + 1])
    return probs, backs, grams


def _build(sections, section_line, N, meta, name) -> BackoffModel:
    probs1, backs1, grams1 = _parse_section(sections[1], 1, N > 1, name)
    unigram_words = [g[0] for g in grams1]
    for special in (BOS_TOKEN, EOS_TOKEN):
        if special not in unigram_words:
            raise _malformed(name, f"the 1-grams have no {special}", section_line[1])
    vocab = Vocabulary(unigram_words)
    if len(vocab) != len(unigram_words) + (UNK_TOKEN not in unigram_words):
        seen = set()
        for (number, _), word in zip(sections[1], unigram_words):
            if word in seen:
                raise _malformed(name, f"the 1-gram {word!r} appears twice", number)
            seen.add(word)
    V = len(vocab)
    ids1 = np.array([vocab.index[w] for w in unigram_words], dtype=np.int64)
    lp = np.zeros(V)
    bo = np.zeros(V)
    lp[ids1] = probs1
    bo[ids1] = backs1
    tables = [unigram_table(V)]
    log10_prob, log10_backoff = [lp], [bo]
    for n in range(2, N + 1):
        probs, backs, grams = _parse_section(sections[n], n, n < N, name)
        index = vocab.index
        for (number, _), gram in zip(sections[n], grams):
            for w in gram:
                if w not in index:
                    raise _malformed(name, f"{n}-gram word {w!r} is not a 1-gram", number)
        cols = np.array([[index[w] for w in g] for g in grams], dtype=np.int64)
        cols = cols.reshape(len(grams), n)
        prefix = cols[:, 0]
        for k in range(2, n):
            prefix = tables[k - 1].find(prefix, cols[:, k - 1], V)
        if (prefix < 0).any():
            i = int(np.flatnonzero(prefix < 0)[0])
            raise _malformed(name, f"{n}-gram {' '.join(grams[i])!r} has no {n - 1}-gram "
                             "prefix entry", sections[n][i][0])
        keys = prefix * V + cols[:, n - 1]
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        twice = np.flatnonzero(np.diff(keys) == 0)
        if twice.size:
            first, again = sorted(int(order[j]) for j in (twice[0], twice[0] + 1))
            raise _malformed(name, f"the {n}-gram {' '.join(grams[again])!r} appears twice "
                             f"(first on line {sections[n][first][0]})", sections[n][again][0])
        tables.append(NgramTable(n, keys, keys // V, keys % V))
        log10_prob.append(probs[order])
        log10_backoff.append(backs[order])
    for arr in (*log10_prob, *log10_backoff):
        arr[arr <= LOG_ZERO] = -np.inf
    if UNK_TOKEN not in unigram_words:
        log10_prob[0][vocab.index[UNK_TOKEN]] = -100.0  # KenLM's value for a missing <unk>
    strict = bool(meta.pop("strict", False))
    return BackoffModel(vocab, tables, log10_prob, log10_backoff, meta, strict)
