"""Bounded-memory Kneser-Ney (keras_seq/ngram/external.py) writes exactly the in-memory ARPA."""

import io
import json
import os
import warnings

import numpy as np
import pytest

import keras_seq.ngram.arpa_lines as arpa_lines
import keras_seq.ngram.external as external
from keras_seq.cli import main
from keras_seq.errors import DataError
from keras_seq.ngram.arpa import write_arpa
from keras_seq.ngram.counts import EOS, NgramCounts, Vocabulary
from keras_seq.ngram.data import load_tokenized
from keras_seq.ngram.external import id_chunks_from_lines, parse_memory, train_kn_bounded
from keras_seq.ngram.kneser_ney import kneser_ney

TINY = 64 * 1024  # blocks of 4,096 tokens: dozens of sorted runs, a many-way merge


@pytest.fixture(scope="module")
def shakespeare_part(tmp_path_factory, shakespeare_available):
    """The first 4,000 lines of tinyshakespeare (~26 k training tokens)."""
    with open(shakespeare_available, encoding="utf-8") as f:
        text = "".join(f.readlines()[:4000])
    path = tmp_path_factory.mktemp("corpus") / "part.txt"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _both(data_path, order, memory, **vocab_options):
    data = load_tokenized(data_path, **vocab_options)
    vocab = Vocabulary.from_lines(data.train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = io.StringIO()
        write_arpa(kneser_ney(NgramCounts.from_stream(vocab.encode(data.train), order,
                                                      len(vocab)), vocab), ref)
        got = io.StringIO()
        info = train_kn_bounded(id_chunks_from_lines(data.train, vocab, lines_per_chunk=700),
                                vocab, order, memory, got)
    return ref.getvalue(), got.getvalue(), info


OPTIONS = [{}, {"min_count": 2}, {"max_vocab": 1500}]


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("options", OPTIONS, ids=["all-words", "min-count-2", "max-vocab-1500"])
def test_tiny_budget_spills_and_merges_to_the_same_arpa(shakespeare_part, order, options):
    ref, got, info = _both(shakespeare_part, order, TINY, **options)
    assert got == ref
    if order > 1:
        assert min(info.n_runs[1:]) >= 5  # really spilled and merged many ways


@pytest.mark.slow
@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("options", OPTIONS, ids=["all-words", "min-count-2", "max-vocab-1500"])
def test_tiny_budget_on_all_of_tinyshakespeare(shakespeare_available, order, options):
    ref, got, info = _both(str(shakespeare_available), order, 256 * 1024, **options)
    assert got == ref
    if order > 1:
        assert min(info.n_runs[1:]) >= 50


def test_chunks_may_split_sentences_anywhere():
    rng = np.random.default_rng(0)
    lines = [[f"w{i}" for i in rng.integers(0, 40, size=rng.integers(1, 9))]
             for _ in range(3000)]
    vocab = Vocabulary.from_lines(lines)
    flat = np.concatenate(list(id_chunks_from_lines(lines, vocab)))
    cuts = np.sort(rng.choice(flat.size, size=400, replace=False))
    pieces = np.split(flat, cuts)  # pieces end mid-sentence, right after </s>, or are empty
    outs = []
    for chunks in ([flat], pieces):
        out = io.StringIO()
        train_kn_bounded(chunks, vocab, 4, TINY, out)
        outs.append(out.getvalue())
    ref = io.StringIO()
    write_arpa(kneser_ney(NgramCounts.from_stream(vocab.encode(lines), 4, len(vocab)), vocab), ref)
    assert outs[0] == outs[1] == ref.getvalue()


def test_the_token_writer_works_in_blocks_of_bounded_size(tmp_path):
    """A whole chunk of a prepared corpus (4 M ids) is written a block at a time: the same
    files as one pass over it, and numpy's temporaries stay near the block's size, not the
    chunk's (one pass over 2 M tokens: ~150 MB; blocks of 256 k: under 40 MB)."""
    import tracemalloc

    rng = np.random.default_rng(0)
    ids = rng.integers(3, 50, size=2_000_000).astype(np.int32)
    ids[rng.random(ids.size) < 0.1] = EOS
    files = {}
    for block in (2_000_000, 1 << 18):
        writer = external._TokenWriter(tmp_path / f"ids{block}", tmp_path / f"pos{block}", 50,
                                       block=block)
        tracemalloc.start()
        writer.add(ids)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        writer.close()
        files[block] = ((tmp_path / f"ids{block}").read_bytes(),
                        (tmp_path / f"pos{block}").read_bytes(), writer.unigrams.tolist())
        if block < ids.size:
            assert peak < 40e6, f"{peak / 1e6:.0f} MB of temporaries for blocks of {block:,}"
    assert files[2_000_000] == files[1 << 18]


def test_a_last_sentence_without_eos_and_empty_sentences():
    vocab = Vocabulary(["a", "b"])
    lines = [["a", "b"], ["b", "a", "a"]]
    ids = np.array([EOS, 3, 4, EOS, EOS, 4, 3, 3])  # leading and doubled </s>, none at the end
    out, ref = io.StringIO(), io.StringIO()
    train_kn_bounded([ids], vocab, 3, TINY, out)
    write_arpa(kneser_ney(NgramCounts.from_stream(vocab.encode(lines), 3, len(vocab)), vocab), ref)
    assert out.getvalue() == ref.getvalue()


def test_bad_ids_say_what_was_expected():
    vocab = Vocabulary(["a"])
    for bad in (np.array([3, 9]), np.array([1, 3]), np.array([[3]])):
        with pytest.raises(DataError, match="vocabulary|1-D"):
            train_kn_bounded([bad], vocab, 2, TINY, io.StringIO())


def _leftovers(tmp_path):
    return [p for p in tmp_path.iterdir() if p.name.startswith("keras-seq-kn-")]


def test_temp_files_are_removed_after_success_error_and_ctrl_c(tmp_path):
    vocab = Vocabulary(["a", "b"])
    good = np.array([3, 4, EOS, 4, 3, EOS] * 500)

    def interrupted():
        yield good
        assert _leftovers(tmp_path)  # the runs live under --temp-dir while it works
        raise KeyboardInterrupt

    train_kn_bounded([good], vocab, 3, TINY, io.StringIO(), temp_dir=str(tmp_path))
    assert not _leftovers(tmp_path)
    with pytest.raises(DataError):
        train_kn_bounded([good, np.array([7])], vocab, 3, TINY, io.StringIO(),
                         temp_dir=str(tmp_path))
    assert not _leftovers(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        train_kn_bounded(interrupted(), vocab, 3, TINY, io.StringIO(), temp_dir=str(tmp_path))
    assert not _leftovers(tmp_path)
    with pytest.raises(DataError, match="not a directory"):
        train_kn_bounded([good], vocab, 3, TINY, io.StringIO(), temp_dir=str(tmp_path / "no"))


def test_parse_memory():
    assert parse_memory("1G") == 1 << 30
    assert parse_memory("512m") == 512 << 20
    assert parse_memory("64KiB") == 64 << 10
    assert parse_memory(" 2097152 ") == 2 << 20
    for bad in ("lots", "1X", "-1G", "", "1K"):
        with pytest.raises(DataError, match="--memory"):
            parse_memory(bad)


def test_cli_memory_flag_gives_the_in_memory_arpa(shakespeare_part, tmp_path, capsys):
    paths = {}
    for memory in ("0", "64K"):
        paths[memory] = tmp_path / f"m{memory}.arpa"
        assert main(["ngram", "train", "--data", shakespeare_part, "--order", "3",
                     "--memory", memory, "--temp-dir", str(tmp_path), "--out",
                     str(paths[memory])]) == 0
    assert paths["0"].read_bytes() == paths["64K"].read_bytes()
    assert not _leftovers(tmp_path)
    spill = tmp_path / "not" / "yet"  # a --temp-dir that is not there yet is made
    assert main(["ngram", "train", "--data", shakespeare_part, "--order", "3", "--memory",
                 "64K", "--temp-dir", str(spill), "--out", str(tmp_path / "s.arpa")]) == 0
    assert (tmp_path / "s.arpa").read_bytes() == paths["0"].read_bytes()
    capsys.readouterr()
    assert main(["ngram", "train", "--data", shakespeare_part, "--memory", "lots",
                 "--out", str(tmp_path / "x.arpa")]) != 0
    assert "--memory must be a size such as 512M" in capsys.readouterr().err


def test_raw_text_asks_for_one_malloc_arena_before_any_thread(shakespeare_part, tmp_path,
                                                             monkeypatch):
    """``ngram train --memory`` on a raw text sets glibc's one arena before the child that
    tokenizes it starts its threads: an arena made earlier is kept by the counting threads
    with their freed blocks (17.5 M tokens of source code: 369 against 283 MB peak)."""
    import keras_seq.commands.ngram as ngram_cmd

    calls = []
    monkeypatch.setattr(external, "one_malloc_arena", lambda: calls.append("arena"))
    monkeypatch.setattr(ngram_cmd, "_prepare_apart",
                        lambda *a, **k: (calls.append("prepare"), ngram_cmd._prepare(
                            a[0], a[1], k))[0])
    assert main(["ngram", "train", "--data", shakespeare_part, "--order", "2", "--memory",
                 "1M", "--workers", "1", "--out", str(tmp_path / "a.arpa")]) == 0
    assert calls[:2] == ["arena", "prepare"]


def test_raw_text_is_streamed_and_gives_the_prepared_folders_arpa(shakespeare_part, tmp_path,
                                                                  monkeypatch, capsys):
    """``ngram train --data file.txt`` tokenizes through ``data prepare``'s streaming pass
    (never ``load_corpus``, which reads the whole text) and writes the ARPA file that the
    prepared folder gives; its temporary folder is removed; --profile names every step."""
    prepared = tmp_path / "prepared"
    assert main(["data", "prepare", "--data", shakespeare_part, "--tokenizer", "word",
                 "--out", str(prepared), "--quiet"]) == 0
    assert main(["ngram", "train", "--data", str(prepared), "--order", "4",
                 "--out", str(tmp_path / "prepared.arpa")]) == 0

    def whole_text(*args, **kwargs):
        raise AssertionError("the raw path read the whole text with load_corpus")

    monkeypatch.setattr("keras_seq.ngram.data.load_corpus", whole_text)
    temp = tmp_path / "temp"
    temp.mkdir()
    assert main(["ngram", "train", "--data", shakespeare_part, "--order", "4", "--temp-dir",
                 str(temp), "--out", str(tmp_path / "raw.arpa"),
                 "--profile", str(tmp_path / "profile.json")]) == 0
    assert (tmp_path / "raw.arpa").read_bytes() == (tmp_path / "prepared.arpa").read_bytes()
    assert not list(temp.iterdir())
    steps = json.loads((tmp_path / "profile.json").read_text())["steps_s"]
    assert list(steps) == ["read", *external.STEPS]
    assert "steps: read" in capsys.readouterr().out


@pytest.mark.skipif(arpa_lines._ngram_c is None,
                    reason="the C kernel was not built (no compiler at install)")
def test_the_numpy_and_c_arpa_writers_give_the_same_file(shakespeare_part, monkeypatch):
    data = load_tokenized(shakespeare_part)
    vocab = Vocabulary.from_lines(data.train)
    texts = {}
    for kernel in ("numpy", "c"):
        monkeypatch.setattr(arpa_lines, "KERNEL", kernel)
        out = io.StringIO()
        train_kn_bounded(id_chunks_from_lines(data.train, vocab), vocab, 4, TINY, out,
                         workers=1)
        texts[kernel] = out.getvalue()
    assert texts["c"] == texts["numpy"]
    assert texts["c"].count("\n") > 20_000


@pytest.mark.parametrize("order", [2, 5])
@pytest.mark.parametrize("threads", [True, False], ids=["threads", "processes"])
def test_worker_processes_write_the_same_bytes(shakespeare_part, monkeypatch, order, threads):
    """Blocks formatted by 3 threads or processes (many blocks each) give the in-process
    file."""
    data = load_tokenized(shakespeare_part)
    vocab = Vocabulary.from_lines(data.train)
    monkeypatch.setattr(external, "PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(external, "ARPA_THREADS", threads)
    texts = {}
    for workers in (1, 3):
        out = io.StringIO()
        train_kn_bounded(id_chunks_from_lines(data.train, vocab, lines_per_chunk=700), vocab,
                         order, TINY, out, workers=workers)  # TINY: blocks of 4,096 rows
        texts[workers] = out.getvalue()
    assert texts[3] == texts[1]
    assert texts[1].count("\n") > 3 * 4096  # more blocks than workers


def _killed(job):
    os._exit(9)  # a worker process dying as if the kernel killed it


def test_a_dead_worker_is_an_error_and_leaves_no_files(tmp_path, monkeypatch):
    vocab = Vocabulary(["a", "b"])
    monkeypatch.setattr(external, "PARALLEL_MIN_ROWS", 0)
    monkeypatch.setattr(external, "ARPA_THREADS", False)  # processes, as without the C writer
    monkeypatch.setattr(external, "_worker_block", _killed)
    with pytest.raises(DataError, match="died.*--workers 1"):
        train_kn_bounded([np.array([3, 4, EOS] * 100)], vocab, 2, TINY, io.StringIO(),
                         temp_dir=str(tmp_path), workers=2)
    assert not _leftovers(tmp_path)
    with pytest.raises(DataError, match="workers must be at least 1"):
        train_kn_bounded([np.array([3, EOS])], vocab, 2, TINY, io.StringIO(), workers=0)


def test_default_workers_fit_the_cores_and_the_memory_budget(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    assert external.default_workers(parse_memory("1G")) == 8  # at most 8
    assert external.default_workers(parse_memory("256M")) == 2  # one per 128 MB
    assert external.default_workers(parse_memory("64K")) == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert external.default_workers(parse_memory("4G")) == 1  # one core


def test_profile_without_a_memory_budget_says_what_to_do(shakespeare_part, tmp_path, capsys):
    assert main(["ngram", "train", "--data", shakespeare_part, "--memory", "0", "--out",
                 str(tmp_path / "x.arpa"), "--profile", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert "--profile times the steps of Kneser-Ney in bounded memory" in err
    assert not (tmp_path / "x.arpa").exists()


def test_sort_keys_is_a_stable_argsort_packed_or_not():
    rng = np.random.default_rng(0)
    for keys in (rng.integers(0, 50, 10_000),               # packed: many ties
                 rng.integers(0, 1 << 62, 1_000) | 1,       # too wide to pack: argsort
                 np.array([7]), np.zeros(0, dtype=np.int64)):
        sk, o = external.sort_keys(keys)
        want = np.argsort(keys, kind="stable")
        assert o.tolist() == want.tolist()
        assert sk.tolist() == keys[want].tolist()


def _random_runs(tmp_path, rng, k=7):
    """k sorted runs of (key, count, aux) with keys shared across runs; one run empty."""
    runs = []
    for r in range(k):
        keys = np.unique(rng.integers(0, 3_000, 0 if r == 3 else rng.integers(1, 900)))
        rows = np.stack([keys, rng.integers(1, 5, keys.size), keys * 2 + 1], axis=1)
        path = str(tmp_path / f"run{r}.bin")
        rows.astype(np.int64).tofile(path)
        runs.append((path, len(rows), None, 0, 0))
    return runs


def _merged(d, runs, kernel, threads):
    out, size, ranks = external._merge_runs(d, 3, runs, 1 << 20, True, kernel=kernel,
                                            threads=threads)
    tables = {c: np.fromfile(p, dtype=np.int64).tolist() for c, p in out.items()}
    maps = [np.concatenate([np.fromfile(p, dtype=np.int64) + base for p, base in parts] or
                           [np.zeros(0, np.int64)]).tolist() for parts in ranks]
    return size, tables, maps


@pytest.mark.skipif(arpa_lines.NGRAM_C is None,
                    reason="the C kernel was not built (no compiler at install)")
def test_the_c_merge_in_key_ranges_writes_what_the_numpy_merge_writes(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    runs = _random_runs(tmp_path, rng)
    d = external._Dir(str(tmp_path))
    want = _merged(d, runs, "numpy", 1)
    monkeypatch.setattr(external, "PARALLEL_MERGE_MIN_ROWS", 0)
    for threads in (1, 2, 3):
        assert _merged(d, runs, "c", threads) == want
    size, tables, maps = want
    all_keys = np.concatenate([np.fromfile(p, dtype=np.int64).reshape(-1, 3)[:, 0]
                               for p, *_ in runs])
    assert tables["keys"] == np.unique(all_keys).tolist() and size == len(tables["keys"])
    assert len(external._key_ranges(runs, 3)) == 3  # really cut in three


@pytest.mark.skipif(arpa_lines.NGRAM_C is None,
                    reason="the C kernel was not built (no compiler at install)")
def test_a_short_run_is_an_error_from_the_c_merge(tmp_path):
    rng = np.random.default_rng(2)
    runs = _random_runs(tmp_path, rng, k=2)
    path, rows, *rest = runs[0]
    runs[0] = (path, rows + 5, *rest)  # says more rows than the file holds
    with pytest.raises(OSError, match="shorter than its row count"):
        external._merge_runs(external._Dir(str(tmp_path)), 2, runs, 1 << 20, False,
                             kernel="c")


@pytest.mark.parametrize("kernel", ["numpy", "c"])
def test_counting_threads_and_merge_kernels_give_the_same_arpa(shakespeare_part, monkeypatch,
                                                               kernel):
    """Counting blocks in 3 threads and merging in 3 key ranges (many ranges' rank maps
    read back by the next order) give the in-memory ARPA file."""
    if kernel == "c" and arpa_lines.NGRAM_C is None:
        pytest.skip("the C kernel was not built (no compiler at install)")
    monkeypatch.setattr(external, "MERGE_KERNEL", kernel)
    monkeypatch.setattr(external, "PARALLEL_MERGE_MIN_ROWS", 0)
    monkeypatch.setattr(external, "PARALLEL_MIN_ROWS", 1 << 40)  # ARPA text in-process
    data = load_tokenized(shakespeare_part)
    vocab = Vocabulary.from_lines(data.train)
    ref = io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_arpa(kneser_ney(NgramCounts.from_stream(vocab.encode(data.train), 4,
                                                      len(vocab)), vocab), ref)
    got = io.StringIO()
    info = train_kn_bounded(id_chunks_from_lines(data.train, vocab), vocab, 4, TINY, got,
                            workers=3)
    assert got.getvalue() == ref.getvalue()
    assert min(info.n_runs[1:]) >= 5
