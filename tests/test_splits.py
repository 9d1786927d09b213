"""The one split module: its parser, its sizing rule, its two cuts, and every task using it."""

import subprocess
import sys

import pytest

from keras_seq.data import splits
from keras_seq.data.splits import (
    DEFAULT_SPLIT,
    SPLITS,
    parse_split,
    split_items,
    split_sizes,
    split_text,
)
from keras_seq.errors import DataError, KerasSeqError
from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.classify.data import load_tsv, make_classification_task
from keras_seq.tasks.conditioned.config import ConditionedConfig
from keras_seq.tasks.conditioned.data import make_conditioned_task
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.data import corpus_for
from keras_seq.tasks.seq2seq.config import Seq2SeqConfig
from keras_seq.tasks.seq2seq.data import load_tsv_pairs, make_task
from keras_seq.tasks.tag.config import TagConfig
from keras_seq.tasks.tag.data import make_tagging_task, read_conll, restore_punct


def test_parser_shares_and_parts():
    assert SPLITS == ("train", "val", "test") and DEFAULT_SPLIT == "90/5/5"
    assert parse_split("90/5/5") == pytest.approx((0.9, 0.05, 0.05))
    assert parse_split("90/10") == (0.9, 0.1, 0.0)
    assert parse_split((80, 10, 10)) == pytest.approx((0.8, 0.1, 0.1))
    with pytest.raises(DataError, match="sum to 110"):
        parse_split("50/60")
    with pytest.raises(DataError, match="invalid split '90/10': 2 shares, expected 3"):
        parse_split("90/10", parts=(3,))


def test_one_sizing_rule():
    cut = parse_split("80/10/10")
    assert [split_sizes(n, cut) for n in (0, 1, 4, 5, 37, 100)] == [
        (0, 0, 0), (1, 0, 0), (4, 0, 0), (3, 1, 1), (29, 4, 4), (80, 10, 10)]
    assert split_sizes(50, parse_split("90/5/5")) == (44, 3, 3)  # 2.5 rounds half up
    assert split_sizes(3, parse_split("2/96/2")) == (1, 2, 0)  # train keeps one item
    assert split_sizes(10, parse_split("90/10")) == (9, 1, 0)


def test_split_items_contiguous_seeded_and_stratified():
    items = list(range(20))
    assert split_items(items, "80/10/10") == {"train": items[:16], "val": [16, 17],
                                             "test": [18, 19]}
    a = split_items(items, "80/10/10", seed=1)
    assert a == split_items(items, "80/10/10", seed=1) != split_items(items, "80/10/10", seed=2)
    assert sorted(sum(a.values(), [])) == items and [len(a[s]) for s in SPLITS] == [16, 2, 2]
    assert items == list(range(20))  # the input is not shuffled in place
    rows = [(f"t{i}", "x" if i % 4 else "y") for i in range(40)]
    strat = split_items(rows, "50/25/25", seed=0, by=lambda row: row[1])
    assert [sum(r[1] == "y" for r in strat[s]) for s in SPLITS] == [4, 3, 3]  # 2.5 → 3
    assert [len(strat[s]) for s in SPLITS] == [18, 11, 11]  # y: 4/3/3, x: 14/8/8


def test_split_text_is_the_same_rule_by_characters():
    text = "x\n" * 100
    parts = split_text(text, "90/5/5")
    assert [len(parts[s]) for s in SPLITS] == list(split_sizes(len(text), parse_split("90/5/5")))
    ragged = "".join(f"line {i}{'!' * (i % 7)}\n" for i in range(300))
    parts = split_text(ragged, "80/10/10")
    assert "".join(parts[s] for s in SPLITS) == ragged
    assert all(p.endswith("\n") for p in parts.values())  # cuts moved to line breaks


