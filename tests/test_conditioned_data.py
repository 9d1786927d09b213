import subprocess
import sys

import numpy as np
import pytest

from keras_seq.data.splits import SPLITS, parse_split, split_sizes
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.errors import DataError
from keras_seq.tasks.conditioned.config import ConditionedConfig
from keras_seq.tasks.conditioned.data import (
    TOPIC_GROUPS,
    TOPIC_SPLIT,
    conditioned_batches,
    encode_conditioned,
    items_needed,
    make_conditioned_task,
    topic_group,
)


@pytest.fixture(scope="module")
def docs():
    return make_conditioned_task("python-docs-topics")


def test_python_docs_topics_is_deterministic(docs):
    again = make_conditioned_task("python-docs-topics", seed=5)
    assert again.splits == docs.splits and again.sha256 == docs.sha256
    assert docs.conditions == list(TOPIC_GROUPS)
    assert docs.condition_ids["simple-statements"] == 0
    info = docs.describe()
    assert info["sha256"] == docs.sha256 and set(info["items"]) == set(SPLITS)


def test_every_condition_in_every_split_and_no_repeats(docs):
    for split in SPLITS:
        counts = docs.counts(split)
        assert set(counts) == set(docs.conditions)
        assert min(counts.values()) >= 5
    n = {s: len(docs.splits[s]) for s in SPLITS}
    assert 0.75 < n["train"] / sum(n.values()) < 0.85
    texts = [t for s in SPLITS for _, t in docs.splits[s]]
    assert len(texts) == len(set(texts))  # no paragraph in two places (train/val leakage)
    assert all(t.strip() == t and t for t in texts)


def test_grouping_by_topic_name():
    data = make_conditioned_task("python-docs-topics", grouping="topics")
    assert "specialnames" in data.conditions and "data-model" in data.conditions
    assert len(data.conditions) > len(TOPIC_GROUPS)
    for split in SPLITS:
        assert set(data.counts(split)) == set(data.conditions)
    assert topic_group("if") == "compound-statements"
    assert topic_group("typesnew") == "builtin-types" and topic_group("zzz") == "other"
    with pytest.raises(DataError, match="grouping"):
        make_conditioned_task("python-docs-topics", grouping="letters")


def test_topic_cut_is_the_shared_rule_at_80_10_10():
    cut = parse_split(TOPIC_SPLIT)
    assert ConditionedConfig().split_ratio == TOPIC_SPLIT == "80/10/10"
    assert split_sizes(0, cut) == (0, 0, 0)
    assert split_sizes(4, cut) == (4, 0, 0)
    assert split_sizes(5, cut) == (3, 1, 1)
    assert split_sizes(37, cut) == (29, 4, 4)
    assert items_needed(TOPIC_SPLIT) == 5 and items_needed("60/20/20") == 3


def test_split_ratio_changes_the_cut_of_every_topic(docs):
    wider = make_conditioned_task("python-docs-topics", split_ratio="60/20/20")
    assert len(wider.splits["test"]) > 1.5 * len(docs.splits["test"])
    assert wider.describe()["spec"]["split_ratio"] == "60/20/20"
    with pytest.raises(DataError, match="expected 3"):
        make_conditioned_task("python-docs-topics", split_ratio="90/10")


def _batch_items():
    rng = np.random.default_rng(0)
    items = []
    for i in range(23):
        n = int(rng.integers(2, 150))
        items.append((i % 3, np.concatenate([[2], rng.integers(3, 50, n - 1)]).astype(np.int32)))
    return items


def test_batches_shapes_shift_and_weights():
    items = _batch_items()
    batches = conditioned_batches(items, batch_size=4, seed=1, max_len=16)
    total = 0
    for (tokens, cond), targets, weights in batches:
        assert tokens.dtype == targets.dtype == cond.dtype == np.int32
        assert weights.dtype == np.float32
        assert tokens.shape == targets.shape == weights.shape and tokens.shape[1] <= 16
        assert cond.shape == (tokens.shape[0],) and set(cond) <= {0, 1, 2}
        real = weights > 0
        np.testing.assert_array_equal(real, tokens != 0)  # weight 1 exactly on real steps
        np.testing.assert_array_equal(real, targets != 0)
        assert (real[:, 0]).all()
        # Targets are the inputs shifted by one (within each row's real part).
        np.testing.assert_array_equal(targets[:, :-1][real[:, 1:]], tokens[:, 1:][real[:, 1:]])
        total += int(weights.sum())
    assert total == sum(len(ids) - 1 for _, ids in items)  # every target exactly once
    # Length-bucketed: rows of a batch have similar lengths.
    spread = [np.ptp(w.sum(1)) for (_, _), _, w in batches]
    assert np.mean(spread) <= 4


