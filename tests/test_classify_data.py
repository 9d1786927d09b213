import collections
import subprocess
import sys

import pytest

from keras_seq.data.splits import split_items
from keras_seq.errors import DataError
from keras_seq.tasks.classify import data as cdata
from keras_seq.tasks.classify.data import (
    FILLER_WORDS,
    NEGATIVE_WORDS,
    NEGATORS,
    POSITIVE_WORDS,
    ClassificationData,
    load_tsv,
    make_classification_task,
    reviews_negation,
)

# -- TSV ---------------------------------------------------------------------------------


def write(tmp_path, text, name="data.tsv", mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("header_word", ["label", "Sentiment", "CLASS", "category", "labels"])
def test_header_is_detected(tmp_path, header_word):
    path = write(tmp_path, f"text\t{header_word}\ngreat film\tpos\n\nawful\tneg\n")
    assert load_tsv(path) == [("great film", "pos"), ("awful", "neg")]


def test_no_header_keeps_the_first_row_and_header_flags_override(tmp_path):
    path = write(tmp_path, "great film\tpos\nawful\tneg\n")
    assert load_tsv(path) == [("great film", "pos"), ("awful", "neg")]
    assert load_tsv(path, header=True) == [("awful", "neg")]
    with_header = write(tmp_path, "text\tlabel\nok\tpos\n", name="h.tsv")
    assert load_tsv(with_header, header=False) == [("text", "label"), ("ok", "pos")]


def test_columns_can_be_chosen(tmp_path):
    path = write(tmp_path, "id\tlabel\ttext\n1\tpos\tgreat\n2\tneg\tbad\n")
    assert load_tsv(path, text_col=2, label_col=1) == [("great", "pos"), ("bad", "neg")]


@pytest.mark.parametrize("content, line, what", [
    ("good\tpos\njust text\n", 2, "expected at least 2"),
    ("good\tpos\n\n\t neg\n", 3, "empty text"),
    ("good\tpos\nbad\t \n", 2, "empty label"),
])
def test_bad_rows_name_file_and_line(tmp_path, content, line, what):
    path = write(tmp_path, content)
    with pytest.raises(DataError) as err:
        load_tsv(path)
    assert f"{path}:{line}:" in str(err.value) and what in str(err.value)


def test_undecodable_bytes_name_the_line(tmp_path):
    path = write(tmp_path, b"good\tpos\nbad \xff\xfe\tneg\n", mode="wb")
    with pytest.raises(DataError, match=rf"{path.name}:2: not UTF-8"):
        load_tsv(path)


def test_missing_and_empty_files(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        load_tsv(tmp_path / "nope.tsv")
    with pytest.raises(DataError, match="no text<TAB>label rows"):
        load_tsv(write(tmp_path, "text\tlabel\n\n"))


def big_tsv(tmp_path):
    rows = [f"review number {i}\t{['pos', 'neg', 'meh'][i % 3]}" for i in range(300)]
    return write(tmp_path, "text\tlabel\n" + "\n".join(rows) + "\n")


def test_tsv_task_split_is_deterministic_and_stratified(tmp_path):
    path = big_tsv(tmp_path)
    a = make_classification_task(f"tsv:{path}", seed=3)
    b = make_classification_task(f"tsv:{path}", seed=3)
    c = make_classification_task(f"tsv:{path}", seed=4)
    assert a.splits == b.splits and a.sha256 == b.sha256
    assert a.splits["train"] != c.splits["train"]
    sizes = {s: len(p) for s, p in a.splits.items()}
    assert sizes == {"train": 270, "val": 15, "test": 15}  # the shared default, 90/5/5
    everything = sorted(r for split in a.splits.values() for r in split)
    assert everything == sorted(load_tsv(path))  # a partition: nothing lost or repeated
    assert a.labels == ["meh", "neg", "pos"]
    info = a.describe()
    assert info["label_counts"]["test"] == {"meh": 5, "neg": 5, "pos": 5}
    assert info["imbalance"] == 1.0 and len(info["sha256"]) == 64
    other = make_classification_task(f"tsv:{path}", seed=3, split_ratio="50/25/25",
                                     test_size=7)
    assert (len(other.splits["train"]), len(other.splits["test"])) == (150, 7)


def test_stratified_split_keeps_every_label_in_train():
    rows = [("a", "x"), ("b", "rare")] + [(f"t{i}", "x") for i in range(20)]
    splits = split_items(rows, "34/33/33", seed=0, by=lambda row: row[1])
    assert {label for _, label in splits["train"]} == {"x", "rare"}


def test_imbalance_is_max_over_min(tmp_path):
    data = ClassificationData({"train": [("a", "x")] * 6 + [("b", "y")] * 2, "val": [],
                               "test": []})
    assert data.labels == ["x", "y"] and data.describe()["imbalance"] == 3.0


def test_unknown_spec_lists_the_valid_ones():
    with pytest.raises(DataError, match=r"unknown classification task 'imdb'.*"
                                        r"tsv:PATH, reviews-negation"):
        make_classification_task("imdb")


def test_bad_split_ratio(tmp_path):
    with pytest.raises(DataError, match=r"invalid split '80/20': 2 shares, expected 3"):
        make_classification_task(f"tsv:{big_tsv(tmp_path)}", split_ratio="80/20")


def test_unknown_option_lists_the_valid_ones():
    with pytest.raises(DataError, match="unknown option.*colour.*distances, hard"):
        make_classification_task("reviews-negation", colour="red")


def test_data_module_does_not_import_tensorflow():
    code = "import sys, keras_seq.tasks.classify.data; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


# -- reviews-negation -------------------------------------------------------------------

POLARITY = {**{w: "pos" for w in POSITIVE_WORDS}, **{w: "neg" for w in NEGATIVE_WORDS}}


def parse(text):
    words = text.split()
    negators = [i for i, w in enumerate(words) if w in NEGATORS]
    sentiments = [i for i, w in enumerate(words) if w in POLARITY]
    return words, negators, sentiments


def test_reviews_are_deterministic_and_balanced():
    a = reviews_negation(200, seed=5)
    assert a == reviews_negation(200, seed=5)
    assert a != reviews_negation(200, seed=6)
    labels = collections.Counter(label for _, label in a[0])
    assert labels == {"pos": 100, "neg": 100}
    assert set(a[1]) == {70}


def test_easy_reviews_positions_and_labels():
    examples, groups = reviews_negation(400, seed=1)
    negated = 0
    for text, label in examples:
        words, negators, sentiments = parse(text)
        assert len(words) == 80 and sentiments == [75]
        assert negators in ([], [5])
        negated += bool(negators)
        assert set(words) - {words[75], *[words[i] for i in negators]} <= set(FILLER_WORDS)
        flipped = {"pos": "neg", "neg": "pos"}
        want = POLARITY[words[75]] if not negators else flipped[POLARITY[words[75]]]
        assert label == want
    assert negated == 100  # a quarter of the reviews are negated by default


def test_distances_are_groups_and_balanced_within():
    examples, groups = reviews_negation(600, distances=(10, 35, 70), seed=2)
    assert collections.Counter(groups) == {10: 200, 35: 200, 70: 200}
    per = collections.Counter((d, label) for (_, label), d in zip(examples, groups))
    assert all(per[(d, lab)] == 100 for d in (10, 35, 70) for lab in ("pos", "neg"))
    for (text, _), d in zip(examples, groups):
        _, negators, sentiments = parse(text)
        assert sentiments == [75] and negators in ([], [75 - d])


def test_custom_positions():
    examples, groups = reviews_negation(40, length=20, negator_pos=2, sentiment_pos=15, seed=0)
    assert set(groups) == {13}
    for text, _ in examples:
        words, negators, sentiments = parse(text)
        assert len(words) == 20 and sentiments == [15] and negators in ([], [2])


def xor_rule(text):
    """Order-blind rule: positive word present XOR negator present."""
    words = set(text.split())
    positive = bool(words & set(POSITIVE_WORDS))
    negated = bool(words & set(NEGATORS))
    return "pos" if positive != negated else "neg"


def test_hard_variant_needs_word_order():
    examples, groups = reviews_negation(2000, hard=True, distances=(10, 70), seed=3)
    assert collections.Counter(label for _, label in examples) == {"pos": 1000, "neg": 1000}
    for (text, label), d in zip(examples, groups):
        words, negators, sentiments = parse(text)
        assert len(negators) == 1 and len(sentiments) == 1
        assert sorted(negators + sentiments) == [75 - d, 75]
        polarity = POLARITY[words[sentiments[0]]]
        flipped = {"pos": "neg", "neg": "pos"}[polarity]
        assert label == (flipped if negators[0] < sentiments[0] else polarity)
    # Every bag of words occurs with both labels equally often ...
    bags = collections.defaultdict(collections.Counter)
    for text, label in examples:
        bags[tuple(sorted(text.split()))][label] += 1
    assert all(c["pos"] == c["neg"] for c in bags.values())
    # ... so every word's share of "pos" reviews is exactly 1/2 ...
    pos_with, total_with = collections.Counter(), collections.Counter()
    for text, label in examples:
        for w in set(text.split()):
            total_with[w] += 1
            pos_with[w] += label == "pos"
    assert all(pos_with[w] * 2 == total_with[w] for w in total_with)
    # ... and an order-blind rule scores chance; the same rule solves the easy variant.
    hard_acc = sum(xor_rule(t) == lab for t, lab in examples) / len(examples)
    easy, _ = reviews_negation(2000, seed=3)
    easy_acc = sum(xor_rule(t) == lab for t, lab in easy) / len(easy)
    assert hard_acc == 0.5 and easy_acc == 1.0


def test_easy_variant_words_carry_the_label():
    # In the easy variant the negator words only occur in reviews whose label is flipped.
    examples, _ = reviews_negation(2000, negated_share=0.5, seed=4)
    with_negator = [lab for t, lab in examples if set(t.split()) & set(NEGATORS)]
    assert len(with_negator) == 1000


def test_negated_share_sets_the_sentiment_word_plateau():
    examples, groups = reviews_negation(1200, negated_share=0.25, distances=(10, 70), seed=7)
    assert collections.Counter(label for _, label in examples) == {"pos": 600, "neg": 600}
    negated = collections.Counter(d for (t, _), d in zip(examples, groups)
                                  if set(t.split()) & set(NEGATORS))
    assert negated == {10: 150, 70: 150}
    # Counting sentiment words (ignoring negators) is right exactly on the 3/4 not negated.
    count_rule = sum(POLARITY[t.split()[75]] == lab for t, lab in examples) / len(examples)
    assert count_rule == 0.75
    half, _ = reviews_negation(1200, negated_share=0.5, seed=7)
    assert sum(POLARITY[t.split()[75]] == lab for t, lab in half) / len(half) == 0.5
    with pytest.raises(DataError, match="negated_share=1.5"):
        reviews_negation(4, negated_share=1.5)


def test_make_task_splits_groups_and_seeds():
    data = make_classification_task("reviews-negation", seed=1, train_size=24, val_size=12,
                                    test_size=36)
    assert data.labels == ["neg", "pos"]
    assert {s: len(p) for s, p in data.splits.items()} == {"train": 24, "val": 12, "test": 36}
    assert collections.Counter(data.groups["test"]) == {10: 12, 35: 12, 70: 12}
    texts = {s: {t for t, _ in p} for s, p in data.splits.items()}
    assert not texts["train"] & texts["test"] and not texts["val"] & texts["test"]
    # val/test do not depend on the training size
    other = make_classification_task("reviews-negation", seed=1, train_size=8, val_size=12,
                                     test_size=36)
    assert other.splits["test"] == data.splits["test"]
    assert other.sha256 != data.sha256  # the parameters differ
    again = make_classification_task("reviews-negation", seed=1, train_size=24, val_size=12,
                                     test_size=36)
    assert again.sha256 == data.sha256 and again.splits == data.splits
    hard = make_classification_task("reviews-negation", seed=1, train_size=8, val_size=0,
                                    test_size=6, hard=True, distances=None)
    assert set(hard.groups["test"]) == {70} and hard.splits["val"] == []
    info = hard.describe()
    assert info["sizes"] == {"train": 8, "val": 0, "test": 6} and info["imbalance"] == 1.0


@pytest.mark.parametrize("kwargs, match", [
    ({"negator_pos": 80}, "negator_pos < sentiment_pos"),
    ({"sentiment_pos": 80}, "sentiment_pos < length"),
    ({"distances": (10, 76)}, r"distance 76.*1..sentiment_pos \(75\)"),
    ({"distances": ()}, "at least one distance"),
    ({"num": 0}, "num=0"),
])
def test_bad_generator_arguments(kwargs, match):
    with pytest.raises(DataError, match=match):
        reviews_negation(**{"num": 4, **kwargs})


def test_filler_vocabulary_is_neutral():
    assert 150 <= len(FILLER_WORDS) <= 300 and len(set(FILLER_WORDS)) == len(FILLER_WORDS)
    assert not set(FILLER_WORDS) & (set(POLARITY) | set(NEGATORS) | {"no", "but", "without"})
    assert all(w.isalpha() and w == w.lower() for w in FILLER_WORDS)
    assert cdata.TASKS == ("tsv:PATH", "reviews-negation")