def test_config_defaults_share_one_value():
    assert LMConfig().split_ratio == ClassifyConfig().split_ratio == \
        Seq2SeqConfig().split_ratio == DEFAULT_SPLIT
    # the two tasks whose measured README results were made at 80/10/10 keep it
    assert TagConfig().split_ratio == ConditionedConfig().split_ratio == "80/10/10"
    for cls in (LMConfig, ClassifyConfig, Seq2SeqConfig, TagConfig, ConditionedConfig):
        with pytest.raises(KerasSeqError, match="split_ratio: invalid split '50/40/40': the sh"):
            cls(split_ratio="50/40/40").validate()


# -- every task cuts through the shared functions ---------------------------------------


@pytest.fixture
def files(tmp_path):
    tsv = tmp_path / "rows.tsv"
    tsv.write_text("".join(f"review {i}\t{'pos' if i % 3 else 'neg'}\n" for i in range(60)))
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"go {i}\tve {i}\n" for i in range(60)))
    conll = tmp_path / "s.conll"
    conll.write_text("".join(f"w{i} O\nx{i} B-X\n\n" for i in range(60)))
    cond = tmp_path / "cond.tsv"
    cond.write_text("".join(f"{'a' if i % 2 else 'b'}\tline {i}\n" for i in range(60)))
    text = tmp_path / "c.txt"
    text.write_text("".join(f"Line number {i}, of the corpus.\n" for i in range(200)))
    return {"tsv": tsv, "pairs": pairs, "conll": conll, "cond": cond, "text": text}


def test_every_task_splits_by_the_shared_functions(files):
    ratio, seed = "70/20/10", 4
    corpus = corpus_for(LMConfig(data=str(files["text"]), split_ratio=ratio))
    assert corpus.splits == split_text(files["text"].read_text(), ratio)

    classify = make_classification_task(f"tsv:{files['tsv']}", seed=seed, split_ratio=ratio)
    assert classify.splits == split_items(load_tsv(files["tsv"]), ratio, seed=seed,
                                          by=lambda row: row[1])

    tag = make_tagging_task(f"conll:{files['conll']}", seed=seed, split_ratio=ratio)
    assert tag.splits == split_items(read_conll(files["conll"]), ratio, seed=seed)
    punct = make_tagging_task(f"restore-punct:{files['text']}", split_ratio=ratio)
    assert punct.splits == {s: restore_punct(t) for s, t in corpus.splits.items()}

    seq2seq = make_task(f"tsv:{files['pairs']}", seed=seed, split_ratio=ratio)
    assert seq2seq.splits == split_items(load_tsv_pairs(files["pairs"]), ratio, seed=seed)

    cond = make_conditioned_task(f"tsv:{files['cond']}", split_ratio=ratio)
    rows = [line.split("\t") for line in files["cond"].read_text().splitlines()]
    expected = {s: [] for s in SPLITS}
    for label in ("a", "b"):
        for s, part in split_items([t for c, t in rows if c == label], ratio).items():
            expected[s] += [(label, t) for t in part]
    assert cond.splits == expected


def test_every_task_follows_the_one_rule(files, monkeypatch):
    """Changing split_sizes changes every task: no task has a rule of its own."""
    monkeypatch.setattr(splits, "split_sizes", lambda n, fractions: (n, 0, 0))
    held_out = [
        corpus_for(LMConfig(data=str(files["text"]))).splits,
        make_classification_task(f"tsv:{files['tsv']}").splits,
        make_tagging_task(f"conll:{files['conll']}").splits,
        make_tagging_task(f"restore-punct:{files['text']}").splits,
        make_task(f"tsv:{files['pairs']}").splits,
    ]
    assert all(not parts["val"] and not parts["test"] for parts in held_out)
    with pytest.raises(DataError, match="have no val items"):  # conditioned checks its cut
        make_conditioned_task(f"tsv:{files['cond']}")


def test_splits_module_does_not_import_tensorflow():
    code = "import sys, keras_seq.data.splits; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
