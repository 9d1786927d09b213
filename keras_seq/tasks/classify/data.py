"""Labelled texts for N→1 classification: user TSV files and the ``reviews-negation`` task.

Every split is ``[(text, label), ...]`` of plain strings; a word tokenizer from
:mod:`keras_seq.data.tokenizers` turns the texts into ids. This module does not import
TensorFlow.

Task specs for :func:`make_classification_task`:

* ``tsv:PATH`` — ``text<TAB>label`` lines (:func:`load_tsv`), cut into train/val/test by
  a seeded, per-label (stratified) shuffle at ``split_ratio`` (default 90/5/5;
  :func:`keras_seq.data.splits.split_items`);
* ``reviews-negation`` — generated 80-word reviews where a negator ("not", "never", …)
  far before the sentiment word flips its polarity (:func:`reviews_negation`).

Example:

>>> data = make_classification_task("reviews-negation", seed=0, train_size=8,
...                                 val_size=4, test_size=6)
>>> data.labels, {s: len(p) for s, p in data.splits.items()}
(['neg', 'pos'], {'train': 8, 'val': 4, 'test': 6})
>>> text, label = data.splits["train"][0]
>>> len(text.split()), sorted(set(data.groups["test"]))
(80, [10, 35, 70])
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from keras_seq.data.splits import DEFAULT_SPLIT, SPLITS, parse_split, split_items
from keras_seq.errors import DataError
from keras_seq.tasks.classify.config import ClassifyConfig

TASKS = ("tsv:PATH", "reviews-negation")
HEADER_NAMES = ("label", "labels", "class", "category", "sentiment")
# Bump when reviews_negation would produce different texts for the same arguments.
REVIEWS_NEGATION_VERSION = 1
DEFAULT_SIZES = {"train": 4000, "val": 500, "test": 1500}
DEFAULT_DISTANCES = (10, 35, 70)

# -- vocabulary of the generated reviews ------------------------------------------------

# Neutral filler: no sentiment, no negation, no word that the tokenizer would split.
FILLER_WORDS = tuple("""
the a an this that these those it its they them their he she his her we our you your
i me my one two three first second last some many most every each other another both
movie film story plot script scene scenes screen cast actor actors actress director
camera shot shots music score song songs sound soundtrack dialogue line lines character
characters hero villain family friend friends city town house road car train boat
night day morning evening summer winter year years hour hours minute minutes time end
beginning middle part parts series sequel episode season book novel version studio
theater audience viewer viewers critic critics crowd ticket tickets seat seats popcorn
was is were are be been being has have had do does did will would could should may
might can shall went came saw watched looked seemed felt made took gave told said
showed played starred filmed wrote directed opened closed began ended moved turned
about after before during while when where which who what why how then than so as
at by for from in into of on onto over under with within through around between
and or also just still even again here there now today tonight yesterday tomorrow
long short old new young early late big small tall wide red blue green black white
british french italian american local modern recent silent animated original final
rain snow wind sun light dark color window door table chair room street park river
""".split())
POSITIVE_WORDS = ("good", "great", "excellent", "wonderful", "brilliant", "superb",
                  "enjoyable", "delightful", "charming", "impressive", "fantastic", "memorable")
NEGATIVE_WORDS = ("bad", "terrible", "awful", "boring", "dull", "poor", "weak", "horrible",
                  "tedious", "dreadful", "mediocre", "disappointing")
NEGATORS = ("not", "never", "hardly", "barely")


def _check_int(name: str, value, minimum: int) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise DataError(f"received {name}={value!r}; expected an integer ≥ {minimum}, "
                        f"e.g. {name}={max(minimum, 10)}")
    return int(value)


# -- the dataset container --------------------------------------------------------------


@dataclass
class ClassificationData:
    """The train/val/test ``(text, label)`` pairs of one classification task.

    ``labels`` is the sorted label vocabulary of the training split (filled in when not
    given); ``groups`` optionally holds one group key per example of a split (e.g. the
    negation distance) for :func:`~keras_seq.tasks.classify.metrics.accuracy_by_group`;
    ``sha256`` fingerprints the source (the file's bytes, or the generator's parameters);
    ``spec`` holds the arguments that reproduce the data.
    """

    splits: dict[str, list[tuple[str, str]]]
    labels: list[str] | None = None
    groups: dict[str, list] = field(default_factory=dict)
    name: str = ""
    sha256: str = ""
    spec: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.labels is None:
            self.labels = sorted({label for _, label in self.splits.get("train", [])})
        for split, groups in self.groups.items():
            if len(groups) != len(self.splits.get(split, [])):
                raise DataError(
                    f"groups[{split!r}] has {len(groups)} keys but split {split!r} has "
                    f"{len(self.splits.get(split, []))} examples; expected one group key per "
                    "example")

    def label_counts(self, split: str) -> dict[str, int]:
        """``{label: count}`` of a split, in the order of ``labels`` (then unseen labels)."""
        counts = collections.Counter(label for _, label in self.splits.get(split, []))
        ordered = {label: counts.get(label, 0) for label in self.labels}
        ordered.update({k: v for k, v in sorted(counts.items()) if k not in ordered})
        return ordered

    def describe(self) -> dict:
        """Name, sizes, label counts per split, train imbalance (max/min count), sha256."""
        train = [c for c in self.label_counts("train").values()]
        imbalance = (max(train) / min(train)) if train and min(train) > 0 else float("inf")
        out = {"name": self.name,
               "sizes": {s: len(p) for s, p in self.splits.items()},
               "labels": list(self.labels),
               "label_counts": {s: self.label_counts(s) for s in self.splits},
               "imbalance": imbalance if train else None,
               "sha256": self.sha256}
        if self.groups:
            out["group_counts"] = {s: dict(sorted(collections.Counter(g).items()))
                                   for s, g in self.groups.items()}
        return out


# -- TSV files --------------------------------------------------------------------------


def load_tsv(path, text_col: int = 0, label_col: int = 1,
             header: bool | None = None) -> list[tuple[str, str]]:
    """Read ``text<TAB>label`` rows from a UTF-8 file.

    Args:
        path: the file.
        text_col, label_col: 0-based columns of the text and the label.
        header: ``True`` skips the first non-blank line, ``False`` keeps it, ``None``
            skips it only when its label column is ``label``, ``labels``, ``class``,
            ``category`` or ``sentiment`` (any case).

    Blank lines are skipped. A row with too few columns, an empty text or label, or bytes
    that are not UTF-8 raises :class:`~keras_seq.errors.DataError` naming the file and the
    1-based line number.
    """
    path = Path(path).expanduser()
    if text_col == label_col or min(text_col, label_col) < 0:
        raise DataError(f"received text_col={text_col}, label_col={label_col}; expected two "
                        "different 0-based column numbers, e.g. text_col=0, label_col=1")
    if not path.is_file():
        raise DataError(f"no such file {str(path)!r}; expected a UTF-8 TSV file with "
                        "text<TAB>label lines")
    need = max(text_col, label_col) + 1
    rows: list[tuple[str, str]] = []
    first = True
    for lineno, raw in enumerate(path.read_bytes().split(b"\n"), 1):
        try:
            line = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError as err:
            raise DataError(f"{path}:{lineno}: not UTF-8 text ({err.reason} at byte "
                            f"{err.start}); expected a UTF-8 file, convert it with e.g. "
                            "iconv -t UTF-8") from None
        if lineno == 1:
            line = line.removeprefix("\ufeff")  # byte-order mark
        if not line.strip():
            continue
        cols = line.split("\t")
        if first:
            first = False
            is_header = header
            if header is None:
                is_header = len(cols) > label_col and \
                    cols[label_col].strip().lower() in HEADER_NAMES
            if is_header:
                continue
        if len(cols) < need:
            raise DataError(
                f"{path}:{lineno}: found {len(cols)} tab-separated column(s), expected at "
                f"least {need} (text in column {text_col}, label in column {label_col}): "
                f"{line[:60]!r}")
        text, label = cols[text_col].strip(), cols[label_col].strip()
        if not text or not label:
            empty = "text" if not text else "label"
            raise DataError(f"{path}:{lineno}: empty {empty} (column "
                            f"{text_col if not text else label_col}); expected a non-empty "
                            f"text and label on every non-blank line: {line[:60]!r}")
        rows.append((text, label))
    if not rows:
        raise DataError(f"{path} holds no text<TAB>label rows; expected at least one")
    return rows


# -- reviews-negation -------------------------------------------------------------------


def reviews_negation(num: int, length: int = 80, negator_pos: int = 5,
                     sentiment_pos: int = 75, distances=None, hard: bool = False,
                     negated_share: float = 0.25,
                     seed: int = 0) -> tuple[list[tuple[str, str]], list[int]]:
    """Generated movie reviews whose label hangs on a negator far from the sentiment word.

    Each review is ``length`` words of neutral filler (:data:`FILLER_WORDS`) with one
    sentiment word (:data:`POSITIVE_WORDS` / :data:`NEGATIVE_WORDS`) at 0-based position
    ``sentiment_pos`` and possibly a negator (:data:`NEGATORS`) ``d`` words earlier, e.g.
    "… not … good …" with ``d = sentiment_pos − negator_pos`` (70 by default: seed 004's
    case). The label is ``"pos"``/``"neg"``, the polarity of the sentiment word, flipped
    when the negator precedes it.

    * Easy (``hard=False``): a share of the reviews (``negated_share``, a quarter by
      default: as in real reviews, negation is the exception) have a negator ``d``
      words before the sentiment word, the rest none (filler there). Polarity and
      negation are independent, so with ``negated_share=0.5`` neither the
      sentiment word nor the negator alone predicts the label (50 %: a pure XOR, which
      small RNNs may take long to start learning), but the *set* of words does:
      "positive word XOR negator present" is right every time, so an order-blind model
      with that interaction can solve it. With ``negated_share=0.25`` the sentiment word
      alone gives 75 %, and a model that does not carry the negator plateaus there.
    * Hard (``hard=True``): every review holds exactly one negator and one sentiment word,
      at positions ``sentiment_pos − d`` and ``sentiment_pos``; the negator flips the
      label only when it comes first (when it comes after, the two words swap places and
      it modifies nothing). Reviews come in pairs with the same words, one per order, so
      every bag of words occurs with both labels equally often: any bag-of-words or
      word-count model scores exactly 50 %, and only word order carries the label.

    Args:
        num: number of reviews.
        length: words per review.
        negator_pos: 0-based position of the negator when ``distances`` is ``None``.
        sentiment_pos: 0-based position of the sentiment word (< ``length``).
        distances: several distances ``d`` to mix (e.g. ``(10, 35, 70)``); each gets an
            equal share of the reviews and of each label. ``None`` → the single distance
            ``sentiment_pos − negator_pos``.
        hard: the order-only variant above.
        negated_share: fraction of the easy variant's reviews that hold a negator
            (exact per distance up to rounding; ignored when ``hard``).
        seed: random seed; equal arguments give equal reviews.

    Returns:
        ``(examples, groups)``: ``[(text, label), ...]`` (words joined by single spaces)
        and the distance ``d`` of each example. Labels are exactly balanced for even
        ``num`` (and within every distance once ``num`` covers whole cycles).

    Example:

    >>> examples, groups = reviews_negation(4, length=8, negator_pos=1, sentiment_pos=6)
    >>> [label for _, label in examples].count("pos"), set(groups)
    (2, {5})
    """
    num = _check_int("num", num, 1)
    length = _check_int("length", length, 2)
    sentiment_pos = _check_int("sentiment_pos", sentiment_pos, 1)
    if sentiment_pos >= length:
        raise DataError(f"received sentiment_pos={sentiment_pos} with length={length}; "
                        "expected sentiment_pos < length (0-based positions)")
    distances = _check_distances(distances, negator_pos, sentiment_pos)
    if not isinstance(negated_share, (int, float)) or not 0.0 <= negated_share <= 1.0:
        raise DataError(f"received negated_share={negated_share!r}; expected a fraction in "
                        "[0, 1], e.g. 0.5 (half the reviews hold a negator)")
    rng = np.random.default_rng([REVIEWS_NEGATION_VERSION, int(seed)])
    words_for = functools.partial(_review_words, rng, np.array(FILLER_WORDS), length,
                                  sentiment_pos)
    if hard:
        examples, groups = _hard_reviews(num, distances, sentiment_pos, words_for)
    else:
        examples, groups = _easy_reviews(num, distances, sentiment_pos, negated_share,
                                         words_for)
    order = rng.permutation(num)
    return [examples[i] for i in order], [groups[i] for i in order]


def _check_distances(distances, negator_pos, sentiment_pos: int) -> tuple[int, ...]:
    """The negator distances of :func:`reviews_negation` as a tuple of ints, checked
    (``None``: the single distance ``sentiment_pos − negator_pos``)."""
    if distances is None:
        negator_pos = _check_int("negator_pos", negator_pos, 0)
        if negator_pos >= sentiment_pos:
            raise DataError(f"received negator_pos={negator_pos}, sentiment_pos="
                            f"{sentiment_pos}; expected negator_pos < sentiment_pos")
        distances = (sentiment_pos - negator_pos,)
    distances = tuple(distances) if not isinstance(distances, (int, np.integer)) \
        else (distances,)
    if not distances:
        raise DataError("received distances=(); expected at least one distance, e.g. (10, 35, 70)")
    for d in distances:
        if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or not \
                1 <= d <= sentiment_pos:
            raise DataError(f"received distance {d!r}; expected integers in 1..sentiment_pos "
                            f"({sentiment_pos}) so the negator fits before the sentiment word, "
                            "e.g. distances=(10, 35, 70)")
    return tuple(int(d) for d in distances)


def _review_words(rng, filler, length: int, sentiment_pos: int, positive: bool, d: int):
    """One review's random words: ``(filler words, sentiment word, negator, negator
    position)``, drawn in that order, the sentiment word of polarity ``positive``."""
    words = list(rng.choice(filler, size=length))
    sentiment = str(rng.choice((NEGATIVE_WORDS, POSITIVE_WORDS)[positive]))
    negator = str(rng.choice(NEGATORS))
    return words, sentiment, negator, sentiment_pos - d


def _hard_reviews(num: int, distances, sentiment_pos: int, words_for):
    """The hard variant's ``(examples, groups)`` before shuffling: pairs of reviews with the
    same words, the negator before the sentiment word in one and after it in the other."""
    k = len(distances)
    examples: list[tuple[str, str]] = []
    groups: list[int] = []
    # Bag j: polarity j % 2; distances cycle so that each (distance, polarity) recurs.
    for j in range((num + 1) // 2):
        positive, d = j % 2 == 1, distances[(j // 2 + j % 2) % k]
        words, sentiment, negator, early = words_for(positive, d)
        for negator_first in (True, False):
            if len(examples) == num:
                break
            review = list(words)
            review[early], review[sentiment_pos] = (negator, sentiment) if negator_first \
                else (sentiment, negator)
            examples.append((" ".join(review), "pos" if positive != negator_first
                             else "neg"))
            groups.append(d)
    return examples, groups


def _easy_reviews(num: int, distances, sentiment_pos: int, negated_share: float, words_for):
    """The easy variant's ``(examples, groups)`` before shuffling: a share
    ``negated_share`` of each distance's reviews hold a negator, the rest none."""
    k = len(distances)
    examples: list[tuple[str, str]] = []
    groups: list[int] = []
    # Pair j: one positive and one negative review at distance j % k, both negated
    # or neither (so one label each); negation spread evenly over a distance's pairs.
    for i in range(num):
        j, positive = i // 2, i % 2 == 0
        d, jj = distances[j % k], j // k
        negated = math.floor((jj + 1) * negated_share + 1e-9) > \
            math.floor(jj * negated_share + 1e-9)
        words, sentiment, negator, early = words_for(positive, d)
        words[sentiment_pos] = sentiment
        if negated:
            words[early] = negator
        examples.append((" ".join(words), "pos" if positive != negated else "neg"))
        groups.append(d)
    return examples, groups


