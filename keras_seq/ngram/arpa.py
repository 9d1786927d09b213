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

import io
import json
import os
import re

import numpy as np

from keras_seq.errors import DataError
from keras_seq.ngram.backoff import BackoffModel
from keras_seq.ngram.counts import (
    BOS_TOKEN,
    EOS_TOKEN,
    UNK_TOKEN,
    NgramTable,
    Vocabulary,
    check_order,
    unigram_table,
    word_ids,
)

META_PREFIX = "# keras-seq "
LOG_ZERO = -99.0
_NGRAM_LINE = re.compile(r"^ngram\s+(\d+)\s*=\s*(\d+)\s*$")
_SECTION = re.compile(r"^\\(\d+)-grams:\s*$")


def _fmt(values: np.ndarray) -> list[str]:
    values = np.where(np.isfinite(values), values, LOG_ZERO)
    values = np.maximum(values, LOG_ZERO)
    return [f"{v:.7g}" for v in values.tolist()]


def write_arpa(model: BackoffModel, path_or_file, progress=None) -> None:
    """Write ``model`` as ARPA to a path or a text file object.

    ``progress`` (optional) is called with the number of lines written per order.
    """
    if isinstance(path_or_file, (str, os.PathLike)):
        with open(path_or_file, "w", encoding="utf-8", newline="\n") as f:
            return write_arpa(model, f, progress)
    f = path_or_file
    meta = dict(model.metadata)
    meta["strict"] = model.strict
    f.write(META_PREFIX + json.dumps(meta, sort_keys=True, default=str) + "\n")
    f.write("\\data\\\n")
    for n, count in enumerate(model.counts, start=1):
        f.write(f"ngram {n}={count}\n")
    words = np.array(model.vocab.words, dtype=object)
    N = model.order
    for n in range(1, N + 1):
        f.write(f"\n\\{n}-grams:\n")
        cols = word_ids(model.tables, n)
        text = words[cols[:, 0]]
        for i in range(1, n):
            text = text + " " + words[cols[:, i]]
        probs = _fmt(model.log10_prob[n - 1])
        if n < N:
            bos = _fmt(model.log10_backoff[n - 1])
            f.writelines(f"{p}\t{t}\t{b}\n" for p, t, b in zip(probs, text.tolist(), bos))
        else:
            f.writelines(f"{p}\t{t}\n" for p, t in zip(probs, text.tolist()))
        if progress:
            progress(len(probs))
    f.write("\n\\end\\\n")


def _malformed(where: str, what: str) -> DataError:
    return DataError(f"malformed ARPA file {where}: {what}")


def read_arpa(path_or_file) -> BackoffModel:
    """Read an ARPA file into a :class:`~keras_seq.ngram.backoff.BackoffModel`.

    Raises:
        DataError: missing ``\\data\\`` or section, counts that disagree with the header,
            n-grams whose shorter prefix is missing, or lines that do not parse.
    """
    if isinstance(path_or_file, (str, os.PathLike)):
        if not os.path.exists(path_or_file):
            raise DataError(f"no such ARPA file: {path_or_file}")
        with open(path_or_file, encoding="utf-8") as f:
            return _read(f, str(path_or_file))
    return _read(path_or_file, "<stream>")


