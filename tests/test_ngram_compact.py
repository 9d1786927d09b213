"""The compact binary n-gram file, its scoring, the per-token stream and its benchmark row."""

import io
import json
import os
import warnings

import numpy as np
import pytest

from keras_seq.errors import DataError, KerasSeqError
from keras_seq.export.streaming import bench_ngram_stream
from keras_seq.ngram import read_arpa, train_kneser_ney, write_arpa
from keras_seq.ngram.backoff import BackoffModel
from keras_seq.ngram.compact import (
    CompactNgram,
    NgramStream,
    quantize,
    read_compact,
    write_compact,
)
from keras_seq.ngram.counts import BOS, word_ids
from keras_seq.ngram.kneser_ney import DiscountWarning
from keras_seq.ngram.scorer import evaluate, token_log10probs

META = {"tokenizer_fingerprint": "word:abc123", "corpus": "synthetic", "train_tokens": 7}


def _lines(seed=0, n_lines=600, vocab=80):
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, vocab + 1)
    p /= p.sum()
    return [[f"w{i}" for i in rng.choice(vocab, size=rng.integers(1, 10), p=p)]
            for _ in range(n_lines)]


def _model(order=4, n_lines=600, vocab=80):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountWarning)
        return train_kneser_ney(_lines(0, n_lines, vocab), order, metadata=META)


@pytest.fixture(scope="module")
def model():
    return _model()  # ~6k n-grams, >256 distinct log10 p in orders 2-4


@pytest.fixture(scope="module")
def held_out():
    return _lines(seed=1, n_lines=120, vocab=100)  # w80..w99 are out of vocabulary


def _write_read(model, tmp_path, bits, name="m.bin", **kw):
    path = tmp_path / name
    write_compact(model, path, quantize_bits=bits)
    return read_compact(path, **kw)


def _strict(model):
    return BackoffModel(model.vocab, model.tables, model.log10_prob, model.log10_backoff,
                        model.metadata, strict=True)


# ------------------------------------------------------------------------ file round trip
@pytest.mark.parametrize("order", [1, 2, 4])
@pytest.mark.parametrize("mmap", [True, False])
def test_unquantized_round_trip_keeps_every_ngram_exactly(tmp_path, order, mmap):
    model = _model(order)
    compact = _write_read(model, tmp_path, None, mmap=mmap)
    assert compact.order == order and compact.counts == model.counts
    assert compact.vocab.words == model.vocab.words
    assert compact.metadata == json.loads(json.dumps(model.metadata))
    assert compact.metadata["tokenizer_fingerprint"] == "word:abc123"
    back = compact.to_backoff_model()
    for n in range(1, order + 1):
        np.testing.assert_array_equal(back.tables[n - 1].keys, model.tables[n - 1].keys)
        np.testing.assert_array_equal(word_ids(back.tables, n), word_ids(model.tables, n))
        # bit-exact, -inf (the <s> unigram) included
        np.testing.assert_array_equal(compact.prob(n), model.log10_prob[n - 1])
        np.testing.assert_array_equal(compact.backoff(n), model.log10_backoff[n - 1])
        np.testing.assert_array_equal(back.log10_prob[n - 1], model.log10_prob[n - 1])
    # The rebuilt model writes the same ARPA text as the original.
    a, b = io.StringIO(), io.StringIO()
    write_arpa(model, a)
    write_arpa(back, b)
    assert a.getvalue() == b.getvalue()


def test_find_agrees_with_the_ngram_tables(model, tmp_path):
    compact = _write_read(model, tmp_path, 8)
    V = len(model.vocab)
    rng = np.random.default_rng(0)
    for n in range(2, model.order + 1):
        table = model.tables[n - 1]
        prefix = np.concatenate([table.prefix, rng.integers(-1, len(model.tables[n - 2]), 500)])
        word = np.concatenate([table.word, rng.integers(0, V, 500)])
        np.testing.assert_array_equal(compact.find(n, prefix, word), table.find(prefix, word, V))


def test_strict_flag_and_a_rewritten_compact_survive(model, tmp_path):
    compact = _write_read(_strict(model), tmp_path, None)
    assert compact.strict
    again = _write_read(compact, tmp_path, None, name="again.bin")  # CompactNgram → file
    assert again.strict and again.counts == model.counts
    np.testing.assert_array_equal(again.prob(3), model.log10_prob[2])