# -- one entry point --------------------------------------------------------------------

_TSV_OPTIONS = ("text_col", "label_col", "header")
_NEGATION_OPTIONS = ("length", "negator_pos", "sentiment_pos", "distances", "hard",
                     "negated_share")


def _check_options(spec: str, options: dict, valid: tuple[str, ...]) -> None:
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise DataError(f"unknown option(s) {', '.join(unknown)} for task {spec!r}; expected "
                        f"some of: {', '.join(valid)}")


def _size(name: str, value, default: int | None) -> int | None:
    if value is None:
        return default
    return _check_int(name, value, 0)


def make_classification_task(spec: str, seed: int = 0, train_size: int | None = None,
                             val_size: int | None = None, test_size: int | None = None,
                             split_ratio=DEFAULT_SPLIT, **task_options) -> ClassificationData:
    """Train/val/test ``(text, label)`` pairs for ``tsv:PATH`` or ``reviews-negation``.

    ``tsv:PATH`` reads :func:`load_tsv` (options ``text_col``, ``label_col``, ``header``)
    and cuts the rows at ``split_ratio`` (:func:`keras_seq.data.splits.split_items`: a
    seeded shuffle of each label's rows, three shares); the sizes, when given, cap each
    split. ``sha256`` is that of the file's bytes.

    ``reviews-negation`` generates each split with its own seed derived from ``seed``
    (so val/test never depend on the training size), sizes default to 4000/500/1500 and
    options are ``length``, ``negator_pos``, ``sentiment_pos``, ``distances`` (default
    ``(10, 35, 70)``; ``None`` for the single ``sentiment_pos − negator_pos``), ``hard``
    and ``negated_share``; ``groups`` holds each example's distance. ``sha256`` is that of the
    generator's parameters.

    Raises:
        DataError: an unknown spec (the message lists the valid ones) or option, or bad data.
    """
    if not isinstance(spec, str):
        raise DataError(f"received task {spec!r}; expected one of {', '.join(TASKS)}")
    if spec.startswith("tsv:"):
        _check_options(spec, task_options, _TSV_OPTIONS)
        path = Path(spec[4:]).expanduser()
        rows = load_tsv(path, **task_options)
        splits = split_items(rows, parse_split(split_ratio, parts=(3,)), seed=seed,
                             by=lambda row: row[1])
        for split, cap in (("train", train_size), ("val", val_size), ("test", test_size)):
            cap = _size(f"{split}_size", cap, None)
            if cap is not None:
                splits[split] = splits[split][:cap]
        labels = sorted({label for _, label in splits["train"]})
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        spec_dict = {"task": spec, "seed": seed, "split_ratio": split_ratio,
                     "train_size": train_size, "val_size": val_size, "test_size": test_size,
                     **task_options}
        return ClassificationData(splits, labels, {}, name=spec, sha256=digest,
                                  spec=spec_dict)
    if spec == "reviews-negation":
        _check_options(spec, task_options, _NEGATION_OPTIONS)
        options = {"length": 80, "negator_pos": 5, "sentiment_pos": 75,
                   "distances": DEFAULT_DISTANCES, "hard": False, "negated_share": 0.25,
                   **task_options}
        if options["distances"] is not None:
            options["distances"] = tuple(int(d) for d in options["distances"])
        options["hard"] = bool(options["hard"])
        sizes = {s: _size(f"{s}_size", n, DEFAULT_SIZES[s])
                 for s, n in zip(SPLITS, (train_size, val_size, test_size))}
        splits, groups = {}, {}
        for k, split in enumerate(SPLITS):
            if sizes[split] == 0:
                splits[split], groups[split] = [], []
                continue
            splits[split], groups[split] = reviews_negation(
                sizes[split], seed=int(seed) * 1000 + k, **options)
        params = {"task": spec, "version": REVIEWS_NEGATION_VERSION, "seed": seed,
                  "sizes": sizes, **{k: list(v) if isinstance(v, tuple) else v
                                     for k, v in options.items()}}
        digest = hashlib.sha256(json.dumps(params, sort_keys=True).encode()).hexdigest()
        return ClassificationData(splits, ["neg", "pos"], groups, name=spec, sha256=digest,
                                  spec=params)
    raise DataError(f"unknown classification task {spec!r}; expected one of: "
                    f"{', '.join(TASKS)} (a text<TAB>label file)")


def task_data(config: ClassifyConfig):
    """The task a run trains on, made from its config (seed, sizes, split)."""
    return make_classification_task(config.data, seed=config.seed, train_size=config.train_size,
                                    val_size=config.val_size, test_size=config.test_size,
                                    split_ratio=config.split_ratio, **config.task_options())
