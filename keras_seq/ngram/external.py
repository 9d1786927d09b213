"""Kneser-Ney estimation in bounded memory: sorted runs on disk, k-way merges, ARPA out.

:func:`train_kn_bounded` writes exactly the ARPA file that
``write_arpa(kneser_ney(NgramCounts.from_stream(...)))`` writes, but holds only blocks of
the data in RAM. It follows the in-memory algorithm (:mod:`~keras_seq.ngram.counts`,
:mod:`~keras_seq.ngram.kneser_ney`) with every per-type array kept in a file under a
temporary directory (removed afterwards, also on an error or Ctrl-C):

1. **Tokens** — the id chunks become one stream ``<s> w … </s>`` on disk (uint32 ids and
   each id's position in its sentence, capped at 255).
2. **Counting**, order by order: the n-gram ending at token j is the packed int64 key
   ``type(n-1-gram ending at j-1) * V + w_j`` (the in-memory key). Each block of tokens is
   sorted (:func:`sort_keys`) and reduced to (key, count, suffix type, starts-with-``<s>``),
   spilled as a sorted run (blocks in parallel threads), and the runs are merged k ways
   (the C heap merge, in parallel key ranges; or the numpy reference, by rounds). The
   merge also writes, per run, the global type id of each of its rows, so the type of the
   n-gram ending at every token — needed to key order n+1 — is a per-block gather, not a
   search (:class:`_Endings`).
3. **Adjusted counts, discounts**: continuation counts are a bincount over the order n+1
   suffix types; counts-of-counts are summed block by block.
4. **Probabilities**, lowest order first, in blocks cut at context boundaries (so every
   per-context sum adds the same numbers in the same order as the in-memory code, and
   the floats agree bit for bit); ``p(w|h⁻)`` is a gather from the order n-1 file.
5. **ARPA**, order by order, streaming the word columns, probabilities and backoffs.

The random-access steps (continuation counts, the lower-order gather) hold one slice of
the order n-1 table at a time: a slice of ``memory_bytes / 8``, so with a table larger
than that they take several passes over the stream instead of more RAM. The memory bound
is approximate: blocks never go below a few thousand rows, and the largest context's
fan-out (e.g. all words seen after ``<s>``) is held at once.

Example:

>>> import io, numpy as np
>>> from keras_seq.ngram.arpa import write_arpa
>>> from keras_seq.ngram.kneser_ney import train_kneser_ney
>>> lines = [["a", "b", "a"], ["b", "a"]]
>>> vocab = Vocabulary.from_lines(lines)  # <unk> <s> </s> a b
>>> chunks = [np.array([3, 4, 3, 2, 4, 3], dtype=np.int32)]  # "a b a </s> b a"
>>> out, ref = io.StringIO(), io.StringIO()
>>> info = train_kn_bounded(chunks, vocab, order=2, memory_bytes=1 << 20, out=out)
>>> write_arpa(train_kneser_ney(lines, order=2), ref)
>>> info.counts, out.getvalue() == ref.getvalue()
([5, 5], True)
"""

from __future__ import annotations

import bisect
import contextlib
import ctypes
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_all_start_methods, get_context

import numpy as np

from keras_seq.errors import DataError
from keras_seq.ngram.arpa import check_arpa_words, write_arpa_header
from keras_seq.ngram.arpa_lines import (
    KERNEL,
    NGRAM_C,
    WordBytes,
    arpa_lines,
    available_kernel,
    write_utf8,
)
from keras_seq.ngram.counts import BOS, EOS, UNK, Vocabulary, check_order
from keras_seq.ngram.kneser_ney import discounts_from_counts_of_counts
from keras_seq.progress import NoBar

MIN_MEMORY = 64 * 1024
MIN_ROWS = 4096  # blocks never get smaller than this, whatever the budget
MIN_MERGE_ROWS = 256
TOKEN_BLOCK = 1 << 20  # tokens written at a time (~70 MB of temporaries)
MERGE_KERNEL = KERNEL  # the merge of sorted runs: "c" where compiled, else "numpy"
# The C ARPA writer releases the GIL while it formats, so threads format the blocks: no
# process start, no lines sent back through a pipe. Without it (numpy), processes do.
ARPA_THREADS = NGRAM_C is not None
PARALLEL_MERGE_MIN_ROWS = 1_000_000  # fewer rows merge in one thread (starting one costs)
# Below this many n-grams the ARPA text is formatted in this process: starting worker
# processes (~0.3 s each) would cost more than they save.
PARALLEL_MIN_ROWS = 500_000
MAX_DEFAULT_WORKERS = 8  # the main process writes their output in order: more rarely pays
WORKER_MEMORY = 128 << 20
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_memory(value) -> int:
    """Bytes in a size such as ``"1G"``, ``"512M"``, ``"64K"`` or ``"1048576"`` (×1024 units).

    >>> parse_memory("1G"), parse_memory("64k"), parse_memory("1.5M")
    (1073741824, 65536, 1572864)
    """
    m = _SIZE.match(str(value))
    if not m:
        raise DataError(f"--memory must be a size such as 512M or 2G (a number with an "
                        f"optional K/M/G/T suffix, powers of 1024), got {value!r}")
    size = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if size < MIN_MEMORY:
        raise DataError(f"--memory must be at least {MIN_MEMORY // 1024}K, got {value!r} "
                        f"({size:,} bytes); give e.g. --memory 1G")
    return size


def _no_progress(desc, total):
    return NoBar()


@dataclass
class BoundedKNResult:
    """What :func:`train_kn_bounded` wrote: n-gram counts per order, discounts, tokens."""

    counts: list[int]
    discounts: dict[int, list[float]]
    n_predicted: int
    n_sentences: int
    n_runs: list[int] = field(default_factory=list)  # sorted runs spilled per order
    seconds: dict[str, float] = field(default_factory=dict)  # wall time of each step (STEPS)