# ------------------------------------------------------------------------------- scoring
def test_unquantized_perplexity_equals_the_backoff_model(model, held_out, tmp_path):
    compact = _write_read(model, tmp_path, None)
    ours, theirs = evaluate(compact, held_out), evaluate(model, held_out)
    assert ours.tokens == theirs.tokens and ours.oov == theirs.oov > 0
    assert ours.ppl == pytest.approx(theirs.ppl, rel=1e-9)
    np.testing.assert_array_equal(token_log10probs(compact, held_out)[0],
                                  token_log10probs(model, held_out)[0])


def test_unquantized_compact_of_an_arpa_file_scores_like_it(model, held_out, tmp_path):
    write_arpa(model, tmp_path / "m.arpa")
    arpa = read_arpa(tmp_path / "m.arpa")
    compact = _write_read(arpa, tmp_path, None)
    assert evaluate(compact, held_out).ppl == pytest.approx(evaluate(arpa, held_out).ppl,
                                                            rel=1e-9)


def test_quantized_perplexity_stays_close(model, held_out, tmp_path):
    base = evaluate(model, held_out).ppl
    q8 = _write_read(model, tmp_path, 8, name="q8.bin")
    q4 = _write_read(model, tmp_path, 4, name="q4.bin")
    # the codes really are lossy here (more distinct values than codes) ...
    assert len(np.unique(model.log10_prob[2])) > 256
    assert not np.array_equal(q8.prob(3), model.log10_prob[2])
    assert q8.prob(3).dtype == np.float64 and q8.quantize_bits == 8
    # ... and cost little perplexity (measured: -0.01% at 8 bits, -0.6% at 4 bits)
    assert abs(evaluate(q8, held_out).ppl / base - 1) < 0.002
    assert abs(evaluate(q4, held_out).ppl / base - 1) < 0.02
    # unigrams are float32, not quantized
    np.testing.assert_allclose(q8.prob(1), model.log10_prob[0], rtol=1e-7)


def test_quantize_keeps_special_values_and_is_lossless_when_it_can():
    rng = np.random.default_rng(0)
    few = np.concatenate([rng.normal(-2, 1, 200).round(2), [0.0, -np.inf, 0.0]])
    codes, book = quantize(few, bits=8)
    assert codes.dtype == np.uint8
    np.testing.assert_array_equal(book[codes], few)  # ≤ 254 distinct values: exact
    many = rng.normal(-2, 1, 5000)
    with_specials = np.concatenate([many, [0.0, -np.inf]])
    rms = {}
    for bits in (8, 4):
        for iterations in (0, 20):  # equal-count bins only; then Lloyd steps
            codes, book = quantize(with_specials, bits, iterations=iterations)
            assert book.size <= 1 << bits and (np.diff(book[2:]) > 0).all()
            got = book[codes]
            assert got[-2] == 0.0 and got[-1] == -np.inf
            rms[bits, iterations] = np.sqrt(np.mean((got[:-2] - many) ** 2))
    # measured: 0.0237 → 0.0204 (8 bits), 0.135 → 0.0995 (4 bits)
    assert rms[8, 20] < rms[8, 0] < 0.03 and rms[4, 20] < rms[4, 0] < 0.15
    codes, book = quantize(many, bits=12)
    assert codes.dtype == np.uint16 and np.sqrt(np.mean((book[codes] - many) ** 2)) < 0.002
    with pytest.raises(DataError, match="NaN"):
        quantize([np.nan, -1.0], 8)


# --------------------------------------------------------------------------------- files
def test_compact_is_smaller_than_arpa(model, tmp_path):
    write_arpa(model, tmp_path / "m.arpa")
    arpa = os.path.getsize(tmp_path / "m.arpa")
    q8 = _write_read(model, tmp_path, 8, name="q8.bin").size_bytes
    f64 = _write_read(model, tmp_path, None, name="f64.bin").size_bytes
    assert sum(model.counts) > 5000
    assert q8 == os.path.getsize(tmp_path / "q8.bin")
    assert q8 < f64 < arpa
    assert q8 < arpa / 4


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    """A tiny model's file (about 1.5 kB) to break in every possible place."""
    path = tmp_path_factory.mktemp("small") / "small.bin"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountWarning)
        model = train_kneser_ney([["a", "b", "c"], ["b", "c", "a"], ["c", "a"]] * 2, order=3,
                                 metadata=META)
    write_compact(model, path, quantize_bits=8)
    read_compact(path)
    return path, path.read_bytes()