def _read(f: io.TextIOBase, name: str) -> BackoffModel:
    meta: dict = {}
    for line in f:
        if line.startswith(META_PREFIX):
            try:
                meta = json.loads(line[len(META_PREFIX):])
            except json.JSONDecodeError:
                meta = {}
        if line.strip() == "\\data\\":
            break
    else:
        raise _malformed(name, "no \\data\\ line; is this an ARPA language model?")
    header: dict[int, int] = {}
    for line in f:
        line = line.strip()
        if not line:
            if header:
                break
            continue
        m = _NGRAM_LINE.match(line)
        if not m:
            raise _malformed(name, f"expected 'ngram N=count' in the header, got {line!r}")
        header[int(m.group(1))] = int(m.group(2))
    if not header or sorted(header) != list(range(1, len(header) + 1)):
        raise _malformed(name, f"header orders {sorted(header)} are not 1..N")
    N = check_order(len(header))
    sections: dict[int, list[str]] = {}
    current = None
    ended = False
    for line in f:
        line = line.strip()
        if not line:
            continue
        if line == "\\end\\":
            ended = True
            break
        m = _SECTION.match(line)
        if m:
            current = int(m.group(1))
            if current not in header:
                raise _malformed(name, f"section \\{current}-grams: is not in the header")
            sections[current] = []
            continue
        if current is None:
            raise _malformed(name, f"n-gram line before any \\N-grams: section: {line!r}")
        sections[current].append(line)
    if not ended:
        raise _malformed(name, "missing \\end\\ (truncated file?)")
    for n in range(1, N + 1):
        if n not in sections:
            raise _malformed(name, f"missing section \\{n}-grams:")
        if len(sections[n]) != header[n]:
            raise _malformed(
                name, f"header says ngram {n}={header[n]} but the section has "
                f"{len(sections[n])} lines"
            )
    return _build(sections, N, meta, name)


def _parse_section(lines: list[str], n: int, has_backoff: bool, name: str):
    probs = np.empty(len(lines))
    backs = np.zeros(len(lines))
    grams = []
    for i, line in enumerate(lines):
        parts = line.split()
        if len(parts) not in (n + 1, n + 2) or (len(parts) == n + 2 and not has_backoff):
            raise _malformed(name, f"bad {n}-gram line {line!r}")
        try:
            probs[i] = float(parts[0])
            if len(parts) == n + 2:
                backs[i] = float(parts[-1])
        except ValueError:
            raise _malformed(name, f"bad number in {n}-gram line {line!r}") from None
        grams.append(parts[1:n + 1])
    return probs, backs, grams


def _build(sections, N, meta, name) -> BackoffModel:
    probs1, backs1, grams1 = _parse_section(sections[1], 1, N > 1, name)
    unigram_words = [g[0] for g in grams1]
    for special in (BOS_TOKEN, EOS_TOKEN):
        if special not in unigram_words:
            raise _malformed(name, f"the 1-grams have no {special}")
    vocab = Vocabulary(unigram_words)
    if len(vocab) != len(unigram_words) + (UNK_TOKEN not in unigram_words):
        raise _malformed(name, "a 1-gram appears twice")
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
        try:
            cols = np.array([[vocab.index[w] for w in g] for g in grams], dtype=np.int64)
        except KeyError as err:
            raise _malformed(name, f"{n}-gram word {err} is not a 1-gram") from None
        cols = cols.reshape(len(grams), n)
        prefix = cols[:, 0]
        for k in range(2, n):
            prefix = tables[k - 1].find(prefix, cols[:, k - 1], V)
        if (prefix < 0).any():
            bad = grams[int(np.flatnonzero(prefix < 0)[0])]
            raise _malformed(name, f"{n}-gram {' '.join(bad)!r} has no {n - 1}-gram prefix entry")
        keys = prefix * V + cols[:, n - 1]
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        if (np.diff(keys) == 0).any():
            raise _malformed(name, f"a {n}-gram appears twice")
        tables.append(NgramTable(n, keys, keys // V, keys % V))
        log10_prob.append(probs[order])
        log10_backoff.append(backs[order])
    for arr in (*log10_prob, *log10_backoff):
        arr[arr <= LOG_ZERO] = -np.inf
    if UNK_TOKEN not in unigram_words:
        log10_prob[0][vocab.index[UNK_TOKEN]] = -100.0  # KenLM's value for a missing <unk>
    strict = bool(meta.pop("strict", False))
    return BackoffModel(vocab, tables, log10_prob, log10_backoff, meta, strict)
