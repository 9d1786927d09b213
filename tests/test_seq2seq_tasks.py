import datetime as dt

import pytest

from keras_seq.errors import DataError
from keras_seq.tasks.seq2seq import data as tasks
from keras_seq.tasks.seq2seq import metrics


def test_date_generator_is_deterministic_and_correct():
    a = tasks.date_pairs(300, seed=7)
    assert a == tasks.date_pairs(300, seed=7)
    assert a != tasks.date_pairs(300, seed=8)
    for _, iso in a:
        dt.date.fromisoformat(iso)
    lengths = [len(s) for s, _ in tasks.date_pairs(2000, seed=0)]
    assert min(lengths) <= 8 and max(lengths) >= 30  # lengths spread widely


def test_date_formats_follow_their_rules():
    day = dt.date(1998, 3, 4)
    f = tasks.DATE_FORMATS
    assert f["us_slash"](day) == "3/4/1998"
    assert f["eu_dot"](day) == "04.03.1998"
    assert f["Wd_month_dth"](day) == "Wednesday, March 4th, 1998"
    assert f["dth_of_month"](dt.date(2011, 5, 22)) == "the 22nd of may 2011"
    assert f["d_mon_yy"](dt.date(2003, 11, 13)) == "13-nov-03"


def test_date_splits_hold_disjoint_calendar_dates():
    train = {iso for _, iso in tasks.date_pairs(3000, seed=0, split="train")}
    test = {iso for _, iso in tasks.date_pairs(1000, seed=0, split="test")}
    val = {iso for _, iso in tasks.date_pairs(1000, seed=0, split="val")}
    assert not train & test and not train & val and not val & test


def test_reverse_and_copy():
    pairs = tasks.reverse_pairs(200, seed=3, min_len=2, max_len=9)
    assert pairs == tasks.reverse_pairs(200, seed=3, min_len=2, max_len=9)
    assert all(t == s[::-1] and 2 <= len(s) <= 9 for s, t in pairs)
    assert {len(s) for s, _ in pairs} == set(range(2, 10))
    assert all(s == t for s, t in tasks.reverse_pairs(20, seed=3, copy=True))
    with pytest.raises(DataError, match="min_len"):
        tasks.reverse_pairs(5, min_len=4, max_len=2)


def test_tsv_pairs_and_splits(tmp_path):
    path = tmp_path / "spa.txt"
    lines = [f"Go {i}.\tVe {i}.\tCC-BY 2.0 (France)" for i in range(40)]
    path.write_text("\n".join(lines[:20]) + "\n\n" + "\n".join(lines[20:]) + "\n")
    pairs = tasks.load_tsv_pairs(path)
    assert len(pairs) == 40 and pairs[0] == ("Go 0.", "Ve 0.")
    assert tasks.load_tsv_pairs(path, source_col=1, target_col=0)[0] == ("Ve 0.", "Go 0.")
    data = tasks.make_task(f"tsv:{path}", seed=1)
    assert data.splits == tasks.make_task(f"tsv:{path}", seed=1).splits
    assert sum(len(v) for v in data.splits.values()) == 40 and data.splits["test"]
    bad = tmp_path / "bad.tsv"
    bad.write_text("only one column\n")
    with pytest.raises(DataError, match="bad.tsv:1 has 1"):
        tasks.load_tsv_pairs(bad)
    with pytest.raises(DataError, match="no such parallel-text file"):
        tasks.load_tsv_pairs(tmp_path / "missing.tsv")


def test_make_task_and_registry_helper():
    data = tasks.make_task("reverse", seed=2, train_size=50, val_size=5, test_size=7,
                           max_len=6)
    assert {k: len(v) for k, v in data.splits.items()} == {"train": 50, "val": 5, "test": 7}
    assert data.describe()["sha256"] == tasks.make_task(
        "reverse", seed=2, train_size=50, val_size=5, test_size=7, max_len=6
    ).describe()["sha256"]
    with pytest.raises(DataError, match="unknown seq2seq task"):
        tasks.make_task("sorting")


def test_anki_needs_a_local_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_SEQ_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    with pytest.raises(DataError, match="spa-eng.zip.*does not download"):
        tasks.anki_spa_eng_path()
    (tmp_path / "spa.txt").write_text("Go.\tVe.\n")
    assert tasks.anki_spa_eng_path() == tmp_path / "spa.txt"


def test_metrics():
    assert metrics.exact_match([[1, 2], [3]], [[1, 2], [3, 4]]) == 0.5
    assert metrics.token_accuracy([[1, 2, 9]], [[1, 2]]) == pytest.approx(2 / 3)
    assert metrics.token_accuracy([[1]], [[1, 2, 3, 4]]) == pytest.approx(1 / 4)
    assert metrics.corpus_bleu(["the cat sat on the mat"], ["the cat sat on the mat"]) == \
        pytest.approx(100.0)
    assert metrics.corpus_bleu(["abcd"], ["abce"], char_level=True) < 100
    edges = metrics.bucket_edges(64, 8)
    assert edges[0] == (1, 8) and edges[-1] == (57, 64) and len(edges) == 8
    rows = metrics.by_length([1, 9, 10], [[1], [2], [3]], [[1], [2], [4]], [(1, 8), (9, 16)])
    assert [(r["n"], r["exact_match"]) for r in rows] == [(1, 1.0), (2, 0.5)]
    with pytest.raises(ValueError, match="one hypothesis per reference"):
        metrics.exact_match([[1]], [])