@pytest.mark.parametrize("mmap", [True, False])
def test_every_truncation_is_refused(small_file, tmp_path, mmap):
    _, data = small_file
    path = tmp_path / "cut.bin"
    for size in range(len(data)):
        path.write_bytes(data[:size])
        with pytest.raises(DataError, match="cut.bin"):
            read_compact(path, mmap=mmap)


def test_every_flipped_bit_is_refused(small_file, tmp_path):
    _, data = small_file
    path = tmp_path / "flip.bin"
    for i in range(len(data)):
        broken = bytearray(data)
        broken[i] ^= 1 << (i % 8)
        path.write_bytes(bytes(broken))
        with pytest.raises(DataError, match="flip.bin"):
            read_compact(path)
    path.write_bytes(data + b"\0")
    with pytest.raises(DataError, match="trailing bytes"):
        read_compact(path)


def test_other_files_are_clear_errors(model, tmp_path):
    write_arpa(model, tmp_path / "m.arpa")
    with pytest.raises(DataError, match=r"m\.arpa is not a keras-seq compact"):
        read_compact(tmp_path / "m.arpa")
    with pytest.raises(DataError, match="no such compact n-gram file"):
        read_compact(tmp_path / "missing.bin")
    (tmp_path / "empty.bin").write_bytes(b"")
    with pytest.raises(DataError, match="empty"):
        read_compact(tmp_path / "empty.bin")


def test_writer_is_atomic_and_checks_its_input(model, tmp_path, monkeypatch):
    path = tmp_path / "m.bin"
    write_compact(model, path, quantize_bits=8)
    before = path.read_bytes()

    def fail(*args):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(KerasSeqError, match=r"m\.bin: disk full"):
        write_compact(model, path, quantize_bits=None)
    monkeypatch.undo()
    assert path.read_bytes() == before  # the old file is untouched ...
    assert os.listdir(tmp_path) == ["m.bin"]  # ... and no temporary file is left
    for bits in (0, 17, 2.5, True):
        with pytest.raises(KerasSeqError, match="quantize_bits"):
            write_compact(model, path, quantize_bits=bits)
    with pytest.raises(KerasSeqError, match="takes a BackoffModel"):
        write_compact({"not": "a model"}, path)


# ------------------------------------------------------------------------------ streaming
KINDS = ["backoff", "compact-f64", "compact-q8", "compact-q4", "strict"]


def _scorer_for(kind, model, tmp_path):
    if kind == "backoff":
        return model
    if kind == "strict":
        return _write_read(_strict(model), tmp_path, 8)
    bits = {"compact-f64": None, "compact-q8": 8, "compact-q4": 4}[kind]
    return _write_read(model, tmp_path, bits)


@pytest.mark.parametrize("index", ["hash", "trie"])
@pytest.mark.parametrize("kind", KINDS)
def test_stream_steps_give_the_batch_scorers_log_probs(model, held_out, tmp_path, kind, index):
    scorer = _scorer_for(kind, model, tmp_path)
    lines = held_out[:40]
    expected, encoded = token_log10probs(scorer, lines)
    stream = NgramStream(scorer, index=index)
    got = np.array([stream.step(t) for t in encoded.ids])  # one pass, no resets by hand
    assert (got[encoded.pos == 0] == 0.0).all()  # <s>: a reset, not a prediction
    np.testing.assert_array_equal(got[encoded.pos >= 1], expected)
    if kind == "strict":
        assert np.isneginf(expected).any()


@pytest.mark.parametrize("order", [1, 2, 5])
def test_stream_matches_for_every_order(held_out, order):
    model = _model(order)
    expected, encoded = token_log10probs(model, held_out[:20])
    for index in ("hash", "trie"):
        stream = NgramStream(model, index=index)
        got = np.array([stream.step(t) for t in encoded.ids if t != BOS])
        np.testing.assert_array_equal(got, expected)


