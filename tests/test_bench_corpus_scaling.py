"""``keras-seq bench scaling`` (keras_seq/benchmarks/corpus_scaling.py) and its corpus
generator (keras_seq/benchmarks/scaling_text.py), at a few thousand tokens."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from keras_seq.benchmarks import corpus_scaling, scaling_text
from keras_seq.cli import main
from keras_seq.data.tokenizers import WordTokenizer
from keras_seq.errors import DataError
from keras_seq.ngram import external

PROSE = [
    "The tokenizer splits words and punctuation. Each paragraph becomes one line.",
    "A language model predicts the next word from the words before it.",
    "Kneser-Ney smoothing discounts counts and backs off to lower orders.",
    "Memory maps let a program read a file without loading all of it.",
    "Sorting runs of counts on disk keeps the peak memory bounded.",
]


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> list[str]:
    """A small tree of .py/.md/.txt files (one duplicate, one file of code only)."""
    root = tmp_path_factory.mktemp("roots")
    for i, text in enumerate(PROSE):
        words = text.split()
        body = "\n\n".join(" ".join(words[j:] + words[:j]) + f" item{i}x{j}."
                           for j in range(len(words)))
        (root / f"doc{i}.md").write_text(body + "\n")
        (root / f"mod{i}.py").write_text(f'"""{text}\n\n{body}"""\n\nx = {i}  # {text}\n')
    (root / "copy.txt").write_text((root / "doc0.md").read_text())  # same bytes: skipped
    (root / "code.py").write_text("x = [1, 2, 3]\nprint(x)\n")  # no prose: nothing kept
    return [str(root)]


def _sha(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_generator_is_deterministic_and_prefix_sized(roots, tmp_path):
    a = scaling_text.write_corpora({3000: tmp_path / "a3k.txt", 800: tmp_path / "a800.txt"},
                                   seed=7, roots=roots, progress=None)
    scaling_text.write_corpora({3000: tmp_path / "b3k.txt"}, seed=7, roots=roots,
                                   progress=None)
    scaling_text.write_corpora({3000: tmp_path / "c3k.txt"}, seed=8, roots=roots,
                                   progress=None)
    assert _sha(tmp_path / "a3k.txt") == _sha(tmp_path / "b3k.txt")  # same seed, same bytes
    assert _sha(tmp_path / "a3k.txt") != _sha(tmp_path / "c3k.txt")  # another seed
    big, small = (tmp_path / "a3k.txt").read_text(), (tmp_path / "a800.txt").read_text()
    assert big.startswith(small)  # the smaller corpus is a prefix of the larger
    # the counted tokens are what the word tokenizer finds (words + one <eos> a line),
    # each size the first paragraph end at or past its target
    sizes = {s["target"]: s["tokens"] for s in a["sizes"]}
    for n, text in ((3000, big), (800, small)):
        assert len(WordTokenizer().tokens(text)) == sizes[n]
        assert n <= sizes[n] < n + 40
    assert a["natural_tokens"] < 3000  # the tiny tree is exhausted: the extension ran
    assert [r["part"] for r in a["novelty"]] == ["extended"]
    assert 0 < a["novelty"][0]["unique_5grams"] <= sizes[3000]


def test_natural_part_reads_prose_dedupes_and_filters(roots):
    natural = scaling_text.NaturalText(roots, seed=0, limit=10**9)
    words = set(natural.vocab)
    assert {"tokenizer", "kneser", "memory"} <= words  # .md text and .py docstrings
    assert "print" not in words  # code outside docstrings/comments is not prose
    # copy.txt has doc0.md's bytes: the first in sorted order (copy.txt) is read, once
    names = [f.name for f in scaling_text.source_files(roots, seed=0)]
    assert len(names) == 2 * len(PROSE) + 1 and "copy.txt" in names and "doc0.md" not in names
    assert natural.ids[natural.starts[1:] - 1].tolist() == [0] * (natural.starts.size - 1)


def test_extension_keeps_frequent_words_and_resamples_rarer_ones(roots, monkeypatch):
    monkeypatch.setattr(scaling_text, "KEEP", 10)
    natural = scaling_text.NaturalText(roots, seed=0, limit=10**9)
    counts = np.bincount(natural.ids, minlength=len(natural.vocab))
    ext = natural.extension(seed=0, k=1)
    assert ext.size == natural.ids.size and (ext == 0).sum() == (natural.ids == 0).sum()
    top = set(np.argsort(-counts[1:], kind="stable")[:10] + 1)
    # frequent words keep their counts; some 5-grams are new, as in fresh text
    ext_counts = np.bincount(ext, minlength=len(natural.vocab))
    assert all(ext_counts[i] == counts[i] for i in top)
    new = set(scaling_text._hash5(ext).tolist()) - set(scaling_text._hash5(natural.ids).tolist())
    assert len(new) > 0.2 * ext.size


def test_bench_prepare_and_ngram_stages_report_time_and_rss(roots, tmp_path):
    out = corpus_scaling.run_bench([2000, 5000], out=tmp_path / "out",
                                   stages=["prepare", "ngram"], roots=roots, progress=None)
    rows = {(r["size"], r["stage"]): r for r in out["rows"]}
    assert set(rows) == {(s, st) for s in ("2k", "5k") for st in ("prepare", "ngram")}
    for row in rows.values():
        assert row["rc"] == 0, row.get("error")
        assert row["wall_s"] > 0 and 10 < row["peak_rss_mb"] < 4000
        assert row["command"][1:3] in (["data", "prepare"], ["ngram", "train"])
    saved = json.loads((tmp_path / "out" / "scaling.json").read_text())
    assert [s["size"] for s in saved["summary"]] == ["2k", "5k"]
    assert all((tmp_path / "out" / name).stat().st_size > 1000
               for name in ("scaling_time.png", "scaling_rss.png"))
    table = corpus_scaling.format_bench(saved)
    assert "keras-seq ngram train --data" in table and "| 2k | prepare |" in table
    assert "time ∝ tokens^k: prepare k = " in table


def test_rounds_alternate_and_the_summary_takes_the_median_and_spread(roots, tmp_path):
    out = corpus_scaling.run_bench([2000], out=tmp_path / "out", rounds=3, roots=roots,
                                   stages=["prepare", "ngram", "ngram-raw"], progress=None)
    order = [(r["stage"], r["round"]) for r in out["rows"]]
    assert order == [("prepare", 0), ("ngram", 0), ("ngram-raw", 0), ("ngram-raw", 1),
                     ("ngram", 1), ("ngram", 2), ("ngram-raw", 2)]
    line = out["summary"][0]
    for stage in ("ngram", "ngram-raw"):
        walls = sorted(r["wall_s"] for r in out["rows"] if r["stage"] == stage)
        assert line[stage]["wall_s"] == walls[1] and line[stage]["spread_s"] == [walls[0],
                                                                                  walls[2]]
        assert set(line[stage]["steps_s"]) == {"read", *external.STEPS}
    assert "median of 3 alternated run(s)" in corpus_scaling.format_bench(out)


def test_fit_exponent_reads_the_slope_of_the_log_log_line():
    assert corpus_scaling.fit_exponent([1e6], [1.0]) is None
    assert corpus_scaling.fit_exponent([1e6, 4e6, 1.6e7], [1.0, 8.0, 64.0]) == \
        pytest.approx(1.5)


def test_measure_reads_the_childs_own_peak_rss(tmp_path):
    grow = ["python3", "-c", "b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096])"]
    big = corpus_scaling.measure(grow, tmp_path / "big.log")
    small = corpus_scaling.measure(["python3", "-c", "pass"], tmp_path / "small.log")
    assert big["rc"] == small["rc"] == 0
    assert big["peak_rss_mb"] > 300 > small["peak_rss_mb"]  # not the max over children
    failed = corpus_scaling.measure(["python3", "-c", "raise SystemExit(3)"], tmp_path / "f.log")
    assert failed["rc"] == 3


def test_measure_adds_up_the_processes_of_a_command(tmp_path):
    """Two forked children of 150 MB each, side by side: ``ru_maxrss`` sees one of them,
    the peak memory all three processes (the tree's PSS, sampled every 0.1 s)."""
    tree = ["python3", "-c",
            "import os, time\n"
            "kids = []\n"
            "for _ in range(2):\n"
            "    pid = os.fork()\n"
            "    if pid == 0:\n"
            "        b = b'x' * (150 * 2**20); time.sleep(1.0); os._exit(0)\n"
            "    kids.append(pid)\n"
            "for pid in kids:\n"
            "    os.waitpid(pid, 0)\n"]
    got = corpus_scaling.measure(tree, tmp_path / "tree.log")
    assert got["rc"] == 0
    assert got["max_rss_mb"] < 200  # one child at a time
    assert got["tree_pss_mb"] > 290 and got["peak_rss_mb"] == got["tree_pss_mb"]


def test_sizes_and_bad_flags_say_what_to_do(tmp_path):
    assert corpus_scaling.parse_sizes("100M,1M,16M") == [10**6, 16 * 10**6, 10**8]
    assert corpus_scaling.label(20_000) == "20k" and corpus_scaling.label(10**8) == "100M"
    with pytest.raises(DataError, match="is not a token count"):
        corpus_scaling.parse_sizes("1M,lots")
    with pytest.raises(DataError, match="ngram reads what prepare writes"):
        corpus_scaling.run_bench([1000], out=tmp_path, stages=["ngram"], progress=None)
    with pytest.raises(DataError, match="not an executable file"):
        corpus_scaling.run_bench([1000], out=tmp_path, lmplz=str(tmp_path / "nope"),
                                 progress=None)


@pytest.mark.slow
def test_bench_every_stage_through_the_cli(roots, tmp_path, capsys):
    """All stages at 20k tokens, train lm included (two TensorFlow processes, ~1 min);
    lmplz too where one is installed (on PATH or $LMPLZ)."""
    lmplz = shutil.which("lmplz")
    args = ["bench", "scaling", "--sizes", "20k", "--out", str(tmp_path), "--roots", *roots,
            "--lm-steps", "3", "--max-vocab", "2000"] + (["--lmplz", lmplz] if lmplz else [])
    assert main(args) == 0
    printed = capsys.readouterr().out
    saved = json.loads((tmp_path / "scaling.json").read_text())
    stages = [r["stage"] for r in saved["rows"]]
    assert stages == ["prepare", "ngram", "ngram-raw"] + (["lmplz"] if lmplz else []) + \
        ["prepare-lm", "lm-1", "lm-4"]
    steps = [r["steps_s"] for r in saved["rows"] if r["stage"].startswith("ngram")]
    assert len(steps) == 2 and all(s and s["count"] > 0 for s in steps)
    assert "ngram train's steps" in printed
    assert all(r["rc"] == 0 and r["peak_rss_mb"] > 0 and r["wall_s"] > 0 for r in saved["rows"])
    line = saved["summary"][0]
    assert line["lm_startup_s"] > 0 and line["lm_rss_mb"] > 100
    assert all(r["fit_s"] > 0 for r in saved["rows"] if r["stage"].startswith("lm-"))
    assert "keras-seq train lm --data" in printed and "scaling_rss.png" in printed


def test_a_given_text_is_measured_as_one_size(tmp_path):
    text = tmp_path / "tokens.txt"
    text.write_text("the cat sat on the mat .\n\na dog sat .\n" * 300, encoding="utf-8")
    assert corpus_scaling.count_tokens(text) == 300 * (8 + 5)
    out = corpus_scaling.run_bench([1], out=tmp_path / "out", text=str(text),
                                   stages=["prepare", "ngram", "ngram-raw"], progress=None)
    assert out["sizes"] == [3900] and out["corpus"] == {"file": str(text)}
    assert all(r["rc"] == 0 and r["tokens"] == 3900 for r in out["rows"])
    with pytest.raises(DataError, match="is not a file; give a text of space-separated"):
        corpus_scaling.run_bench([1], out=tmp_path / "x", text=str(tmp_path / "nope.txt"))
