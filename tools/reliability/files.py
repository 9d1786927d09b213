"""Reliability area "files": corrupt and hostile files against every reader of keras-seq.

Each scenario writes files that are broken on purpose, hands them to the reader a user
would reach, and counts the cases that broke a promise:

* **corpus files and folders** (Hypothesis): random bytes and random Unicode of every
  category (lone surrogates, invalid UTF-8, combining marks, right-to-left text, NUL,
  byte-order marks, CRLF, empty files, very long lines). A load must give exactly the
  text :func:`keras_seq.data.corpus.decode_text` documents, or a ``DataError`` that
  names the file (and the byte offset, for binary or non-UTF-8 data);
* **tokenizer round trips** (Hypothesis): ``char``, ``word`` and ``subword`` fitted and
  used on random Unicode. What must survive ``decode(encode(text))`` is written in
  :mod:`keras_seq.data.tokenizers`; text that is not valid Unicode must give a
  ``DataError``;
* **ARPA**: models of random words written and read back unchanged, then valid files
  mutated (truncated, sections reordered, wrong ``\\data\\`` counts, non-numeric or
  positive probabilities, order 99999, no ``\\end\\``, binary garbage…): each one
  refused with a ``DataError`` that names the line (the exact line where it is known);
* **tokenizer.json / config.json** with wrong types, missing keys, another format or
  version, truncated JSON, huge numbers or NaN: refused with the reason, or read back
  only when the result is the same as the original;
* **.keras** files holding a ``Lambda`` layer or unknown classes: refused by
  :func:`keras_seq.models.loading.load_model` and by the resume path, without running their code.

A failure is an exception other than :class:`~keras_seq.errors.KerasSeqError`, a
refusal that does not say where, a wrong round trip, or a corrupt file accepted.

>>> rows = run("quick", __import__("tempfile").mkdtemp(), lambda line: None,
...            only=("tokenizer.json",))
>>> [(row.scenario.split(":")[0], row.ok) for row in rows]
[('tokenizer.json tampered', True)]
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import math
import random
import re
import shutil
import time
import types
import zipfile
from pathlib import Path

import numpy as np

from keras_seq.errors import DataError, KerasSeqError
from tools.reliability import Row

#: cases per scenario
COUNTS = {
    "quick": {"corpus-file": 50, "corpus-dir": 12, "char": 50, "word": 50, "subword": 20,
              "subword-fits": 1, "arpa-round-trip": 10, "arpa-mutation": 140,
              "tokenizer.json": 50, "config.json": 50},
    "full": {"corpus-file": 1200, "corpus-dir": 300, "char": 800, "word": 800, "subword": 400,
             "subword-fits": 8, "arpa-round-trip": 300, "arpa-mutation": 4000,
             "tokenizer.json": 1500, "config.json": 1500},
}
_WS = " \t\n\r\f\v"
_EXAMPLES = 3  # failures described in a row's notes


class _Tally:
    """Cases and failures of one scenario, with the first few failures in words."""

    def __init__(self):
        self.cases, self.failures, self.examples = 0, 0, []

    def case(self, problem: str | None) -> None:
        self.cases += 1
        if problem:
            self.failures += 1
            if len(self.examples) < _EXAMPLES:
                self.examples.append(problem[:300])

    def guard(self, fn, *args) -> None:
        """Run one case ``fn(*args) -> problem or None``; an exception is a failure."""
        try:
            problem = fn(*args)
        except Exception as err:  # the campaign counts every escape as a failure
            problem = f"{type(err).__name__}: {err}"
        self.case(problem)

    def row(self, scenario: str, measured: str) -> Row:
        notes = measured if not self.examples else "; ".join(self.examples)
        return Row(scenario, self.cases, self.failures, notes=notes)


def _refusal(fn, needles=(), error=DataError) -> str | None:
    """What went wrong in ``fn()``, which must raise ``error`` naming ``needles`` (None: it did)."""
    try:
        fn()
    except error as err:
        missing = [n for n in needles if n not in str(err)]
        return f"refusal does not say {missing}: {err}" if missing else None
    except Exception as err:
        return f"{type(err).__name__} instead of {error.__name__}: {err}"
    return "accepted"


def _hypothesis(strategy, n: int, body, examples=()) -> None:
    """Call ``body(example)`` on each of ``examples`` (the known hostile cases, at every
    scale), then on ``n`` examples of ``strategy`` (seeded, no shrinking)."""
    from hypothesis import HealthCheck, Phase, example, given, settings

    @settings(max_examples=n, database=None, deadline=None, derandomize=True,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy)
    def prop(drawn):
        body(drawn)

    for known in reversed(examples):
        prop = example(known)(prop)
    prop()


_LATIN1 = "caf\u00e9 na\u00efve \u00e0 la\n".encode("latin-1") * 4
_LONE = "\ud800".encode("utf-8", errors="surrogatepass")
#: corpus files every run writes: (pieces, dice) as drawn by :func:`_segments`
_KNOWN_FILES = [
    ([b"x" * 5000] * 14 + [b"\x00"], 0),  # a NUL past the first 64 KiB
    ([b"ok ", _LATIN1], 0),  # Latin-1: refused at byte offset 6
    ([b"\xef\xbb\xbf", b"ab\r\ncd\r", _LONE, b" e\n" * 200], 0),  # BOM, CRLF, surrogate
    ([b"\xef\xbb\xbf" + b"\xff" * 20], 0),  # offset counted from the file's start
    ([], 0),
    ([b"ab\n"], 31),  # a line over the limit
]
_KNOWN_FOLDERS = [
    [([b"a\n" * 100], 0), ([b"\xef\xbb\xbfb\n"], 0)],  # a BOM in the second file
    [([b"a\n" * 40_000], 0), ([b"\x00"], 0)],  # a NUL file after 80 kB of text
    [([b"good\n" * 9000], 0), ([b"ok ", _LATIN1], 0)],  # one Latin-1 file in 45 kB
]
_KNOWN_TEXTS = [("a\ud800b", "x"), ("ab c\n", "a\udcffb"), ("", "x"), (" \n\t\x1e", "a"),
                ("a b\x1ec\x1fd\n", "a\x1eb\x1f<unk>\n"), ("don't stop\n", "it's <UNK>"),
                ("\u0130stanbul \u00df\n", "ISTANBUL\n\n  x"), ("a\x85b \u00a0\n", "\u2028")]


# ----------------------------------------------------------------------------------------
# Corpus files


def _segments():
    """Hypothesis strategy: lists of byte pieces that make a hostile text file."""
    from hypothesis import strategies as st

    def utf8(text_strategy):
        return text_strategy.map(lambda s: s.encode("utf-8", errors="surrogatepass"))

    piece = st.one_of(
        utf8(st.text(max_size=40)),  # every category, lone surrogates included
        utf8(st.text(alphabet="ab cd\n", min_size=1, max_size=60)),
        utf8(st.text(alphabet=st.characters(categories=["Mn", "Me"]), max_size=6)),
        utf8(st.text(alphabet=st.characters(min_codepoint=0x590, max_codepoint=0x6FF),
                     max_size=20)),  # Hebrew and Arabic (right to left)
        st.binary(max_size=6),
        st.sampled_from([b"\xef\xbb\xbf", b"\r\n", b"\r", b"\n", b"\x00", b"\xff",
                         b"\xed\xa0\x80", b"\xc3", "\u202e\u200f".encode(), b"x" * 5000,
                         "caf\u00e9 na\u00efve \u00e0 la\n".encode("latin-1") * 4]),
    )
    return st.tuples(st.lists(piece, max_size=12), st.integers(0, 59))


def _expected_text(raw: bytes):
    """What the documented policy makes of one file: ``(text, replaced)`` or
    ``(None, (needle, offset))`` for a refusal."""
    from keras_seq.data.corpus import MAX_LINE_CHARS

    if b"\x00" in raw:
        return None, ("binary", raw.index(b"\x00"))
    skip = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    body = raw[skip:]
    escaped = body.decode("utf-8", errors="surrogateescape")  # a bad byte: one U+DCxx
    bad = re.findall("[\udc80-\udcff]", escaped)
    if bad:
        first = re.search("[\udc80-\udcff]", escaped).start()
        offset = len(escaped[:first].encode("utf-8", errors="surrogateescape")) + skip
    if len(bad) > max(16, len(body) // 100):
        return None, ("not UTF-8", offset)
    text = body.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    if max(len(line) for line in text.split("\n")) > MAX_LINE_CHARS:
        return None, ("characters (limit", None)
    return text, (len(bad), f"byte offset {offset:,}" if bad else None)


def _check_corpus(path: Path, files: list[tuple[Path, bytes]]) -> str | None:
    """Load ``path`` and compare with the policy applied to ``files`` (in sorted order;
    the files of a folder each get a final line break when they lack one)."""
    from keras_seq.data.corpus import load_corpus, split_text

    if path.is_dir():
        files = [(name, d if d.endswith(b"\n") or not d else d + b"\n") for name, d in files]
    texts, replaced, offsets = [], 0, []
    for name, data in files:
        text, extra = _expected_text(data)
        if text is None:
            needle, offset = extra
            where = [str(name), needle] + ([f"byte offset {offset:,}"] if offset is not None
                                           else [])
            return _refusal(lambda: load_corpus(path), where)
        texts.append(text)
        replaced += extra[0]
        offsets += [extra[1]] if extra[1] else []
    text = "".join(texts)
    if not split_text(text)["train"].strip():
        return _refusal(lambda: load_corpus(path), ["empty training split"])
    corpus = load_corpus(path)
    if "".join(corpus.text(s) for s in ("train", "val", "test")) != text:
        return f"{path}: the loaded text differs from the documented decoding"
    if corpus.replaced_bytes != replaced:
        return f"{path}: replaced_bytes {corpus.replaced_bytes}, expected {replaced}"
    raw = b"".join(data for _, data in files)
    if corpus.sha256 != hashlib.sha256(raw).hexdigest():
        return f"{path}: sha256 is not that of the raw bytes"
    if any(not any(offset in note for note in corpus.notes) for offset in offsets):
        return f"{path}: no note names the first replaced byte ({offsets}): {corpus.notes}"
    return None


def _long_line(pieces: list[bytes], dice: int) -> list[bytes]:
    """About one case in 60 gets a line just over the limit."""
    from keras_seq.data.corpus import MAX_LINE_CHARS

    return pieces + [b"y" * (MAX_LINE_CHARS + 1)] if dice == 31 else pieces


def _corpus_files(n: int, workdir: Path) -> _Tally:
    tally, counter = _Tally(), [0]

    def body(example):
        pieces, dice = example
        counter[0] += 1
        path = workdir / f"c{counter[0]}.txt"
        path.write_bytes(b"".join(_long_line(pieces, dice)))
        tally.guard(_check_corpus, path, [(path, path.read_bytes())])
        path.unlink()

    _hypothesis(_segments(), n, body, _KNOWN_FILES)
    return tally


def _corpus_dirs(n: int, workdir: Path) -> _Tally:
    from hypothesis import strategies as st

    tally, counter = _Tally(), [0]

    def body(files):
        counter[0] += 1
        folder = workdir / f"d{counter[0]}"
        (folder / "sub").mkdir(parents=True)
        written = []
        for i, (pieces, dice) in enumerate(files):
            path = folder / ("sub" if i % 2 else "") / f"f{i}.txt"
            path.write_bytes(b"".join(_long_line(pieces, dice)))
            written.append((path, path.read_bytes()))
        (folder / "ignored.bin").write_bytes(b"\x00\xff" * 10)  # not .txt: never read
        tally.guard(_check_corpus, folder, sorted(written))
        shutil.rmtree(folder)

    _hypothesis(st.lists(_segments(), min_size=1, max_size=4), n, body, _KNOWN_FOLDERS)
    return tally


# ----------------------------------------------------------------------------------------
# Tokenizers


def _texts():
    """Hypothesis strategy: random Unicode, sometimes with the pieces tokenizers special-case."""
    from hypothesis import strategies as st

    piece = st.one_of(
        st.text(max_size=30),  # every category, lone surrogates included
        st.text(alphabet=st.characters(codec="utf-8"), max_size=30),
        st.text(alphabet="abc AB'\n\t.", max_size=30),
        st.sampled_from(["<unk>", "<UNK>", "<eos>", "<pad>", "\x1e", "\x1f", "\n\n", "\u0130",
                         "\u00df", "e\u0301", "\u202e", "\u2028", "\x85", "\u00a0", "##",
                         "\u05e9\u05dc\u05d5\u05dd", "x" * 300]),
    )
    return st.lists(piece, max_size=8).map("".join)


def _has_surrogate(text: str) -> bool:
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def _lines_of(tokens: list[str]) -> str:
    """Word tokens with ``<eos>`` as the documented canonical text."""
    out, line = [], []
    for tok in tokens:
        if tok == "<eos>":
            out.append(" ".join(line) + "\n")
            line = []
        else:
            line.append(tok)
    return "".join(out) + " ".join(line)


def _eos_expected(text: str) -> int:
    """Non-blank lines followed by a line break (what the word rule marks with <eos>)."""
    lines = re.sub("[\x1e\x1f]", " ", text).split("\n")
    return sum(1 for line in lines[:-1] if line.strip(_WS))


def _check_ids(tok, ids) -> str | None:
    ids = np.asarray(ids)
    if ids.dtype != np.int32 or (ids.size and (ids.min() < 0 or ids.max() >= tok.vocab_size)):
        return f"ids of dtype {ids.dtype} outside 0..{tok.vocab_size - 1}"
    return None


def _fit_or_refusal(kind, text, **options):
    """``(tokenizer, None)``, or ``(None, problem or "")`` when fitting must be refused."""
    from keras_seq.data.tokenizers import make_tokenizer

    words = re.search(f"[^{_WS}\x1e\x1f]", text)
    if _has_surrogate(text) or not text or (kind != "char" and not words):
        needle = ["surrogate"] if _has_surrogate(text) else []
        problem = _refusal(lambda: make_tokenizer(kind, **options).fit(text), needle)
        return None, problem or ""
    return make_tokenizer(kind, **options).fit(text), None


def _char_case(example, workdir: Path, save: bool) -> str | None:
    train, probe = example
    tok, problem = _fit_or_refusal("char", train)
    if tok is None:
        return problem
    if _has_surrogate(probe):
        return _refusal(lambda: tok.encode(probe), ["surrogate"])
    ids = tok.encode(probe)
    known = set(tok.vocab)
    expected = "".join(ch if ch in known else "<unk>" for ch in probe)
    if tok.decode(ids) != expected:
        return f"char round trip of {probe!r} gave {tok.decode(ids)!r}"
    return _check_ids(tok, ids) or (_save_load(tok, probe, workdir) if save else None)


def _save_load(tok, probe: str, workdir: Path) -> str | None:
    from keras_seq.data.tokenizers import load_tokenizer

    folder = workdir / "tok"
    back = load_tokenizer(tok.save(folder))
    if back.fingerprint != tok.fingerprint or not np.array_equal(back.encode(probe),
                                                                   tok.encode(probe)):
        return f"{tok.kind} tokenizer changed through save/load"
    return None


def _word_case(example, workdir: Path, save: bool) -> str | None:
    (train, probe), lower = example
    tok, problem = _fit_or_refusal("word", train, lower=lower)
    if tok is None:
        return problem
    if _has_surrogate(probe):
        return _refusal(lambda: tok.encode(probe), ["surrogate"])
    tokens = tok.tokens(probe)
    body = [t for t in tokens if t != "<eos>"]
    squeezed = re.sub(f"[{_WS}\x1e\x1f]", "", probe.lower() if lower else probe)
    if "".join(body) != squeezed:
        return f"word tokens of {probe!r} lose or add characters: {tokens!r}"
    if any(re.search(f"[{_WS}]", t) for t in tokens) or "" in tokens:
        return f"a word token holds whitespace or is empty: {tokens!r}"
    if tokens.count("<eos>") != _eos_expected(probe.lower() if lower else probe):
        return f"<eos> count of {probe!r} is wrong: {tokens!r}"
    ids = tok.encode(probe)
    decoded = tok.decode(ids)
    if decoded != _lines_of(tok.map_unknown(tokens)):
        return f"word decode of {probe!r} gave {decoded!r}"
    if not np.array_equal(tok.encode(decoded), ids):
        return f"word round trip of {probe!r} is not stable: {decoded!r}"
    return _check_ids(tok, ids) or (_save_load(tok, probe, workdir) if save else None)


def _subword_case(tok, probe: str) -> str | None:
    from keras_seq.data.tokenizers import WordTokenizer

    if _has_surrogate(probe):
        return _refusal(lambda: tok.encode(probe), ["surrogate"])
    ids = tok.encode(probe)
    decoded = tok.decode(ids)
    if not np.array_equal(tok.encode(decoded), ids):
        return f"subword round trip of {probe!r} is not stable: {decoded!r}"
    words = WordTokenizer(lower=tok.options["lower"]).tokenize_lines(probe)
    got = [line.split(" ") for line in decoded.split("\n") if line]
    if len(got) != len(words) or any(
            len(a) != len(b) or any(x not in (y, "<unk>") for x, y in zip(a, b))
            for a, b in zip(got, words)):
        return f"subword decode of {probe!r} gave {decoded!r}, words {words!r}"
    return _check_ids(tok, ids)


def _subword(n: int, fits: int, workdir: Path) -> tuple[_Tally, str]:
    """Subword fits on random words and random Unicode, then round trips on each."""
    from keras_seq.data.tokenizers import SubwordTokenizer

    tally = _Tally()
    rng = random.Random(7)
    alphabet = "abcdefghé\u0301\u05d0\u05d1ßİ'0123"
    tokenizers = []
    for i in range(fits):
        words = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 8)))
                 for _ in range(60)]
        text = "\n".join(" ".join(rng.choice(words) for _ in range(8)) for _ in range(60))
        text += "".join(chr(rng.randint(0x20, 0x2FFFF)) for _ in range(200))
        text = "".join(ch for ch in text if not "\ud800" <= ch <= "\udfff")
        try:
            tok = SubwordTokenizer(vocab_size=rng.choice([32, 64, 200]),
                                   lower=bool(i % 2)).fit(text)
        except DataError as err:
            if "tensorflow" in str(err):
                return tally, f"skipped: {err}"
            tally.case(f"subword fit refused random text: {err}")
            continue
        except Exception as err:
            tally.case(f"subword fit: {type(err).__name__}: {err}")
            continue
        tally.case(None if tok.vocab_size <= tok.options["vocab_size"] else "vocab too big")
        tokenizers.append(tok)
    if not tokenizers:
        return tally, "no subword tokenizer could be fitted"
    per = max(1, n // len(tokenizers))
    for tok in tokenizers:
        _hypothesis(_texts(), per, lambda probe, tok=tok: tally.guard(_subword_case, tok, probe),
                    [probe for _, probe in _KNOWN_TEXTS])
    tally.guard(_save_load, tokenizers[0], "abc dé\n", workdir)
    return tally, f"{len(tokenizers)} fits on random words + Unicode, then round trips"


# ----------------------------------------------------------------------------------------
# ARPA


def _same_model(a, b) -> bool:
    """Same vocabulary, n-grams, log10 probabilities and backoffs (written to 7 digits)."""
    if a.vocab.words != b.vocab.words or a.counts != b.counts:
        return False
    for ta, tb in zip(a.tables, b.tables):
        if not np.array_equal(ta.keys, tb.keys):
            return False
    for xs, ys in ((a.log10_prob, b.log10_prob), (a.log10_backoff, b.log10_backoff)):
        for x, y in zip(xs, ys):
            x = np.where(x <= -99, -np.inf, x)
            y = np.where(y <= -99, -np.inf, y)
            if not np.allclose(x, y, rtol=2e-6, atol=1e-7):
                return False
    return True


def _kn(lines, order):
    import warnings

    from keras_seq.ngram.kneser_ney import train_kneser_ney

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return train_kneser_ney(lines, order, discount_fallback=True,
                                metadata={"tokenizer_fingerprint": "word:fuzz"})


def _arpa_round_trip(n: int, workdir: Path) -> _Tally:
    """Models of random Unicode words (the word rule's tokens) survive write + read."""
    from hypothesis import strategies as st

    from keras_seq.data.tokenizers import WordTokenizer
    from keras_seq.ngram.arpa import read_arpa, write_arpa

    tally = _Tally()
    splitter = WordTokenizer()

    def case(example):
        text, order = example
        if _has_surrogate(text):
            return None
        lines = splitter.tokenize_lines(text) or [["x"]]
        model = _kn(lines, order)
        path = workdir / "rt.arpa"
        write_arpa(model, path)
        back = read_arpa(path)
        buf = io.StringIO()
        write_arpa(model, buf)
        again = read_arpa(io.StringIO(buf.getvalue()))
        if not (_same_model(model, back) and _same_model(model, again)):
            return f"order-{order} model of {text[:60]!r} changed through ARPA"
        if back.metadata.get("tokenizer_fingerprint") != "word:fuzz":
            return "ARPA metadata lost"
        return None

    _hypothesis(st.tuples(_texts(), st.integers(1, 4)), n,
                lambda example: tally.guard(case, example),
                [(probe, 2) for _, probe in _KNOWN_TEXTS])
    # a word with whitespace cannot be written: a clear refusal, not a broken file
    tally.guard(lambda: _refusal(lambda: write_arpa(_kn([["a b", "c"]], 2), io.StringIO()),
                                 ["whitespace"]))
    return tally


_JUNK_NUMBERS = ["abc", "nan", "NaN", "inf", "+inf", "1e999", "0x1p3", "--1", "1.2.3", "+0.5",
                 "12", "1e5", "\u22121", "\u0663", "-", "1,5", "true"]


def _arpa_bases():
    """Valid ARPA texts of orders 1, 2, 3 and 5 (the project's own writer)."""
    from keras_seq.ngram.arpa import write_arpa

    rng = np.random.default_rng(0)
    p = 1.0 / np.arange(1, 41)
    p /= p.sum()
    lines = [[f"w{i}" for i in rng.choice(40, size=rng.integers(1, 9), p=p)]
             for _ in range(150)]
    lines += [["\u00e9t\u00e9", "\u05e9\u05dc\u05d5\u05dd", "\x85", "\u00a0"]]
    bases = []
    for order in (1, 2, 3, 5):
        model = _kn(lines, order)
        buf = io.StringIO()
        write_arpa(model, buf)
        bases.append((model, buf.getvalue()))
    return bases


def _mutate(kind: str, text: str, rng: random.Random, order: int):
    """``(bytes, line or None, benign)``: the mutated file, the line a refusal must name
    (None: any line) and whether reading it back unchanged is allowed instead."""
    lines = text.split("\n")
    data_at = lines.index("\\data\\")
    end_at = lines.index("\\end\\")
    grams = [i for i, ln in enumerate(lines) if "\t" in ln]
    sections = [i for i, ln in enumerate(lines) if re.match(r"\\\d+-grams:", ln)]
    body = [i for i in range(data_at, end_at + 1) if lines[i]]

    def done(new_lines, line=None, benign=False):
        return "\n".join(new_lines).encode("utf-8"), line, benign

    if kind == "truncate-bytes":
        raw = text.encode("utf-8")
        cut = rng.randrange(0, raw.index(b"\\end\\") + 4)
        return raw[:cut], None, False
    if kind == "truncate-lines":
        return done(lines[:rng.randrange(0, end_at)])
    if kind == "drop-line":
        i = rng.choice(body)
        return done(lines[:i] + lines[i + 1:])
    if kind == "duplicate-line":
        i = rng.choice(body)
        return done(lines[:i + 1] + lines[i:], benign=i == end_at)
    if kind == "duplicate-ngram":
        i = rng.choice(grams)
        n = len(lines[i].split("\t")[1].split(" "))
        new = lines[:i + 1] + lines[i:]
        new[data_at + n] = re.sub(r"=(\d+)", lambda m: f"={int(m.group(1)) + 1}", new[data_at + n])
        return done(new, line=i + 2)
    if kind == "swap-sections" and len(sections) > 1:
        a, b = sorted(rng.sample(range(len(sections)), 2))
        bounds = sections + [end_at]
        blocks = [lines[bounds[k]:bounds[k + 1]] for k in range(len(sections))]
        blocks[a], blocks[b] = blocks[b], blocks[a]
        return done(lines[:sections[0]] + sum(blocks, []) + lines[end_at:])
    if kind == "wrong-count":
        n = rng.randint(1, order)
        delta = rng.choice([1, -1, 7, -3, 10**rng.randint(3, 30)])
        new = list(lines)
        new[data_at + n] = re.sub(r"=(\d+)", lambda m: f"={max(0, int(m.group(1)) + delta)}",
                                  new[data_at + n])
        if new[data_at + n] == lines[data_at + n]:
            new[data_at + n] += "1"
        return done(new)
    if kind in ("bad-probability", "bad-backoff"):
        with_backoff = [i for i in grams if lines[i].count("\t") == 2]
        pool = with_backoff if kind == "bad-backoff" and with_backoff else grams
        i = rng.choice(pool)
        fields = lines[i].split("\t")
        junk = rng.choice(_JUNK_NUMBERS[:6] if kind == "bad-backoff" else _JUNK_NUMBERS)
        fields[-1 if kind == "bad-backoff" and pool is with_backoff else 0] = junk
        return done(lines[:i] + ["\t".join(fields)] + lines[i + 1:], line=i + 1)
    if kind == "huge-order":
        new = list(lines)
        choice = rng.randrange(3)
        if choice == 0:
            new.insert(data_at + order + 1, "ngram 99999=1")
            return done(new, line=data_at + order + 2)
        if choice == 1:
            new[data_at + order] = re.sub(r"ngram \d+", "ngram 99999", new[data_at + order])
            return done(new, line=data_at + order + 1)
        i = rng.choice(sections)
        new[i] = "\\99999-grams:"
        return done(new, line=i + 1)
    if kind == "no-end":
        return done(lines[:end_at] + lines[end_at + 1:])
    if kind == "garbage":
        raw = text.encode("utf-8")
        start = raw.index(b"\\data\\")
        at = rng.randrange(start, raw.index(b"\\end\\") + 5)
        junk = bytes(rng.choice(_NO_NEWLINE) for _ in range(rng.randint(1, 40))) + b"\xff"
        return raw[:at] + junk + raw[at:], raw[:at].count(b"\n") + 1, False
    if kind == "binary":
        return bytes(rng.randrange(256) for _ in range(rng.randint(0, 3000))), None, False
    if kind == "damaged-metadata":
        new = list(lines)
        new[0] = new[0][:rng.randrange(len("# keras-seq ") + 1, len(new[0]))]
        return done(new, line=1)
    if kind == "garbage-after-end":
        return text.encode("utf-8") + bytes(rng.randrange(256) for _ in range(50)), None, True
    # "bit-flip": any outcome but a traceback is fine (a digit may change into another)
    raw = bytearray(text.encode("utf-8"))
    at = rng.randrange(raw.index(b"\\data\\"), len(raw))
    raw[at] ^= 1 << rng.randrange(8)
    return bytes(raw), None, None


_NO_NEWLINE = [b for b in range(256) if b != 10]
_MUTATIONS = ("truncate-bytes", "truncate-lines", "drop-line", "duplicate-line",
              "duplicate-ngram", "swap-sections", "wrong-count", "bad-probability",
              "bad-backoff", "huge-order", "no-end", "garbage", "binary", "damaged-metadata",
              "garbage-after-end", "bit-flip")


def _arpa_mutations(n: int, workdir: Path) -> tuple[_Tally, dict]:
    from keras_seq.ngram.arpa import read_arpa

    tally, bases, rng, per_kind = _Tally(), _arpa_bases(), random.Random(11), {}
    path = workdir / "mutated.arpa"

    def case(i):
        kind = _MUTATIONS[i % len(_MUTATIONS)]
        model, text = bases[rng.randrange(len(bases))]
        data, line, benign = _mutate(kind, text, rng, model.order)
        per_kind[kind] = per_kind.get(kind, 0) + 1
        path.write_bytes(data)
        source = path
        if i % 2:
            try:
                source = io.StringIO(data.decode("utf-8"))
            except UnicodeDecodeError:
                pass
        try:
            back = read_arpa(source)
        except DataError as err:
            if benign:
                return f"{kind}: a harmless change was refused: {err}"
            if not re.search(r", line \d|is empty", str(err)):
                return f"{kind}: refusal names no line: {err}"
            if line is not None and f", line {line:,}:" not in str(err):
                return f"{kind}: refusal names the wrong line (expected {line}): {err}"
            return None
        if benign is None or _same_model(back, model):
            return None
        return f"{kind}: corrupt file accepted"

    for i in range(n):
        tally.guard(case, i)
    return tally, per_kind


# ----------------------------------------------------------------------------------------
# tokenizer.json and config.json


_WRONG_VALUES = [None, 0, 1, -1, 1.5, "x", "", [], {}, [1, 2], True, False, float("nan"),
                 float("inf"), 10**400, 1e308, -10**30, "NaN", {"a": [None]}]


def _tamper_json(data: dict, rng: random.Random, extra_targets) -> tuple[str, str]:
    """``(how, text)``: one random tampering of a JSON document."""
    text = json.dumps(data)
    choice = rng.randrange(10)
    if choice == 0:
        return "truncated", text[:rng.randrange(len(text))]
    if choice == 1:
        return "not JSON", rng.choice(["", "null", "[]", "42", '"x"', "[" * 100_000,
                                       "\ufeff{}", "{'a': 1}", "{\"a\": 1,}"])
    data = json.loads(text)
    keys = list(data)
    targets = [(data, k) for k in keys] + [t for t in extra_targets(data)]
    holder, key = rng.choice(targets)
    if choice in (2, 3):
        del holder[key]
        return f"missing {key}", json.dumps(data)
    if choice == 4:
        if isinstance(holder, list):
            holder.append(1)
        else:
            holder["unknown_" + str(rng.randrange(99))] = 1
        return "unknown key", json.dumps(data)
    value = rng.choice(_WRONG_VALUES)
    holder[key] = value
    return f"{key}={value!r:.40}", json.dumps(data, allow_nan=True)


_KNOWN_TOKENIZER_EDITS = [
    ("kind", []), ("kind", {}), ("kind", "bpe"), ("kind", "char"), ("options", None),
    ("options", []), ("options", {"lower": "yes"}), ("options", {"max_vocab": float("nan")}),
    ("options", {"bogus": 1}), ("vocab", "abc"), ("vocab", None), ("vocab", [1, 2, 3]),
    ("vocab", []), ("version", 2), ("version", None), ("fingerprint", None), ("fingerprint", 5),
    ("format", None), ("format", ["keras-seq-tokenizer"]),
]
_KNOWN_BAD_JSON = ["", "null", "[1, 2]", "42", "[" * 100_000, '{"format": "keras-seq-tokenizer"}',
                   '{"format": "keras-seq-tokenizer", "version": 1}', "{\"a\": NaN}",
                   '{"kind": "lm"', "\ufeff{}"]


def _tokenizer_json(n: int, workdir: Path) -> _Tally:
    from keras_seq.data.tokenizers import load_tokenizer, make_tokenizer

    tally, rng = _Tally(), random.Random(3)
    text = "The cat sat.\nThe dog, \u00e9t\u00e9 \u05e9\u05dc\u05d5\u05dd!\n"
    originals = [make_tokenizer("char").fit(text), make_tokenizer("word").fit(text),
                 make_tokenizer("word", max_vocab=8, lower=False).fit(text)]
    path = workdir / "tokenizer.json"

    def extra(data):
        targets = [(data["options"], k) for k in data["options"]]
        vocab = data["vocab"]
        return targets + [(vocab, rng.randrange(len(vocab)))]

    def vocab_edit(data):
        vocab = data["vocab"]
        edit = rng.randrange(5)
        if edit == 0:
            vocab.append(vocab[-1])
        elif edit == 1:
            vocab.pop(rng.randrange(len(vocab)))
        elif edit == 2:
            vocab.insert(0, vocab.pop(1))
        elif edit == 3:
            vocab.append("new")
        else:
            data["vocab"] = vocab[:1]
        return data

    def check(tok, how, content):
        path.write_text(content, encoding="utf-8")
        try:
            back = load_tokenizer(path)
        except KerasSeqError as err:
            return None if str(path) in str(err) else f"{how}: refusal names no file: {err}"
        if back.fingerprint == tok.fingerprint and back.vocab == tok.vocab:
            return None  # the change did not matter (a default value, an equal number)
        return f"{how}: damaged tokenizer.json accepted"

    def case(i):
        tok = originals[i % len(originals)]
        data = tok.to_dict()
        if i % 7 == 0:
            how, content = "vocabulary edited", json.dumps(vocab_edit(data))
        elif i % 7 == 1:
            data["version"] = rng.choice([0, 2, "1", "0.1", None])
            data["format"] = rng.choice([data["format"], "keras-seq-tokenizer2"])
            how, content = "another version/format", json.dumps(data)
        else:
            how, content = _tamper_json(data, rng, extra)
        return check(tok, how, content)

    word = originals[1]
    for key, value in _KNOWN_TOKENIZER_EDITS:
        edited = {**word.to_dict(), key: value}
        tally.guard(check, word, f"{key}={value!r}", json.dumps(edited, allow_nan=True))
    for text in _KNOWN_BAD_JSON:
        tally.guard(check, word, f"{text[:20]!r}", text)
    for i in range(n):
        tally.guard(case, i)
    for raw in (b"\xff\xfe{}", b"\x00" * 10):
        path.write_bytes(raw)
        tally.case(_refusal(lambda: load_tokenizer(path), [str(path)]))
    return tally


_KNOWN_CONFIG_EDITS = [
    ("lr", "fast"), ("lr", float("nan")), ("epochs", 10**30), ("epochs", 2.5), ("epochs", True),
    ("clip_norm", float("inf")), ("dropout", None), ("seed", -1), ("seed", 2**40),
    ("kind", None), ("kind", []), ("version", "0.0.1"), ("version", None), ("units", []),
    ("cell", 5), ("lower", "yes"), ("max_minutes", 10**400),
]


def _config_json(n: int, workdir: Path) -> _Tally:
    from keras_seq.tasks.lm.config import LMConfig

    tally, rng = _Tally(), random.Random(5)
    original = LMConfig(epochs=3, units=16, max_minutes=2.5)
    path = workdir / "config.json"

    def case(i):
        data = {"kind": "lm", **original.to_dict()}
        if i % 9 == 0:
            data[rng.choice(["kind", "version"])] = rng.choice(["seq2seq", "0.0.1", "99", None])
            how, content = "another kind/version", json.dumps(data)
        else:
            how, content = _tamper_json(data, rng, lambda d: ())
        return check(how, content)

    def check(how, content):
        path.write_text(content, encoding="utf-8")
        try:
            back = LMConfig.load(path)
        except KerasSeqError as err:
            return None if str(path) in str(err) else f"{how}: refusal names no file: {err}"
        data = json.loads(content)
        fields = {f.name: f.type for f in dataclasses.fields(LMConfig)}
        missing = set(fields) - set(data) if isinstance(data, dict) else set()
        if missing and missing <= set(LMConfig.added_alone):  # an older config: its default
            data.update({f.name: f.default for f in dataclasses.fields(LMConfig)
                         if f.name in missing})
        if (data.get("kind") != "lm" or set(data) != {"kind", *fields}
                or not all(_valid_typed(fields[k], data[k]) for k in fields)):
            return f"{how}: damaged config.json accepted"
        if back.to_dict() != {k: data[k] for k in fields}:
            return f"{how}: config.json read back with other values"
        return None  # a valid value of the right type: an edit, not damage

    for key, value in _KNOWN_CONFIG_EDITS:
        data = {"kind": "lm", **original.to_dict(), key: value}
        tally.guard(check, f"{key}={value!r}", json.dumps(data, allow_nan=True))
    data = {"kind": "lm", **original.to_dict()}
    del data["units"]
    tally.guard(check, "missing units", json.dumps(data))
    for text in _KNOWN_BAD_JSON:
        tally.guard(check, f"{text[:20]!r}", text)
    for i in range(n):
        tally.guard(case, i)
    return tally


def _valid_typed(annotation: str, value) -> bool:
    """An independent reading of a field's declared type (``"int"``, ``"float | None"``…):
    integers up to 2**53, finite numbers."""
    for name in (part.strip() for part in annotation.split("|")):
        if (name == "None" and value is None or name == "bool" and isinstance(value, bool)
                or name == "int" and type(value) is int and abs(value) <= 2**53
                or name == "float" and (type(value) is int and abs(value) <= 2**53
                                        or type(value) is float and math.isfinite(value))
                or name == "str" and isinstance(value, str)):
            return True
    return False


def _run_config_json(n: int, workdir: Path) -> _Tally:
    """The same tampering through ``runs.read_run_config`` (the check every command runs)."""
    from keras_seq import runs
    from keras_seq.tasks.lm.config import LMConfig

    tally, rng = _Tally(), random.Random(6)
    folder = workdir / "run"
    folder.mkdir(exist_ok=True)

    def case(_):
        how, content = _tamper_json({"kind": "lm", **LMConfig().to_dict()}, rng, lambda d: ())
        (folder / "config.json").write_text(content, encoding="utf-8")
        try:
            runs.read_run_config(folder, "lm")
        except KerasSeqError:
            return None
        return None  # kind and version intact: the typed check is LMConfig.load's

    for i in range(n):
        tally.guard(case, i)
    return tally


# ----------------------------------------------------------------------------------------
# .keras files


def _keras_files(folder: Path, marker: Path) -> dict[str, Path]:
    """Hostile ``.keras`` files: a Lambda whose code would write ``marker``, classes
    nobody registered, a class from ``builtins``, a damaged zip."""
    import keras

    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    inp = keras.Input((3,))
    lam = keras.layers.Lambda(lambda x, m=str(marker): (open(m, "w").write("ran"), x)[1],
                              output_shape=(3,))
    keras.Model(inp, lam(inp)).save(folder / "lambda.keras")
    marker.unlink(missing_ok=True)  # building the model called it once
    files["Lambda layer"] = folder / "lambda.keras"
    inp = keras.Input((3,))
    keras.Model(inp, keras.layers.Dense(2)(inp)).save(folder / "ok.keras")
    with zipfile.ZipFile(folder / "ok.keras") as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    for label, old, new in (("unknown class", '"Dense"', '"EvilLayer"'),
                            ("unknown module", '"keras.layers"', '"evil.layers"'),
                            ("builtins class", '"Dense"', '"eval"')):
        target = folder / f"{label.replace(' ', '_')}.keras"
        config = members["config.json"].decode()
        if label == "builtins class":
            config = config.replace('"keras.layers"', '"builtins"')
        with zipfile.ZipFile(target, "w") as archive:
            for name, blob in members.items():
                archive.writestr(name, config.replace(old, new) if name == "config.json"
                                 else blob)
        files[label] = target
    raw = (folder / "ok.keras").read_bytes()
    (folder / "truncated.keras").write_bytes(raw[:len(raw) // 2])
    files["truncated zip"] = folder / "truncated.keras"
    (folder / "empty.keras").write_bytes(b"")
    files["empty file"] = folder / "empty.keras"
    return files


def _keras_scenarios(workdir: Path) -> list[Row]:
    from keras_seq import runs
    from keras_seq.models import loading

    marker = workdir / "lambda-ran"
    refused, clear, resume = _Tally(), _Tally(), _Tally()
    files = _keras_files(workdir / "keras", marker)
    run_dir = workdir / "keras" / "run"
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    shutil.copy(workdir / "keras" / "ok.keras", run_dir / runs.LAST)
    refused.guard(lambda: None if loading.load_model(run_dir, "last") is not None else "no model")
    try:
        from keras_seq.training.checkpoints import resume_from_checkpoint
    except Exception as err:  # the resume path could not be imported: say so
        resume_from_checkpoint = None
        resume.case(f"cannot import resume_from_checkpoint: {err}")
    for label, path in files.items():
        shutil.copy(path, run_dir / runs.LAST)
        try:
            loading.load_model(run_dir, "last")
            outcome = None
        except Exception as err:  # what reaches the user is measured
            outcome = err
        ran = marker.exists()
        marker.unlink(missing_ok=True)
        refused.case(f"{label}: loaded" if outcome is None else
                     f"{label}: its code ran" if ran else None)
        clear.case(None if isinstance(outcome, KerasSeqError) and str(run_dir / runs.LAST)
                   in str(outcome) else
                   f"{label}: {type(outcome).__name__} ({str(outcome)[:80]}...) reaches "
                   "the user instead of a KerasSeqError naming the file")
        if resume_from_checkpoint is not None:
            point = types.SimpleNamespace(checkpoint=run_dir / runs.LAST, rng_states=None,
                                          epochs_done=1)
            try:
                resume_from_checkpoint(point)
                resume.case(f"{label}: resume loaded it")
            except Exception:  # only safety is measured here
                resume.case(f"{label}: resume ran its code" if marker.exists() else None)
            marker.unlink(missing_ok=True)
    kinds = ", ".join(files)
    return [
        refused.row(".keras with Lambda / unknown classes: loading.load_model refuses",
                    f"{kinds} (+ a plain model that must load); a Lambda that would write a "
                    "marker file"),
        clear.row(".keras refusal reaches the user as a KerasSeqError naming the file",
                  "loading.load_model"),
        resume.row(".keras with Lambda / unknown classes: resume_from_checkpoint refuses",
                   "keras.saving.load_model with the default safe_mode=True"),
    ]


# ----------------------------------------------------------------------------------------


def run(scale: str, workdir, printer, only=None) -> list[Row]:
    """Run the scenarios of the "files" area at ``scale`` (``"quick"`` or ``"full"``).

    Args:
        workdir: a folder for the files the scenarios write (left as they end).
        printer: called with one progress line per scenario.
        only: names of scenarios (the part of their title before ":") to run; all by default.
    """
    if scale not in COUNTS:
        raise KerasSeqError(f"unknown scale {scale!r}; expected quick or full")
    counts, workdir = COUNTS[scale], Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []

    def scenario(title, make):
        if only is not None and title.split(":")[0] not in only:
            return
        started = time.monotonic()
        made = make()
        for row in made if isinstance(made, list) else [made]:
            row.notes = (row.notes + f" ({time.monotonic() - started:.1f} s)").strip()
            rows.append(row)
            printer(f"  files: {row.scenario}: {row.cases} cases, {row.failures} failures")

    def tokenizer_rows(kind, case):
        from hypothesis import strategies as st

        tally, folder = _Tally(), workdir / kind
        folder.mkdir(exist_ok=True)
        strategy = st.tuples(_texts(), _texts())
        if kind == "word":
            strategy = st.tuples(strategy, st.booleans())
        seen = [0]

        def body(example):
            seen[0] += 1
            tally.guard(case, example, folder, seen[0] % 10 == 0)

        known = _KNOWN_TEXTS if kind == "char" else [(t, lower) for t in _KNOWN_TEXTS
                                                     for lower in (True, False)]
        _hypothesis(strategy, counts[kind], body, known)
        return tally

    scenario("corpus files", lambda: _corpus_files(counts["corpus-file"], workdir).row(
        "corpus files: random Unicode / invalid UTF-8 / BOM / CRLF / NUL / long lines",
        "Hypothesis; the text must match the documented decoding, or a DataError naming "
        "the file (and byte offset)"))
    scenario("corpus folders", lambda: _corpus_dirs(counts["corpus-dir"], workdir).row(
        "corpus folders: 1-4 random .txt files (and a binary non-.txt file)",
        "Hypothesis; each file decoded on its own; a refusal names the bad file"))
    scenario("char tokenizer", lambda: tokenizer_rows("char", _char_case).row(
        "char tokenizer: fit / encode / decode / save on random Unicode",
        "decode(encode(s)) == s with unknown characters as <unk>; lone surrogates → DataError"))
    scenario("word tokenizer", lambda: tokenizer_rows("word", _word_case).row(
        "word tokenizer: fit / encode / decode / save on random Unicode",
        "no character lost; decode gives the tokens one space apart, <eos> as a line break; "
        "re-encoding is stable"))

    def subword_row():
        tally, measured = _subword(counts["subword"], counts["subword-fits"], workdir)
        return tally.row("subword tokenizer: fit and round trips on random Unicode", measured)

    scenario("subword tokenizer", subword_row)

    def arpa_rows():
        round_trip = _arpa_round_trip(counts["arpa-round-trip"], workdir)
        mutations, per_kind = _arpa_mutations(counts["arpa-mutation"], workdir)
        kinds = ", ".join(f"{k} {v}" for k, v in per_kind.items())
        return [round_trip.row("ARPA: models of random Unicode words written and read back",
                               "orders 1-4; vocabulary, n-grams and scores must be unchanged"),
                mutations.row("ARPA: mutated files (truncated, reordered, wrong counts, …)",
                              f"each refused naming the line, or read unchanged: {kinds}")]

    scenario("ARPA", arpa_rows)
    scenario("tokenizer.json", lambda: _tokenizer_json(counts["tokenizer.json"], workdir).row(
        "tokenizer.json tampered: types, keys, format, version, truncation, NaN, huge numbers",
        "load_tokenizer must refuse naming the file, or load the very same tokenizer"))
    scenario("config.json", lambda: _config_json(counts["config.json"], workdir).row(
        "config.json tampered: types, keys, kind, version, truncation, NaN, huge numbers",
        "LMConfig.load must refuse naming the file, or load the very same config"))
    scenario("run config.json", lambda: _run_config_json(counts["config.json"], workdir).row(
        "config.json tampered, read by runs.read_run_config",
        "a KerasSeqError or the dict; never another exception"))
    scenario(".keras", lambda: _keras_scenarios(workdir))
    return rows