def test_score_does_not_move_the_history(model):
    stream = NgramStream(model)
    ids = [model.vocab.index[w] for w in ("w1", "w0", "w2", "w1")]
    for t in ids[:3]:
        stream.step(t)
    before = stream.history_length
    first = stream.score(ids[3])
    assert stream.score(ids[3]) == first and stream.history_length == before == 3
    assert stream.step(ids[3]) == first and stream.history_length == 4
    assert stream.score(BOS) == -np.inf
    with pytest.raises(DataError, match="outside the model's vocabulary"):
        stream.step(len(model.vocab))


@pytest.mark.parametrize("index", ["hash", "trie"])
@pytest.mark.parametrize("kind", KINDS)
def test_suggest_is_the_brute_force_argmax_of_score(model, held_out, tmp_path, kind, index):
    scorer = _scorer_for(kind, model, tmp_path)
    V = len(model.vocab)
    stream = NgramStream(scorer, index=index)
    history = [t for t in scorer.vocab.encode(held_out[:3]).ids if t != BOS][:25]
    for t in [None, *history]:
        if t is not None:
            stream.step(t)
        scores = np.array([stream.score(w) for w in range(V)])
        np.testing.assert_array_equal(stream.distribution(), scores)
        brute = sorted(range(V), key=lambda w: (-scores[w], w))
        for k in (1, 3, 20, V):
            got = stream.suggest(k)
            assert [w for w, _ in got] == brute[:k]
            assert [p for _, p in got] == [scores[w] for w in brute[:k]]


def test_distribution_matches_the_backoff_models(model):
    stream = NgramStream(model)
    context = ["w0", "w1", "w3"]
    for w in context:
        stream.step(model.vocab.index[w])
    np.testing.assert_allclose(stream.distribution(), model.distribution(["<s>", *context]),
                               rtol=0, atol=1e-12)
    assert sum(10 ** stream.distribution()) == pytest.approx(1.0, abs=1e-9)


def test_stream_takes_only_models(model):
    with pytest.raises(KerasSeqError, match="BackoffModel or a CompactNgram"):
        NgramStream("model.arpa")
    with pytest.raises(KerasSeqError, match="index must be one of"):
        NgramStream(model, index="btree")


# ------------------------------------------------------------------------------ benchmark
def test_bench_row_has_the_streaming_benchmarks_format(model, held_out, tmp_path):
    from keras_seq.export.streaming import _row

    compact = _write_read(model, tmp_path, 8)
    ids = compact.vocab.encode(held_out[:30]).ids
    row = bench_ngram_stream(compact, ids, warmup=20, ppl_delta_pct=0.1)
    assert set(_row("tflite step_float32", 1, np.ones(3), 1024, 0.0)) <= set(row)
    assert row["runtime"] == "ngram compact-q8 [hash]" and row["threads"] == 1
    assert 0 < row["p50_us"] <= row["p95_us"] <= row["p99_us"]
    assert row["size_kib"] == compact.size_bytes / 1024 and row["ppl_delta_pct"] == 0.1
    assert row["suggest_k"] == 3 and 0 < row["suggest_p50_us"] <= row["suggest_p99_us"]
    arpa_row = bench_ngram_stream(model, ids, warmup=20, index="trie", tokens=50)
    assert arpa_row["runtime"] == "ngram arpa [trie]"
    buf = io.StringIO()
    write_arpa(model, buf)
    assert arpa_row["size_kib"] == len(buf.getvalue().encode()) / 1024
    with pytest.raises(DataError, match="leave none to time"):
        bench_ngram_stream(model, ids[:10], warmup=20)


def test_compact_module_does_not_import_tensorflow():
    import subprocess
    import sys

    code = ("import sys, keras_seq.ngram.compact as c; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_compact_ngram_repr(model, tmp_path):
    compact = _write_read(model, tmp_path, 8)
    assert isinstance(compact, CompactNgram)
    assert "8-bit" in repr(compact) and "m.bin" in repr(compact)