STEPS = ("tokens", "count", "merge", "discounts", "probabilities", "arpa")


class StepClock:
    """Wall seconds spent in each named step (a step may be entered several times).

    >>> clock = StepClock()
    >>> with clock.step("count"):
    ...     pass
    >>> list(clock.seconds)
    ['count']
    """

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def step(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start


# --------------------------------------------------------------------------- files


class _Dir:
    """Flat binary files in the temporary directory, written and read in blocks."""

    def __init__(self, root):
        self.root = root
        self._n = 0

    def path(self, name: str) -> str:
        self._n += 1
        return os.path.join(self.root, f"{self._n:05d}-{name}.bin")


def _read(path, dtype, start=0, stop=None, width=None) -> np.ndarray:
    """Rows ``start:stop`` of a flat binary file of ``dtype`` (2-D given ``width``)."""
    dtype = np.dtype(dtype)
    w = width or 1
    with open(path, "rb") as f:
        f.seek(start * w * dtype.itemsize)
        count = -1 if stop is None else (stop - start) * w
        arr = np.fromfile(f, dtype=dtype, count=count)
    return arr if width is None else arr.reshape(-1, width)


def _blocks(path, dtype, rows, start=0, stop=None):
    """Consecutive blocks of up to ``rows`` values from ``path`` (plain reads, no mmap)."""
    dtype = np.dtype(dtype)
    stop = os.path.getsize(path) // dtype.itemsize if stop is None else stop
    with open(path, "rb") as f:
        f.seek(start * dtype.itemsize)
        at = start
        while at < stop:
            n = min(rows, stop - at)
            yield np.fromfile(f, dtype=dtype, count=n)
            at += n


def _parts(n: int, rows: int):
    return [(lo, min(n, lo + rows)) for lo in range(0, n, rows)] or [(0, 0)]


# --------------------------------------------------------------------------- tokens


class _TokenWriter:
    """Turns EOS-delimited id chunks into ``<s> w … </s>`` on disk (ids + capped pos),
    ``block`` tokens at a time: each token takes ~70 bytes of int64 temporaries here, so a
    4 M-token chunk of a prepared corpus would peak ~300 MB above the rest of the step."""

    def __init__(self, ids_path, pos_path, vocab_size, block: int = TOKEN_BLOCK):
        self.ids = open(ids_path, "wb")
        self.pos = open(pos_path, "wb")
        self.V = vocab_size
        self.inside = False  # in a sentence (its <s> already written)
        self.last_pos = -1
        self.unigrams = np.zeros(vocab_size, dtype=np.int64)
        self.n_tokens = 0
        self.n_sentences = 0
        self.block = max(1, int(block))

    def add(self, chunk) -> None:
        x = np.asarray(chunk)
        if x.ndim != 1 or not np.issubdtype(x.dtype, np.integer):
            raise DataError(f"token id chunks must be 1-D integer arrays, got shape {x.shape} "
                            f"dtype {x.dtype}")
        for start in range(0, x.size, self.block):  # chunks may split sentences anywhere
            self._add_block(x[start:start + self.block])

    def _add_block(self, x) -> None:
        x = x.astype(np.int64)
        bad = (x < 0) | (x >= self.V) | (x == BOS)
        if bad.any():
            v = int(x[np.flatnonzero(bad)[0]])
            raise DataError(f"token id {v} is not a word id of the {self.V:,}-word vocabulary "
                            f"(expected 0..{self.V - 1} without {BOS} = <s>, which is implied "
                            f"at each sentence start; {EOS} = </s> ends a sentence)")
        eos = x == EOS
        prev_eos = np.empty_like(eos)
        prev_eos[0] = not self.inside
        prev_eos[1:] = eos[:-1]
        x = x[~(eos & prev_eos)]  # empty sentences are dropped, as Vocabulary.encode does
        if x.size == 0:
            return
        eos = x == EOS
        starts = np.flatnonzero(np.r_[not self.inside, eos[:-1]])
        s = np.insert(x, starts, BOS)
        idx = np.arange(s.size, dtype=np.int64)
        last_bos = np.maximum.accumulate(np.where(s == BOS, idx, -(1 << 62)))
        pos = np.where(last_bos >= 0, idx - last_bos, idx + self.last_pos + 1)
        self._write(s, pos)
        self.inside = bool(s[-1] != EOS)

    def _write(self, s, pos) -> None:
        s.astype(np.uint32).tofile(self.ids)
        np.minimum(pos, 255).astype(np.uint8).tofile(self.pos)
        self.unigrams += np.bincount(s, minlength=self.V)
        self.n_tokens += int(s.size)
        self.n_sentences += int((s == BOS).sum())
        self.last_pos = int(pos[-1])

    def close(self) -> None:
        if self.inside:  # a last sentence without </s>
            self._write(np.array([EOS]), np.array([self.last_pos + 1]))
            self.inside = False
        self.ids.close()
        self.pos.close()


def id_chunks_from_lines(lines, vocab: Vocabulary, lines_per_chunk: int = 20_000):
    """EOS-delimited int32 id chunks of token ``lines``, as :meth:`Vocabulary.encode` maps them.

    >>> v = Vocabulary(["a", "b"])
    >>> [c.tolist() for c in id_chunks_from_lines([["a", "x"], [], ["b"]], v)]
    [[3, 0, 2, 4, 2]]
    """
    get = vocab._input_index.get
    for i in range(0, len(lines), lines_per_chunk):
        part = [line for line in lines[i:i + lines_per_chunk] if len(line)]
        if not part:
            continue
        n = sum(map(len, part)) + len(part)
        flat = (get(t, UNK) for line in part for t in (*line, "</s>"))
        ids = np.fromiter(flat, dtype=np.int32, count=n)
        ends = np.cumsum([len(line) + 1 for line in part]) - 1
        ids[ends] = EOS
        yield ids


# --------------------------------------------------------------------------- counting


def sort_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(keys[o], o)`` with ``o`` the stable argsort of the int64 ``keys``.

    Where the keys' span and their positions fit 63 bits together, the two are packed
    into one int64 and sorted by value (``np.sort``), which is 3-4x faster than
    ``np.argsort`` here (SIMD sort of values; measured 0.17 s against 0.63 s for 4M keys
    on the 2-core AMD EPYC). Otherwise it falls back to ``np.argsort(kind="stable")``.

    >>> sk, o = sort_keys(np.array([5, 3, 5, 1]))
    >>> sk.tolist(), o.tolist()
    ([1, 3, 5, 5], [3, 1, 0, 2])
    """
    n = keys.size
    if n == 0:
        return keys.astype(np.int64), np.zeros(0, dtype=np.int64)
    lo, hi = int(keys.min()), int(keys.max())
    bits = max(1, (n - 1).bit_length())
    if (hi - lo).bit_length() + bits > 63:
        o = np.argsort(keys, kind="stable")
        return keys[o], o
    packed = np.subtract(keys, lo, dtype=np.int64)
    packed <<= bits
    packed |= np.arange(n, dtype=np.int64)
    packed.sort()
    o = packed & ((1 << bits) - 1)
    packed >>= bits
    packed += lo
    return packed, o


def _count_order(d: _Dir, n, V, ids_path, pos_path, prev, n_tokens, rows, need_ending,
                 bar, threads=1):
    """Runs of order-n (key, count, aux) per token block, sorted; aux = suffix << 1 | bos.
    ``prev``: the :class:`_Endings` of order n - 1 (``None`` for n = 2), in the same blocks.

    With ``threads`` > 1 the blocks are counted in that many threads: the block's sort and
    its file reads and writes release the GIL (measured: 2 threads, 1.9x on 2 cores)."""
    jobs = [(i, b0, min(n_tokens, b0 + rows), d.path(f"run{n}"),
             d.path(f"inv{n}") if need_ending else None)
            for i, b0 in enumerate(range(0, n_tokens, rows))]

    def count(job):
        return _count_block(n, V, ids_path, pos_path, prev, *job)

    runs = []
    for run in _in_threads(count, jobs, threads):
        runs.append(run)
        bar.update(run[4] - run[3])
    return runs


def _in_threads(fn, items: list, threads: int):
    """``map(fn, items)``, in order, computed by up to ``threads`` threads (in this one for
    a single thread or item). Work not started is cancelled if the caller stops early."""
    if threads < 2 or len(items) < 2:
        yield from map(fn, items)
        return
    pool = ThreadPoolExecutor(min(threads, len(items)))
    try:
        yield from pool.map(fn, items)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def one_malloc_arena() -> None:
    """Ask glibc for one malloc arena, as ``MALLOC_ARENA_MAX=1`` would. With an arena per
    counting thread, each kept the freed blocks of its last run: 565 MB peak against 391 MB
    at 16M tokens and the same time (measured with the environment variable). Elsewhere
    (not glibc) nothing happens. A caller that starts threads before training calls it
    first: the arenas made before it are kept and shared."""
    try:
        ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX (malloc.h)
    except (OSError, AttributeError):
        pass


def _count_block(n, V, ids_path, pos_path, prev, i, b0, b1, run_path, inv_path):
    """One sorted run: the order-n n-grams ending at tokens b0..b1 (block ``i``), to
    ``run_path`` as (key, count, aux) rows, and each token's row in it to ``inv_path``
    (if given)."""
    ids = _read(ids_path, np.uint32, b0, b1).astype(np.int64)
    pos = _read(pos_path, np.uint8, b0, b1)
    if prev is None:  # order 2: the 1-gram ending at a token is its word
        end = ids
        before = _read(ids_path, np.uint32, max(0, b0 - 1), b0).astype(np.int64)
    else:
        end = prev.block(i)
        before = np.array([prev.last(i - 1)] if i else [], dtype=np.int64)
    end_prev = np.concatenate([np.full(1 - len(before), -1), before, end[:-1]])
    j = np.flatnonzero(pos >= n - 1)
    keys = end_prev[j] * V + ids[j]
    aux = (end[j] << 1) | (pos[j] == n - 1)
    sk, o = sort_keys(keys)
    new = np.empty(sk.size, dtype=bool)
    new[:1] = True
    np.not_equal(sk[1:], sk[:-1], out=new[1:])
    first = np.flatnonzero(new)
    cnt = np.diff(np.append(first, sk.size))
    run = np.stack([sk[first], cnt, aux[o[first]]], axis=1)
    run.tofile(run_path)
    if inv_path:
        inv = np.empty(sk.size, dtype=np.int32)
        inv[o] = np.cumsum(new) - 1
        inv.tofile(inv_path)
    return run_path, len(run), inv_path, b0, b1


def _merge_runs(d: _Dir, n, runs, memory, need_ranks, kernel=None, threads=1):
    """k-way merge of sorted runs into the order's keys/counts/aux files and rank maps:
    (the three paths by name, rows, per run the parts of its rank map as (path, base)
    pairs: the map is the parts' values plus their bases, in order; [] without ranks).

    ``kernel``: ``"c"`` (``_ngram_c.merge``, a heap merge in one pass), ``"numpy"``
    (:func:`_merge_runs_numpy`, the reference) or ``None`` for :data:`MERGE_KERNEL`. Both
    write the same files. The C merge splits the keys into ``threads`` ranges at keys
    sampled from the runs and merges the ranges at once, each in a thread."""
    if available_kernel("merge", kernel, MERGE_KERNEL) == "numpy":
        out, size, rank_paths = _merge_runs_numpy(d, n, runs, memory, need_ranks)
        return out, size, [[(p, 0)] if p else [] for p in rank_paths]
    cuts = _key_ranges(runs, threads)
    block = max(MIN_MERGE_ROWS, memory // (len(runs) * 24 * 16 * len(cuts)))  # rows per read
    jobs = [({c: d.path(f"{c}{n}") for c in ("keys", "counts", "aux")}, spans,
             [d.path(f"rank{n}") for _ in runs] if need_ranks else None) for spans in cuts]

    def merge(job):
        out, spans, ranks = job
        return NGRAM_C.merge([p for p, *_ in runs], [a for a, _ in spans],
                             [b - a for a, b in spans], out["keys"], out["counts"],
                             out["aux"], ranks, block)

    sizes = list(_in_threads(merge, jobs, len(jobs)))
    out = jobs[0][0]
    for later, _, _ in jobs[1:]:  # the ranges' files, one after the other
        for c, path in out.items():
            with open(path, "ab") as f, open(later[c], "rb") as g:
                shutil.copyfileobj(g, f, 1 << 22)
            os.remove(later[c])
    bases = np.cumsum([0] + sizes[:-1]).tolist()
    ranks = [[(job[2][r], base) for job, base in zip(jobs, bases)] if need_ranks else []
             for r in range(len(runs))]
    return out, sum(sizes), ranks


def _key_ranges(runs, parts: int):
    """Per key range, per run: the (start, stop) rows of the run's keys in that range. The
    ``parts`` ranges are cut at quantiles of keys sampled from every run, so each holds
    about as many rows; equal keys always fall in the same range. Below
    :data:`PARALLEL_MERGE_MIN_ROWS` rows in all, one range."""
    if parts < 2 or sum(rows for _, rows, *_ in runs) < PARALLEL_MERGE_MIN_ROWS:
        return [[(0, rows) for _, rows, *_ in runs]]
    # Keys are read one by one (os.pread): a memory map would fault in the pages around
    # each key read, ~0.5 GB over 100 runs at 100M tokens, all counted as resident.
    fds = [os.open(path, os.O_RDONLY) for path, *_ in runs]
    try:
        sample = [_key_at(fd, int(i)) for fd, (_, rows, *_) in zip(fds, runs) if rows
                  for i in np.linspace(0, rows - 1, 64)]
        pivots = np.unique(np.quantile(sample, np.arange(1, parts) / parts, method="lower"))
        edges = [[0] + [_first_at_least(fd, rows, int(p)) for p in pivots] + [rows]
                 for fd, (_, rows, *_) in zip(fds, runs)]
    finally:
        for fd in fds:
            os.close(fd)
    return [[(e[i], e[i + 1]) for e in edges] for i in range(len(pivots) + 1)]


def _key_at(fd: int, row: int) -> int:
    """The key of a run's row ``row`` (rows of three int64, the key first)."""
    return int(np.frombuffer(os.pread(fd, 8, row * 24), dtype=np.int64)[0])


def _first_at_least(fd: int, rows: int, key: int) -> int:
    """The first of a run's ``rows`` rows whose key is ≥ ``key`` (a binary search)."""
    return bisect.bisect_left(range(rows), key, key=lambda row: _key_at(fd, row))


def _merge_runs_numpy(d: _Dir, n, runs, memory, need_ranks):
    """:func:`_merge_runs` in numpy, by rounds: each takes every run's rows up to the
    smallest last key among the runs' buffers, sorts them and reduces equal keys."""
    k = len(runs)
    block = max(MIN_MERGE_ROWS, memory // (k * 24 * 16))  # rows read per run and round
    out = {c: d.path(f"{c}{n}") for c in ("keys", "counts", "aux")}
    files = {c: open(p, "wb") for c, p in out.items()}
    ranks = [open(d.path(f"rank{n}"), "wb") if need_ranks else None for _ in runs]
    rank_paths = [r.name if r else None for r in ranks]
    handles = [open(p, "rb") for p, *_ in runs]
    left = [rows for _, rows, *_ in runs]
    bufs = [np.empty((0, 3), dtype=np.int64) for _ in runs]
    base = 0
    try:
        while True:
            for r in range(k):
                if len(bufs[r]) == 0 and left[r] > 0:
                    m = min(block, left[r])
                    bufs[r] = np.fromfile(handles[r], dtype=np.int64, count=3 * m).reshape(-1, 3)
                    left[r] -= m
            live = [r for r in range(k) if len(bufs[r])]
            if not live:
                break
            bounds = [bufs[r][-1, 0] for r in live if left[r] > 0]
            bound = min(bounds) if bounds else None
            takes = []
            for r in live:
                cut = len(bufs[r]) if bound is None else int(
                    np.searchsorted(bufs[r][:, 0], bound, side="right"))
                takes.append((r, bufs[r][:cut]))
                bufs[r] = bufs[r][cut:]
            rows = np.concatenate([t for _, t in takes])
            sk, o = sort_keys(rows[:, 0])
            new = np.empty(sk.size, dtype=bool)
            new[:1] = True
            np.not_equal(sk[1:], sk[:-1], out=new[1:])
            first = np.flatnonzero(new)
            sk[first].tofile(files["keys"])
            np.add.reduceat(rows[o, 1], first).tofile(files["counts"])
            rows[o[first], 2].tofile(files["aux"])
            if need_ranks:
                rank = np.empty(sk.size, dtype=np.int64)
                rank[o] = base + np.cumsum(new) - 1
                at = 0
                for r, t in takes:
                    rank[at:at + len(t)].tofile(ranks[r])
                    at += len(t)
            base += first.size
    finally:
        for f in (*files.values(), *handles, *(r for r in ranks if r)):
            f.close()
    return out, base, rank_paths


@dataclass(frozen=True)
class _Endings:
    """The order-n type ending at each token (-1: none), kept as each block's inv and rank
    files instead of an int64 per token: the type of a token at position ≥ n - 1 is
    ``rank[inv]``. Order n + 1's counting reads it block by block, in the same blocks."""

    n: int
    pos_path: str
    blocks: list  # per block: (b0, b1, inv path, rank map parts as (path, base) pairs)

    def block(self, i: int) -> np.ndarray:
        """The types ending at the tokens of block ``i``."""
        b0, b1, inv_path, rank_parts = self.blocks[i]
        pos = _read(self.pos_path, np.uint8, b0, b1)
        end = np.full(b1 - b0, -1, dtype=np.int64)
        rank = np.concatenate([_read(path, np.int64) + base for path, base in rank_parts])
        end[pos >= self.n - 1] = rank[_read(inv_path, np.int32)]
        return end

    def last(self, i: int) -> int:
        """The type ending at the last token of block ``i``."""
        b0, b1, inv_path, rank_parts = self.blocks[i]
        if _read(self.pos_path, np.uint8, b1 - 1, b1)[0] < self.n - 1:
            return -1
        k = os.path.getsize(inv_path) // 4  # the last token is the inv file's last row
        row = int(_read(inv_path, np.int32, k - 1, k)[0])
        for path, base in rank_parts:
            rows = os.path.getsize(path) // 8
            if row < rows:
                return int(_read(path, np.int64, row, row + 1)[0]) + base
            row -= rows
        raise AssertionError("a rank map is shorter than its run")  # pragma: no cover

    def remove(self) -> None:
        for _, _, inv_path, rank_parts in self.blocks:
            os.remove(inv_path)
            for path, _ in rank_parts:
                os.remove(path)


# --------------------------------------------------------------------------- lookups


def _bincount_parts(index_path, n_bins, part_rows, block_rows):
    """``np.bincount(suffix, minlength=n_bins)`` (suffix = aux >> 1), one slice at a time."""
    for lo, hi in _parts(n_bins, part_rows):
        acc = np.zeros(hi - lo, dtype=np.int64)
        for aux in _blocks(index_path, np.int64, block_rows):
            s = aux >> 1
            if lo or hi < n_bins:
                s = s[(s >= lo) & (s < hi)] - lo
            # bincount's slice-sized temporary (memory/8 at most) is cheaper than
            # np.unique's sort of the block (measured: 1.0 s of 15 at 16 M tokens)
            acc += np.bincount(s, minlength=hi - lo)
        yield lo, hi, acc


def _gather(d: _Dir, index_path, table_path, n_table, part_rows, block_rows):
    """``table[aux >> 1]`` for every aux in ``index_path``, one table slice per pass."""
    out = None
    for lo, hi in _parts(n_table, part_rows):
        table = _read(table_path, np.float64, lo, hi)
        new = d.path("gather")
        prev = _blocks(out, np.float64, block_rows) if out else None
        with open(new, "wb") as f:
            for aux in _blocks(index_path, np.int64, block_rows):
                s = aux >> 1
                got = next(prev) if prev else np.zeros(s.size)
                m = (s >= lo) & (s < hi)
                got[m] = table[s[m] - lo]
                got.tofile(f)
        if out:
            os.remove(out)
        out = new
    return out


# --------------------------------------------------------------------------- estimation


def _context_blocks(keys_path, V, n_rows, rows, *paths):
    """Blocks of (keys, *arrays) cut so that no context (key // V) spans two blocks."""
    carry = None
    for b0 in range(0, n_rows, rows):
        b1 = min(n_rows, b0 + rows)
        block = [_read(keys_path, np.int64, b0, b1)] + [_read(p, dt, b0, b1) for p, dt in paths]
        if carry is not None:
            block = [np.concatenate([c, b]) for c, b in zip(carry, block)]
        if b1 == n_rows:
            yield block
            return
        prefix = block[0] // V
        cut = int(np.searchsorted(prefix, prefix[-1], side="left"))
        if cut == 0:
            carry = block
            continue
        carry = [b[cut:] for b in block]
        yield [b[:cut] for b in block]


def train_kn_bounded(token_id_chunks, vocab, order: int, memory_bytes: int, out,
                     temp_dir=None, discount_fallback: bool = True, metadata: dict | None = None,
                     progress=None, workers: int | None = None) -> BoundedKNResult:
    """Interpolated modified Kneser-Ney of an id stream, written as ARPA in bounded memory.

    Args:
        token_id_chunks: iterable of 1-D integer arrays of word ids (``vocab``'s ids:
            ``<unk>`` 0, ``</s>`` 2 ends a sentence; ``<s>`` is implied, never given). A
            chunk may end mid-sentence; empty sentences are dropped.
        vocab: a :class:`~keras_seq.ngram.counts.Vocabulary` (or its word list); ids are
            positions in it, as from ``Vocabulary.from_lines`` on the training lines.
        order: n-gram order, 1..10.
        memory_bytes: the in-RAM budget (see :func:`parse_memory`; the bound is approximate).
        out: ARPA path or text file object.
        temp_dir: where the sorted runs go (default: the system's temporary directory);
            the files are removed afterwards, also after an error or Ctrl-C.
        discount_fallback: as :func:`~keras_seq.ngram.kneser_ney.kneser_ney`.
        metadata: extra keys for the ``# keras-seq`` line.
        progress: ``progress(desc, total)`` returning a bar with ``update(n)`` and
            ``close()`` (e.g. ``lambda d, t: tqdm(total=t, desc=d)``).
        workers: threads that count blocks, merge key ranges and format the ARPA text
            (processes format it where the C writer was not built, :data:`ARPA_THREADS`);
            default :func:`default_workers` (one per core, within the memory budget); 1
            does all of it in this thread. Counting blocks shrink by
            as much, so the budget holds. Tables of fewer than ``PARALLEL_MIN_ROWS``
            n-grams are always formatted here. The file is the same byte for byte either
            way. With more than one, glibc is asked for a single malloc arena for the rest
            of the process (:func:`one_malloc_arena`).

    Returns:
        :class:`BoundedKNResult`.
    """
    order = check_order(order)
    if not isinstance(vocab, Vocabulary):
        vocab = Vocabulary(list(vocab))
    check_arpa_words(vocab.words)
    memory = max(int(memory_bytes), MIN_MEMORY)
    workers = default_workers(memory) if workers is None else int(workers)
    if workers < 1:
        raise DataError(f"workers must be at least 1, got {workers}; give 1 to write the "
                        "ARPA file in this process")
    if temp_dir is not None and not os.path.isdir(temp_dir):
        raise DataError(f"--temp-dir {temp_dir!r} is not a directory; create it or leave the "
                        "flag out to use the system's temporary directory")
    root = tempfile.mkdtemp(prefix="keras-seq-kn-", dir=temp_dir)
    if workers > 1:
        one_malloc_arena()
    try:
        return _train(_Dir(root), token_id_chunks, vocab, order, memory, out,
                      discount_fallback, metadata or {}, progress or _no_progress, workers)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _train(d, chunks, vocab, N, memory, out, fallback, metadata, progress, workers):
    V = len(vocab)
    clock = StepClock()
    with clock.step("tokens"):
        tokens, ids_path, pos_path = _write_tokens(d, chunks, V)
    T = tokens.n_tokens
    # Sizes measured: a counting block holds ~150 bytes of temporaries per token, so blocks
    # of memory/512 tokens keep the peak near memory/3 (plus ~100 MB for Python and numpy).
    # With several threads counting, each block is smaller by as much: the same peak; and
    # a corpus smaller than that is cut in one block per thread, so every thread counts.
    rows = max(MIN_ROWS, min(memory // 512 // workers, -(-T // workers)))
    part_rows = max(MIN_ROWS, memory // 8 // 8)  # one 8-byte slice of a table: memory/8
    block_rows = max(MIN_ROWS, memory // 512)

    # 2. counting: keys/counts/aux files per order (order 1 is dense, in RAM)
    tables, sizes, n_runs = _count_orders(d, N, V, ids_path, pos_path, T, rows, memory,
                                          progress, clock, workers)

    # 3. adjusted counts and discounts
    with clock.step("discounts"):
        adjusted, counts_of_counts = _adjusted_counts(d, N, V, tokens.unigrams, tables,
                                                      sizes, part_rows, block_rows)
        discounts = {n: discounts_from_counts_of_counts(counts_of_counts[n], n, fallback)
                     for n in range(1, N + 1)}

    # 4. probabilities and backoffs, lowest order first
    with clock.step("probabilities"):
        probs, backoffs = _probabilities(d, N, V, tables, sizes, adjusted, discounts,
                                         part_rows, block_rows, progress)

    # 5. ARPA
    counts = sizes[1:]
    meta = {"smoothing": "kn", "order": N, "discounts": {n: discounts[n] for n in range(1, N + 1)}}
    meta.update(metadata)
    target = (open(out, "w", encoding="utf-8", newline="\n")
              if isinstance(out, (str, os.PathLike)) else contextlib.nullcontext(out))
    with clock.step("arpa"), target as f:
        _write(d, f, vocab, N, V, meta, counts, tables, probs, backoffs, block_rows, progress,
               workers)
    return BoundedKNResult(counts, meta["discounts"], T - tokens.n_sentences,
                           tokens.n_sentences, n_runs[1:], clock.seconds)


def _write_tokens(d: _Dir, chunks, V):
    """Step 1: the id chunks as ``<s> w … </s>`` token files; (writer, ids path, pos path)."""
    ids_path, pos_path = d.path("ids"), d.path("pos")
    tokens = _TokenWriter(ids_path, pos_path, V)
    try:
        for chunk in chunks:
            tokens.add(chunk)
    finally:
        tokens.close()
    if tokens.n_sentences == 0:
        raise DataError("no tokens to estimate from: every sentence is empty")
    return tokens, ids_path, pos_path


def _count_orders(d: _Dir, N, V, ids_path, pos_path, T, rows, memory, progress, clock,
                  threads=1):
    """Step 2: count orders 2..N into keys/counts/aux files; (tables, sizes, runs per order),
    each indexed by order (order 1 is dense, in RAM: no table, ``V`` types)."""
    tables = [None, None]  # indexed by order; order 1 needs no files
    sizes = [0, V]
    n_runs = [0, 0]
    prev = None
    bar = progress("counting n-grams", T * (N - 1))
    for n in range(2, N + 1):
        with clock.step("count"):
            runs = _count_order(d, n, V, ids_path, pos_path, prev, T, rows, n < N, bar,
                                threads)
        with clock.step("merge"):
            files, size, rank_paths = _merge_runs(d, n, runs, memory, n < N, threads=threads)
            for path, *_ in runs:
                os.remove(path)
            if prev:
                prev.remove()
            prev = _Endings(n, pos_path, [(b0, b1, inv, rank) for (_, _, inv, b0, b1), rank
                                          in zip(runs, rank_paths)]) if n < N else None
        tables.append(files)
        sizes.append(size)
        n_runs.append(len(runs))
    bar.close()
    return tables, sizes, n_runs


def _counts_of_counts(a, coc=(0, 0, 0, 0, 0)) -> list[int]:
    """``coc`` plus how many of the counts ``a`` are 0, 1, 2, 3 and 4."""
    return [c + int((a == k).sum()) for c, k in zip(coc, range(5))]


def _adjusted_counts(d: _Dir, N, V, unigrams, tables, sizes, part_rows, block_rows):
    """Step 3: the adjusted counts per order (order 1: an array; others: a file) and the
    counts-of-counts ``{n: [n0, …, n4]}``, highest order first."""
    adjusted = [None] * (N + 1)
    counts_of_counts = {}
    for n in range(N, 0, -1):
        if n == 1:
            a = unigrams.copy()
            if N > 1:
                a = next(_bincount_parts(tables[2]["aux"], V, V, block_rows))[2]
                a[BOS] = unigrams[BOS]
            a[BOS] = 0
            adjusted[1] = a
            coc = _counts_of_counts(a)
        elif n == N:
            adjusted[n] = tables[n]["counts"]
            coc = [0] * 5
            for a in _blocks(adjusted[n], np.int64, block_rows):
                coc = _counts_of_counts(a, coc)
        else:
            adjusted[n], coc = _continuation_counts(d, n, tables, sizes, part_rows, block_rows)
        counts_of_counts[n] = coc
    return adjusted, counts_of_counts


def _continuation_counts(d: _Dir, n, tables, sizes, part_rows, block_rows):
    """Adjusted counts of a middle order ``n`` (its raw count where the n-gram starts with
    ``<s>``, else its continuation count), to a file; (path, counts-of-counts)."""
    path = d.path(f"adj{n}")
    coc = [0] * 5
    with open(path, "wb") as f:
        for lo, hi, left in _bincount_parts(tables[n + 1]["aux"], sizes[n], part_rows,
                                            block_rows):
            raw = _read(tables[n]["counts"], np.int64, lo, hi)
            bos = (_read(tables[n]["aux"], np.int64, lo, hi) & 1).astype(bool)
            a = np.where(bos, raw, left)
            a.tofile(f)
            coc = _counts_of_counts(a, coc)
    return path, coc


def _probabilities(d: _Dir, N, V, tables, sizes, adjusted, discounts, part_rows, block_rows,
                   progress):
    """Step 4: the probability file of every order and the backoff files of orders < N
    (both lists indexed by order), lowest order first."""
    probs = [None, _unigram_probs(d, V, adjusted[1], discounts[1])]
    backoffs = [None] * (N + 1)  # per order n < N: files of (context id, log10 gamma)
    bar = progress("estimating", sum(sizes[2:]))
    for n in range(2, N + 1):
        lower = _gather(d, tables[n]["aux"], probs[n - 1], sizes[n - 1], part_rows, block_rows)
        probs.append(d.path(f"p{n}"))
        backoffs[n - 1] = (d.path(f"bo-ctx{n - 1}"), d.path(f"bo-val{n - 1}"))
        # a block of contexts holds ~100 bytes of temporaries per row: a quarter of the
        # other steps' blocks keeps this step below counting's peak (at 17.5 M tokens of
        # source code, --memory 1G: 432 → 266 MB in-process, same time and ARPA)
        _order_probs(tables[n]["keys"], V, sizes[n], max(MIN_ROWS, block_rows // 4),
                     adjusted[n], lower, discounts[n], probs[n], backoffs[n - 1], bar)
        os.remove(lower)
    bar.close()
    return probs, backoffs


def _unigram_probs(d: _Dir, V, a1, discounts1) -> str:
    """The order-1 probabilities (interpolated with the uniform distribution), to a file."""
    uniform = 1.0 / (V - 1)  # <unk> and </s> included, <s> excluded
    af = a1.astype(np.float64)
    dd = np.asarray(discounts1)[np.minimum(a1, 3)]
    group = np.zeros(V, dtype=np.int64)
    denom = np.bincount(group, weights=af)
    gamma = np.bincount(group, weights=dd) / np.where(denom > 0, denom, 1.0)
    p1 = (af - dd) / denom[group] + gamma[group] * uniform
    path = d.path("p1")
    p1.tofile(path)
    return path


def _order_probs(keys_path, V, n_rows, block_rows, adjusted_path, lower_path, discounts,
                 prob_path, backoff_paths, bar) -> None:
    """One order's interpolated probabilities (to ``prob_path``) and its contexts' log10
    backoffs (to ``backoff_paths``: context ids, values), block by block of contexts."""
    Dn = np.asarray(discounts)
    with open(prob_path, "wb") as fp, open(backoff_paths[0], "wb") as fc, \
            open(backoff_paths[1], "wb") as fv:
        for keys, a, low in _context_blocks(keys_path, V, n_rows, block_rows,
                                            (adjusted_path, np.int64), (lower_path, np.float64)):
            prefix = keys // V
            new = np.r_[True, prefix[1:] != prefix[:-1]]  # keys are sorted: no sort
            ctx, g = prefix[new], np.cumsum(new) - 1
            af = a.astype(np.float64)
            dd = Dn[np.minimum(a, 3)]
            denom = np.bincount(g, weights=af)
            gamma = np.bincount(g, weights=dd) / np.where(denom > 0, denom, 1.0)
            u = (af - dd) / denom[g]
            (u + gamma[g] * low).tofile(fp)
            ctx.tofile(fc)
            with np.errstate(divide="ignore"):
                np.log10(gamma).tofile(fv)
            bar.update(keys.size)


@dataclass(frozen=True)
class _OrderFiles:
    """The temporary files one order's ARPA lines are made from (paths; ``None``: n/a)."""

    n: int
    N: int
    V: int
    probs: str
    keys: str | None = None       # order ≥ 2: the sorted packed keys
    prev_cols: str | None = None  # order ≥ 2: the word columns of order n - 1
    cols: str | None = None       # order < N: this order's word columns go here
    bo_ctx: str | None = None     # order < N: rows with a backoff, ascending
    bo_val: str | None = None     # order < N: their log10 backoffs


def _backoff_rows(o: _OrderFiles, b0: int, b1: int) -> np.ndarray:
    """log10 backoffs of rows b0..b1 (0 where a row is no context)."""
    bo = np.zeros(b1 - b0)
    if os.path.getsize(o.bo_ctx) == 0:
        return bo
    ctx = np.memmap(o.bo_ctx, dtype=np.int64, mode="r")
    i0, i1 = (int(i) for i in np.searchsorted(ctx, [b0, b1], side="left"))
    bo[np.asarray(ctx[i0:i1]) - b0] = _read(o.bo_val, np.float64, i0, i1)
    del ctx
    return bo


def _arpa_block(words: WordBytes, o: _OrderFiles, b0: int, b1: int) -> bytes:
    """The ARPA lines of rows b0..b1 of order ``o.n``; their word columns also go to
    ``o.cols`` (at the rows' place, so blocks can be written in any order)."""
    p = _read(o.probs, np.float64, b0, b1)
    if o.n == 1:
        cols = np.arange(b0, b1, dtype=np.int64)[:, None]
        if b0 <= BOS < b1:
            p[BOS - b0] = 0.0
    else:
        keys = _read(o.keys, np.int64, b0, b1)
        prefix = keys // o.V
        lo, hi = int(prefix[0]), int(prefix[-1]) + 1
        before = _read(o.prev_cols, np.int64, lo, hi, width=o.n - 1)
        cols = np.concatenate([before[prefix - lo], (keys % o.V)[:, None]], axis=1)
    if o.cols:
        fd = os.open(o.cols, os.O_WRONLY)
        try:
            os.pwrite(fd, cols.tobytes(), b0 * o.n * 8)
        finally:
            os.close(fd)
    with np.errstate(divide="ignore"):
        lp = np.minimum(0.0, np.log10(p))
    bo = _backoff_rows(o, b0, b1) if o.n < o.N else None
    return arpa_lines(words, cols, lp, bo)


_WORKER_WORDS: WordBytes | None = None  # a worker process's vocabulary, set once


def _start_worker(words: WordBytes) -> None:
    global _WORKER_WORDS
    _WORKER_WORDS = words


def _worker_block(job) -> bytes:
    return _arpa_block(_WORKER_WORDS, *job)


def worker_context():
    """``fork`` where there is one: a forked worker starts at once and never re-imports the
    caller's ``__main__`` (``spawn`` would re-run a script that lacks a main guard). The
    workers only run numpy on their own arrays, so the parent's threads do not matter."""
    return get_context("fork" if "fork" in get_all_start_methods() else "spawn")


def default_workers(memory_bytes: int) -> int:
    """Processes that format ARPA text by default: one per core this process may use, at
    most :data:`MAX_DEFAULT_WORKERS`, and one per :data:`WORKER_MEMORY` of the budget (a
    worker holds a block of lines while it builds it, ~1 KB a row).

    >>> default_workers(64 * 1024)
    1
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_DEFAULT_WORKERS, int(memory_bytes) // WORKER_MEMORY))


def _write(d, f, vocab, N, V, meta, counts, tables, probs, backoffs, block_rows, progress,
           workers):
    """The ARPA text, order by order, in blocks of rows. With ``workers`` > 1 (and enough
    rows to pay for starting them) the blocks of an order are formatted by a pool of
    threads (:data:`ARPA_THREADS`) or processes and written here in order; each order
    waits for the one before, whose word columns it reads."""
    write_arpa_header(f, meta, False, counts)
    words = WordBytes(vocab.words)
    rows = min(block_rows, 100_000)  # a block of lines takes ~1 KB per row while it is built
    bar = progress("writing ARPA", sum(counts))
    pool = None
    if workers > 1 and sum(counts) >= PARALLEL_MIN_ROWS:
        rows = min(rows, 50_000)  # every worker holds a block: smaller ones, same total
        pool = (ThreadPoolExecutor(workers) if ARPA_THREADS else
                ProcessPoolExecutor(workers, mp_context=worker_context(),
                                    initializer=_start_worker, initargs=(words,)))
    try:
        prev_cols = None
        for n in range(1, N + 1):
            f.write(f"\n\\{n}-grams:\n")
            o = _OrderFiles(n, N, V, probs[n],
                            keys=tables[n]["keys"] if n > 1 else None, prev_cols=prev_cols,
                            cols=d.path(f"cols{n}") if n < N else None,
                            bo_ctx=backoffs[n][0] if n < N else None,
                            bo_val=backoffs[n][1] if n < N else None)
            if o.cols:
                open(o.cols, "wb").close()
            spans = [(b0, min(counts[n - 1], b0 + rows)) for b0 in range(0, counts[n - 1], rows)]
            if pool is None:
                blocks = (_arpa_block(words, o, b0, b1) for b0, b1 in spans)
            elif ARPA_THREADS:
                blocks = pool.map(lambda span, o=o: _arpa_block(words, o, *span), spans)
            else:
                blocks = pool.map(_worker_block, [(o, b0, b1) for b0, b1 in spans])
            for (b0, b1), data in zip(spans, blocks):
                write_utf8(f, data)
                bar.update(b1 - b0)
            if prev_cols:
                os.remove(prev_cols)
            prev_cols = o.cols
    except BrokenProcessPool:
        raise DataError("a process writing the ARPA file died (out of memory?); run again "
                        "with a smaller --memory or with --workers 1") from None
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    f.write("\n\\end\\\n")
    bar.close()
