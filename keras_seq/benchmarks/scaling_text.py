"""Text for scaling runs: English-heavy technical text of 1 M to ≥ 100 M word tokens.

``keras-seq bench scaling`` (:mod:`keras_seq.benchmarks.corpus_scaling`) needs corpora far
larger than tinyshakespeare whose unique n-grams grow as real text's do (the cost of n-gram
estimation is set by the number of distinct n-grams, not by the token count). This module
writes them, deterministically for a seed:

1. **Natural part.** Every ``.py``, ``.md``, ``.rst`` and ``.txt`` file under the roots
   (default: this interpreter's standard library and site-packages, :func:`default_roots`),
   walked in sorted order, de-duplicated by the sha256 of its bytes (the first path wins),
   then read in a seeded shuffled order. A ``.py`` file gives its docstrings and ``#``
   comments (a regular expression for triple-quoted strings and comments, not a parser);
   the others give their text. Text is cut into paragraphs at blank lines (one of over
   20,000 characters is left out: a table or word list); a paragraph becomes one line of
   word tokens (the ``word`` tokenizer's rule: lower-cased, punctuation
   split off), kept when it has at least 3 tokens and at least half of them contain a letter.
2. **Extension** (only when the natural part is shorter than asked): pass ``k = 1, 2, …``
   repeats the natural paragraphs in a new seeded order and, in each, replaces every word
   outside the ``KEEP`` most frequent ones, with probability ``REPLACE_P``, by a word drawn
   from the natural part's distribution of those rarer words. Function words and common
   phrases recur as in real text; n-grams holding a content word are mostly new, and the
   counts-of-counts keep a natural shape (verbatim copies would double every count and break
   Kneser-Ney's discounts). :func:`write_corpora` reports the unique 5-grams per million
   tokens at doubling sizes, natural and extended, so a reader can judge.

The text written is a fixed point of the ``word`` rule (tokens joined by one space, one line
per paragraph): keras-seq's word tokenizer and KenLM's whitespace split see the same tokens,
and the token count (words plus one ``<eos>`` per line) is what ``data prepare`` reports.

Example:

>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> _ = open(os.path.join(root, "a.md"), "w").write(
...     "The cat sat on the mat today.\\n\\nA dog ran in the park at noon.\\n" * 3)
>>> out = os.path.join(root, "c.txt")
>>> info = write_corpora({200: out}, seed=0, roots=[root], progress=None)
>>> info["sizes"][0]["tokens"], info["natural_tokens"], info["novelty"][0]["part"]
(201, 55, 'extended')
>>> open(out).readline().split()[:3]
['the', 'cat', 'sat']
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import sysconfig
import time
from pathlib import Path

import numpy as np

from keras_seq.data.tokenizers import EOS, UNK, WordTokenizer
from keras_seq.errors import DataError

SUFFIXES = (".py", ".md", ".rst", ".txt")
KEEP = 2000  # the most frequent words, never replaced in the extension
MAX_PARAGRAPH_CHARS = 20_000  # longer blocks without a blank line are data, not prose
REPLACE_P = 0.5  # chance that a rarer word is replaced in an extension pass
_PY_TEXT = re.compile(r'("""|\'\'\')(.*?)\1|#([^\n]*)', re.S)
_BLANK = re.compile(r"\n[ \t\r\f\v]*\n")
_LETTER = re.compile(r"[^\W\d_]")
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def default_roots() -> list[str]:
    """This interpreter's standard library and site-packages folders (those that exist)."""
    paths = sysconfig.get_paths()
    roots = [paths["stdlib"], paths["purelib"], paths["platlib"]]
    return [r for i, r in enumerate(roots) if os.path.isdir(r) and r not in roots[:i]]


def source_files(roots, seed: int) -> list[Path]:
    """The text files under ``roots``: sorted walk, first copy of each content kept, then
    shuffled with ``random.Random(seed)``."""
    seen, files = set(), []
    for root in roots:
        for folder, dirs, names in os.walk(root):
            dirs.sort()
            for name in sorted(names):
                if not name.endswith(SUFFIXES):
                    continue
                path = Path(folder) / name
                try:
                    digest = hashlib.sha256(path.read_bytes()).digest()
                except OSError:
                    continue
                if digest not in seen:
                    seen.add(digest)
                    files.append(path)
    random.Random(seed).shuffle(files)
    return files