def test_batches_are_seeded():
    items = _batch_items()

    def flat(bs):
        return [np.concatenate([b[0][0].ravel(), b[0][1], b[1].ravel()]) for b in bs]

    a, b = flat(conditioned_batches(items, 4, seed=3)), flat(conditioned_batches(items, 4, seed=3))
    c = flat(conditioned_batches(items, 4, seed=4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert len(a) != len(c) or not all(np.array_equal(x, y) for x, y in zip(a, c))
    with pytest.raises(DataError, match="batch_size"):
        conditioned_batches(items, 0)
    with pytest.raises(DataError, match="padding"):
        conditioned_batches([(0, [2, 0, 3])], 2)


def test_chunks_of_long_sequences_keep_the_condition():
    ids = np.arange(1, 41, dtype=np.int32)  # 40 ids → 39 predictions
    batches = conditioned_batches([(7, ids)], batch_size=8, seed=None, max_len=10)
    (tokens, cond), targets, weights = batches[0]
    assert tokens.shape == (4, 10) and list(cond) == [7] * 4
    np.testing.assert_array_equal(tokens[0], np.arange(1, 11))
    np.testing.assert_array_equal(tokens[1, 0], 11)  # the next chunk starts at the last id
    assert weights.sum() == 39 and targets[3, weights[3] > 0][-1] == 40


def test_encode_with_word_tokenizer(docs):
    tok = make_tokenizer("word", min_count=2).fit(docs.text("train"))
    encoded = encode_conditioned(docs, tok, "val")
    assert len(encoded) == len(docs.splits["val"])
    cid, ids = encoded[0]
    assert docs.conditions[cid] == docs.splits["val"][0][0]
    assert ids[0] == tok.eos_id and ids[-1] == tok.eos_id and ids.dtype == np.int32
    batches = conditioned_batches(encoded, 16, seed=0)
    assert max(b[0][0].shape[1] for b in batches) <= 64


def test_tsv(tmp_path):
    path = tmp_path / "c.tsv"
    rows = [f"{'pos' if i % 2 else 'neg'}\tline {i}" for i in range(20)]
    path.write_text("\n".join(rows[:10] + [""] + rows[10:]) + "\n", encoding="utf-8")
    data = make_conditioned_task(f"tsv:{path}")
    assert data.conditions == ["neg", "pos"]
    assert [len(data.splits[s]) for s in SPLITS] == [16, 2, 2]
    assert data.splits["val"] == [("neg", "line 16"), ("pos", "line 17")]  # contiguous cut
    shuffled = make_conditioned_task(f"tsv:{path}", seed=1, shuffle=True)
    assert sorted(shuffled.splits["train"]) != sorted(data.splits["train"])


def test_tsv_errors(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tone\nb two\na\tthree\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.tsv:2 has 1 tab-separated column"):
        make_conditioned_task(f"tsv:{bad}")
    empty = tmp_path / "empty.tsv"
    empty.write_text("a\tone\n\tthree\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.tsv:2 has an empty condition"):
        make_conditioned_task(f"tsv:{empty}")
    few = tmp_path / "few.tsv"
    few.write_text("".join(f"a\t{i}\n" for i in range(10)) + "b\tx\nb\ty\n", encoding="utf-8")
    with pytest.raises(DataError, match="'b' have no val items"):
        make_conditioned_task(f"tsv:{few}")
    with pytest.raises(DataError, match="no such file"):
        make_conditioned_task(f"tsv:{tmp_path / 'missing.tsv'}")
    with pytest.raises(DataError, match="unknown conditioned data"):
        make_conditioned_task("python-docs")


def test_data_module_does_not_import_tensorflow():
    code = ("import sys, keras_seq.tasks.conditioned.data as d; d.make_conditioned_task(); "
            "assert 'tensorflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_shapes_scenes_every_scene_in_every_split_and_only_the_scene_words_vary():
    from keras_seq.tasks.conditioned.data import SHAPE_PHRASES, make_conditioned_task

    data = make_conditioned_task("shapes", seed=3)
    assert data == make_conditioned_task("shapes", seed=3)
    assert data.sha256 != make_conditioned_task("shapes", seed=4).sha256
    assert len(data.conditions) == 90
    for split in ("train", "val", "test"):
        assert set(data.counts(split)) == set(data.conditions)
    for scene, text in data.splits["test"]:
        size, colour, shape = scene.split()
        words = text.split()
        assert {size, colour, shape} <= set(words)  # the scene words are all there
        assert any(text == p.format(size=size, colour=colour, shape=shape)
                   for p in SHAPE_PHRASES)