def file_text(path: Path) -> str:
    """The prose of one file: docstrings and comments of a ``.py``, all of anything else."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix != ".py":
        return text
    return "\n\n".join(m.group(2) or m.group(3) or "" for m in _PY_TEXT.finditer(text))


def paragraph_lines(text: str) -> str:
    """``text`` as one line per paragraph (blank lines cut paragraphs); a "paragraph" of
    more than ``MAX_PARAGRAPH_CHARS`` is a table or a word list, not prose: left out."""
    return "\n".join(" ".join(p.split()) for p in _BLANK.split(text)
                     if len(p) <= MAX_PARAGRAPH_CHARS)


class NaturalText:
    """The natural part as ids: ``ids`` (uint32, each paragraph ended by the ``<eos>`` id
    0), ``starts`` (where each paragraph begins, then the total), ``vocab`` (id → token)."""

    def __init__(self, roots, seed: int, limit: int, progress=None):
        tokenizer, index = WordTokenizer(), {EOS: 0}
        self.vocab, lettered, pieces, starts, n = [EOS], [False], [], [0], 0
        files = source_files(roots, seed)
        for number, path in enumerate(files):
            if n >= limit:
                break
            line: list[int] = []
            for token in tokenizer.tokens(paragraph_lines(file_text(path)) + "\n"):
                if token == UNK:  # a literal <unk> in the text: dropped
                    continue
                if token != EOS:
                    i = index.get(token)
                    if i is None:
                        i = index[token] = len(self.vocab)
                        self.vocab.append(token)
                        lettered.append(bool(_LETTER.search(token)))
                    line.append(i)
                    continue
                if len(line) >= 3 and 2 * sum(lettered[i] for i in line) >= len(line):
                    pieces.append(np.array(line + [0], np.uint32))
                    n += len(line) + 1
                    starts.append(n)
                line = []
            if progress is not None:
                progress(number + 1, len(files), n)
        if n == 0:
            raise DataError(f"no text found under {list(map(str, roots))}: expected .py/.md/.rst/"
                            ".txt files with prose; pass --roots folders that hold some")
        self.ids = np.concatenate(pieces)
        self.starts = np.array(starts, np.int64)

    def __len__(self) -> int:
        return int(self.ids.size)

    def extension(self, seed: int, k: int) -> np.ndarray:
        """Extension pass ``k``: the paragraphs in a new order, rarer words replaced."""
        rng = np.random.default_rng([seed, k])
        counts = np.bincount(self.ids, minlength=len(self.vocab))
        counts[0] = 0
        rank = np.empty(len(counts), np.int64)
        rank[np.argsort(-counts, kind="stable")] = np.arange(len(counts))
        rare = np.flatnonzero((rank >= KEEP) & (counts > 0))
        order = rng.permutation(self.starts.size - 1)
        lengths = np.diff(self.starts)[order]
        shift = np.repeat(self.starts[:-1][order] - np.cumsum(lengths) + lengths, lengths)
        ids = self.ids[shift + np.arange(lengths.sum())]  # (n,) the reordered stream
        if rare.size:
            swap = (rank[ids] >= KEEP) & (ids != 0) & (rng.random(ids.size) < REPLACE_P)
            p = counts[rare] / counts[rare].sum()
            ids[swap] = rng.choice(rare, size=int(swap.sum()), p=p).astype(np.uint32)
        return ids


def _hash5(ids: np.ndarray) -> np.ndarray:
    """A 64-bit hash of every 5-gram of ``ids`` (splitmix64 mixing)."""
    h = np.zeros(ids.size - 4, np.uint64)
    with np.errstate(over="ignore"):
        for j in range(5):
            h ^= ids[j: ids.size - 4 + j].astype(np.uint64)
            h = (h + np.uint64(0x9E3779B97F4A7C15)) & _MASK
            h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            h ^= h >> np.uint64(31)
    return h


class _Novelty:
    """Unique 5-grams of the stream so far, counted at 1 M, 2 M, 4 M, … tokens and at the end."""

    def __init__(self, natural: int):
        self.natural, self.tail, self.n, self.next_at = natural, np.zeros(0, np.uint32), 0, 10**6
        self.hashes, self.unique, self.rows = [], np.zeros(0, np.uint64), []

    def add(self, ids: np.ndarray, final: bool = False) -> None:
        pos = 0
        while pos < ids.size:
            take = min(ids.size - pos, self.next_at - self.n)
            stream = np.concatenate([self.tail, ids[pos: pos + take]])
            if stream.size >= 5:
                self.hashes.append(_hash5(stream))
            self.tail, self.n, pos = stream[-4:], self.n + take, pos + take
            if self.n >= self.next_at:
                self._count()
                self.next_at *= 2
        if final and (not self.rows or self.rows[-1]["tokens"] != self.n):
            self._count()

    def _count(self) -> None:
        if self.hashes:
            self.unique = np.union1d(self.unique, np.concatenate(self.hashes))
        self.hashes = []
        last = self.rows[-1] if self.rows else {"tokens": 0, "unique_5grams": 0}
        self.rows.append({
            "tokens": self.n, "unique_5grams": int(self.unique.size),
            "unique_per_million": round(self.unique.size / self.n * 1e6),
            "new_per_token_since_previous": round((self.unique.size - last["unique_5grams"])
                                                  / max(self.n - last["tokens"], 1), 4),
            "part": "natural" if self.n <= self.natural else "extended",
        })


def _text(ids: np.ndarray, words: np.ndarray) -> bytes:
    """``ids`` (ending with ``<eos>``) as lines of space-separated tokens."""
    out = b" ".join(words[ids].tolist()).replace(b" \n ", b"\n")
    return out[:-2] + b"\n" if out.endswith(b" \n") else out


def write_corpora(targets: dict, seed: int = 0, roots=None, progress=print) -> dict:
    """Write ``{tokens: path}``: each file the first paragraphs of one stream, up to the
    first paragraph end at or past ``tokens`` (so the smaller corpora are prefixes of the
    larger). Returns the sizes written, the natural part's token count, the vocabulary and
    the 5-gram novelty curve."""
    if not targets or min(targets) < 1:
        raise DataError(f"sizes must be positive token counts (got {sorted(targets)})")
    roots, start = [str(r) for r in (roots or default_roots())], time.perf_counter()

    def said(done, total, n):
        if progress is not None and (done == total or done % 2000 == 0):
            progress(f"  corpus: {done:,}/{total:,} files read, {n:,} natural tokens")

    natural = NaturalText(roots, seed, max(targets), progress=said)
    words = np.array([b"\n"] + [w.encode() for w in natural.vocab[1:]], dtype=object)
    pending = sorted(targets.items())
    files = {n: open(path, "wb") for n, path in pending}
    written, sizes, novelty, k = 0, [], _Novelty(len(natural)), 0
    try:
        while pending:
            ids = natural.ids if k == 0 else natural.extension(seed, k)
            ends = np.flatnonzero(ids == 0) + 1  # (paragraphs,) where each paragraph ends
            used = ids.size
            for n, path in pending:
                if written + ids.size < n:
                    files[n].write(_text(ids, words))
                    continue
                end = int(ends[np.searchsorted(ends, n - written)])
                files[n].write(_text(ids[:end], words))
                files[n].close()
                sizes.append({"target": n, "path": str(path), "tokens": written + end})
                if n == pending[-1][0]:  # the largest target ends here: stop the stream
                    used = end
            novelty.add(ids[:used], final=len(sizes) == len(targets))
            written += used
            pending = [p for p in pending if written < p[0]]
            k += 1
            if progress is not None:
                progress(f"  corpus: {written:,} tokens written (pass {k})")
    finally:
        for f in files.values():
            f.close()
    return {"seed": seed, "roots": roots, "natural_tokens": len(natural),
            "vocabulary": len(natural.vocab) - 1, "keep": KEEP, "replace_p": REPLACE_P,
            "sizes": sizes, "novelty": novelty.rows,
            "seconds": round(time.perf_counter() - start, 2)}
