"""Conditioned text: ``(condition label, paragraph)`` pairs, offline, and their batches.

Sources (:func:`make_conditioned_task`):

* ``python-docs-topics`` — CPython's bundled documentation (``pydoc_data.topics``: topic
  name → text, present on every CPython, so this never downloads). Each topic is cut into
  paragraphs (blocks of non-blank lines, joined with spaces; section underlines and
  table borders dropped, code and indented text kept). A paragraph that already appeared
  earlier (topics in sorted order) is dropped, because several topics repeat others
  (``compound`` contains ``if``, ``while``, …; ``specialnames`` contains
  ``customization``): without this the same paragraph could sit in train and in val.
  The condition is the topic's *group* (``grouping="groups"``, the default): the
  ~80 topics fall into the 10 coarse groups of :data:`TOPIC_GROUPS` (statements,
  expressions, data model, built-in types, …), which gives every condition at least a
  few thousand words. ``grouping="topics"`` uses the topic name itself where the topic
  has at least :data:`MIN_TOPIC_PARAGRAPHS` paragraphs and its group otherwise.
* ``shapes`` — seed 003's one-to-many shape in its simplest form, "describe the
  picture": the condition is a scene (size, colour and shape, 90 combinations) and the text
  one of several phrasings describing it ("there is a red circle and it is small"). The
  words that name the scene cannot be guessed from the rest of the text, so the condition
  is worth about ln 90 nats per sentence; generated from the seed, offline.
* ``tsv:PATH`` — one ``condition<TAB>text`` row per line (UTF-8; blank lines skipped).

Splits: the items of each topic (or, for TSV, of each condition) are cut contiguously
into train/val/test by ``split_ratio`` (:data:`TOPIC_SPLIT`, 80/10/10, by default; the
shared rule of :mod:`keras_seq.data.splits`), so every condition appears in every split;
a condition missing from a split is an error that says how to fix it.

The model side: :func:`encode_conditioned` turns a split into ``(condition_id, ids)``
items (each paragraph is one sequence, started with a start token), and
:func:`conditioned_batches` pads them into length-bucketed ``((tokens, condition),
targets, weights)`` numpy batches for ``ConditionedLM``.

This module does not import TensorFlow.

Example:

>>> data = make_conditioned_task("python-docs-topics")
>>> len(data.conditions), sorted(data.splits)
(10, ['test', 'train', 'val'])
>>> all(data.counts(s)[c] > 0 for s in ("train", "val", "test") for c in data.conditions)
True
>>> items = [(0, [2, 5, 6, 7, 2]), (1, [2, 8, 2])]
>>> (tokens, cond), targets, weights = conditioned_batches(items, batch_size=2)[0]
>>> tokens.tolist(), targets.tolist(), cond.tolist()
([[2, 8, 0, 0], [2, 5, 6, 7]], [[8, 2, 0, 0], [5, 6, 7, 2]], [1, 0])
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from keras_seq.data.corpus import decode_text
from keras_seq.data.splits import SPLITS, parse_split, split_items, split_sizes
from keras_seq.errors import DataError
from keras_seq.tasks.conditioned.config import ConditionedConfig

SOURCE = "python-docs-topics"
TOPIC_SPLIT = "80/10/10"  # the cut of every block (topic, condition) unless told otherwise
MAX_LEN = 64  # longest training sequence (tokens); longer paragraphs are cut into chunks
MIN_TOPIC_PARAGRAPHS = 20  # grouping="topics": smaller topics are labelled by their group

# The condition labels of python-docs-topics (grouping="groups"), in condition-id order.
TOPIC_GROUPS: dict[str, tuple[str, ...]] = {
    "simple-statements": ("assert", "assignment", "augassign", "break", "continue", "del",
                          "global", "import", "nonlocal", "pass", "raise", "return"),
    "compound-statements": ("async", "class", "compound", "else", "for", "function", "if",
                            "try", "while", "with"),
    "expressions": ("atom-identifiers", "atom-literals", "attribute-references", "await",
                    "binary", "bitwise", "booleans", "calls", "comparisons", "conversions",
                    "exprlists", "in", "lambda", "operator-summary", "power", "shifting",
                    "slicings", "subscriptions", "unary", "yield"),
    "lexical": ("floating", "identifiers", "imaginary", "integers", "numbers", "strings"),
    "format-strings": ("formatstrings",),
    "data-model": ("attribute-access", "callable-types", "context-managers", "customization",
                   "id-classes", "numeric-types", "objects", "sequence-types", "specialattrs",
                   "specialnames", "types"),
    "execution-model": ("dynamic-features", "exceptions", "execmodel", "naming"),
    "builtin-types": ("bltin-code-objects", "bltin-ellipsis-object", "bltin-null-object",
                      "bltin-type-objects", "dict", "lists", "truth", "typesfunctions",
                      "typesmapping", "typesmethods", "typesmodules", "typesseq",
                      "typesseq-mutable"),
    "string-methods": ("string-methods",),
    "debugger": ("debugger",),
}
_GROUP_OF = {topic: group for group, topics in TOPIC_GROUPS.items() for topic in topics}


@dataclass
class ConditionedData:
    """Train/val/test ``(condition, text)`` pairs of one source.

    Args:
        name: ``"python-docs-topics"`` or ``"tsv:PATH"``.
        splits: ``{"train"|"val"|"test": [(condition label, paragraph), ...]}``.
        conditions: the condition labels; a label's index is its condition id.
        sha256: hex sha256 of every ``split<TAB>condition<TAB>text`` row, in split order
            (names exactly the text a result was measured on).
        spec: the arguments that made the data (source, grouping, seed, …).
        notes: how the text was prepared.
    """

    name: str
    splits: dict[str, list[tuple[str, str]]]
    conditions: list[str]
    sha256: str
    spec: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def condition_ids(self) -> dict[str, int]:
        return {c: i for i, c in enumerate(self.conditions)}

    def _split(self, split: str) -> list[tuple[str, str]]:
        if split not in self.splits:
            raise DataError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        return self.splits[split]

    def text(self, split: str = "train") -> str:
        """The paragraphs of one split, one per line (e.g. to fit a tokenizer)."""
        return "".join(t + "\n" for _, t in self._split(split))

    def counts(self, split: str) -> Counter:
        """Items per condition label in one split."""
        return Counter(c for c, _ in self._split(split))

    def describe(self) -> dict:
        """Sizes and provenance, for logs and result fingerprints."""
        return {
            "name": self.name,
            "sha256": self.sha256,
            "spec": dict(self.spec),
            "conditions": list(self.conditions),
            "items": {s: len(self.splits[s]) for s in SPLITS},
            "words": {s: sum(len(t.split()) for _, t in self.splits[s]) for s in SPLITS},
            "per_condition": {s: {c: self.counts(s)[c] for c in self.conditions}
                              for s in SPLITS},
            "notes": list(self.notes),
        }


# ----------------------------------------------------------------------------------------
# Splitting


def _split_blocks(blocks: list[tuple[str, list[str]]], split_ratio,
                  seed: int | None = None) -> dict[str, list[tuple[str, str]]]:
    """Cut each ``(condition, texts)`` block by ``split_ratio`` (in order, or after a shuffle
    with ``seed``: :func:`keras_seq.data.splits.split_items`) and concatenate the parts."""
    splits: dict[str, list[tuple[str, str]]] = {s: [] for s in SPLITS}
    for condition, texts in blocks:
        for split, part in split_items(texts, split_ratio, seed=seed).items():
            splits[split].extend((condition, t) for t in part)
    return splits


def items_needed(split_ratio) -> int:
    """The fewest items of a block whose cut reaches val and test.

    >>> items_needed("80/10/10"), items_needed("90/5/5")
    (5, 10)
    """
    fractions = parse_split(split_ratio, parts=(3,))
    return next(n for n in range(3, 1_000_000) if min(split_sizes(n, fractions)[1:]) > 0)


def _check_every_split(splits, conditions, source: str, fix: str, split_ratio) -> None:
    for split in SPLITS:
        present = {c for c, _ in splits[split]}
        missing = [c for c in conditions if c not in present]
        if missing:
            raise DataError(
                f"{source}: condition(s) {', '.join(map(repr, missing[:5]))} have no "
                f"{split} items; every condition needs at least {items_needed(split_ratio)} "
                f"items (cut {split_ratio} in "
                f"order) to appear in train, val and test. {fix}"
            )


def _fingerprint(splits) -> str:
    blob = "".join(f"{s}\t{c}\t{t}\n" for s in SPLITS for c, t in splits[s])
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


# ----------------------------------------------------------------------------------------
# python-docs-topics


def topic_group(topic: str) -> str:
    """The :data:`TOPIC_GROUPS` label of a ``pydoc_data`` topic.

    Topics that newer Pythons add and the table does not list go by name: ``types…`` and
    ``bltin-…`` to built-in types, anything else to ``"other"``.
    """
    if topic in _GROUP_OF:
        return _GROUP_OF[topic]
    if topic.startswith(("types", "bltin")):
        return "builtin-types"
    return "other"


def topic_paragraphs(text: str) -> list[str]:
    """Paragraphs of one topic: blocks of non-blank lines, stripped and joined by spaces.

    Section underlines (``*****``, ``=====``, …) and table borders (``+---+``) end a
    paragraph and are dropped; code and indented text are kept.

    >>> topic_paragraphs("Title\\n*****\\n\\nOne two\\n  three.\\n\\n+--+\\n")
    ['Title', 'One two three.']
    """
    paragraphs: list[str] = []
    current: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        is_rule = bool(stripped) and set(stripped) <= set("*=-~^")
        is_border = stripped.startswith(("+-", "+="))
        if not stripped or is_rule or is_border:
            if current:
                paragraphs.append(" ".join(current))
                current = []
            continue
        current.append(stripped)
    if current:
        paragraphs.append(" ".join(current))
    return paragraphs


def python_docs_topics(grouping: str = "groups", split_ratio=TOPIC_SPLIT) -> ConditionedData:
    """The ``python-docs-topics`` corpus (see the module docstring)."""
    if grouping not in ("groups", "topics"):
        raise DataError(f"python-docs-topics: received grouping={grouping!r}; expected "
                        "'groups' (10 coarse topic groups) or 'topics' (one per large topic)")
    # lazy: loads the pydoc topics only when this runs
    from pydoc_data.topics import topics

    seen: set[str] = set()
    blocks: list[tuple[str, list[str]]] = []
    dropped = 0
    for topic in sorted(topics):
        fresh = []
        for paragraph in topic_paragraphs(topics[topic]):
            if paragraph in seen:
                dropped += 1
                continue
            seen.add(paragraph)
            fresh.append(paragraph)
        if not fresh:
            continue
        label = topic_group(topic)
        if grouping == "topics" and len(fresh) >= MIN_TOPIC_PARAGRAPHS:
            label = topic
        blocks.append((label, fresh))
    splits = _split_blocks(blocks, split_ratio)
    order = list(TOPIC_GROUPS) + ["other"]
    labels = {c for c, _ in blocks}
    conditions = [g for g in order if g in labels]
    if grouping == "topics":
        conditions += sorted(labels - set(order))
    notes = [
        f"pydoc_data.topics of Python {sys.version.split()[0]} ({len(topics)} topics), one "
        "paragraph per item",
        f"dropped {dropped} paragraph(s) already seen in an earlier topic",
        f"each topic cut contiguously {split_ratio} (topics under "
        f"{items_needed(split_ratio)} paragraphs: train only)",
    ]
    _check_every_split(splits, conditions, SOURCE, "Use grouping='groups'.", split_ratio)
    return ConditionedData(SOURCE, splits, conditions, _fingerprint(splits),
                           {"source": SOURCE, "grouping": grouping,
                            "split_ratio": split_ratio}, notes)


# ----------------------------------------------------------------------------------------
# shapes

SHAPE_SIZES = ("small", "medium", "large")
SHAPE_COLOURS = ("red", "green", "blue", "yellow", "black", "white")
SHAPE_NAMES = ("circle", "square", "triangle", "star", "cross")
SHAPE_PHRASES = (
    "a {size} {colour} {shape}",
    "there is a {colour} {shape} and it is {size}",
    "the picture shows a {size} {shape} , {colour}",
    "one {shape} , {size} and {colour}",
    "you can see a {colour} {shape} of {size} size",
    "it is a {shape} : {colour} and {size}",
)
SHAPE_SIZES_PER_SPLIT = {"train": 2700, "val": 360, "test": 360}


def shapes_scenes(seed: int = 0) -> ConditionedData:
    """The ``shapes`` corpus: every scene in every split, a phrasing drawn per sentence.

    >>> data = shapes_scenes(seed=0)
    >>> len(data.conditions), data.splits["train"][0][0]
    (90, 'small red circle')
    """
    scenes = [f"{size} {colour} {shape}" for size in SHAPE_SIZES
              for colour in SHAPE_COLOURS for shape in SHAPE_NAMES]
    rng = np.random.default_rng(seed)
    splits = {}
    for split in SPLITS:
        items = []
        for i in range(SHAPE_SIZES_PER_SPLIT[split]):
            scene = scenes[i % len(scenes)]  # each scene equally often, in every split
            size, colour, shape = scene.split()
            phrase = SHAPE_PHRASES[int(rng.integers(len(SHAPE_PHRASES)))]
            items.append((scene, phrase.format(size=size, colour=colour, shape=shape)))
        splits[split] = items
    return ConditionedData("shapes", splits, scenes, _fingerprint(splits),
                           {"source": "shapes", "seed": seed},
                           ["90 scenes (3 sizes × 6 colours × 5 shapes), "
                            f"{len(SHAPE_PHRASES)} phrasings drawn with the seed"])


# ----------------------------------------------------------------------------------------
# tsv:PATH


def load_conditioned_tsv(path: str | Path, shuffle: bool = False, seed: int = 0,
                         split_ratio=TOPIC_SPLIT) -> ConditionedData:
    """``condition<TAB>text`` rows of a UTF-8 file, cut by ``split_ratio`` per condition.

    Blank lines are skipped. A row without exactly one tab, or with an empty condition or
    text, is an error naming the file and line. Conditions are sorted by label (their
    ids do not depend on the row order). With ``shuffle``, each condition's rows are
    shuffled with ``seed`` before the cut (:func:`keras_seq.data.splits.split_items`).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"no such file {str(path)!r}; expected a UTF-8 file of "
                        "condition<TAB>text lines")
    text, _, notes = decode_text(path.read_bytes(), str(path))
    rows: dict[str, list[str]] = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) != 2 or not cols[0].strip() or not cols[1].strip():
            what = (f"{len(cols)} tab-separated column(s)" if len(cols) != 2
                    else "an empty condition" if not cols[0].strip() else "an empty text")
            raise DataError(
                f"{path}:{lineno} has {what}: {line[:60]!r}; expected condition<TAB>text "
                "(exactly one tab, both sides non-empty). Fix or remove that line."
            )
        rows.setdefault(cols[0].strip(), []).append(cols[1].strip())
    if not rows:
        raise DataError(f"{path} holds no condition<TAB>text rows")
    conditions = sorted(rows)
    splits = _split_blocks([(c, rows[c]) for c in conditions], split_ratio,
                           seed=seed if shuffle else None)
    _check_every_split(splits, conditions, str(path),
                       "Add rows for those conditions or remove them.", split_ratio)
    name = f"tsv:{path}"
    spec = {"source": name, "shuffle": shuffle, "seed": seed, "split_ratio": split_ratio}
    notes = notes + [f"each condition's rows cut contiguously {split_ratio}"
                     + (" after a seeded shuffle" if shuffle else " in file order")]
    return ConditionedData(name, splits, conditions, _fingerprint(splits), spec, notes)


def make_conditioned_task(spec: str = SOURCE, seed: int = 0, grouping: str = "groups",
                          shuffle: bool = False, split_ratio=TOPIC_SPLIT) -> ConditionedData:
    """Conditioned data for ``"python-docs-topics"``, ``"shapes"`` or ``"tsv:PATH"``.

    Args:
        spec: the source.
        seed: used by TSV ``shuffle`` (the python-docs-topics cut is fixed); recorded in
            ``spec`` so batching can reuse it.
        grouping: python-docs-topics only: ``"groups"`` or ``"topics"``.
        shuffle: TSV only: shuffle each condition's rows before cutting.
        split_ratio: python-docs-topics and TSV: the train/val/test shares of each topic
            (condition), three of them (default 80/10/10).
    """
    if spec == SOURCE:
        data = python_docs_topics(grouping, split_ratio)
        data.spec["seed"] = seed
        return data
    if spec == "shapes":
        return shapes_scenes(seed)
    if spec.startswith("tsv:"):
        return load_conditioned_tsv(spec[4:], shuffle=shuffle, seed=seed,
                                    split_ratio=split_ratio)
    raise DataError(f"unknown conditioned data {spec!r}; expected {SOURCE!r} or 'shapes' "
                    "(both offline) or 'tsv:PATH' (a condition<TAB>text file)")


# ----------------------------------------------------------------------------------------
# Ids and batches


def encode_conditioned(data: ConditionedData, tokenizer, split: str,
                       start_id: int | None = None) -> list[tuple[int, np.ndarray]]:
    """``(condition_id, ids)`` per item: ``[start] + tokenizer.encode(text + "\\n")``.

    ``start_id`` defaults to the tokenizer's ``<eos>`` (word, subword) or the id of
    ``"\\n"`` (char), so every sequence starts at a line boundary, as generation does.
    """
    if start_id is None:
        start_id = tokenizer.eos_id
        if start_id is None:
            start_id = int(tokenizer.encode("\n")[0])
    ids_of = data.condition_ids
    out = []
    for condition, text in data._split(split):
        ids = tokenizer.encode(text + "\n")
        out.append((ids_of[condition], np.concatenate([[start_id], ids]).astype(np.int32)))
    return out


def _chunks(ids: np.ndarray, max_len: int):
    """Windows of ``max_len + 1`` ids overlapping by one, so each target appears once."""
    for start in range(0, len(ids) - 1, max_len):
        yield ids[start:start + max_len + 1]


def conditioned_batches(encoded, batch_size: int, seed: int | None = 0,
                        max_len: int = MAX_LEN):
    """Padded next-token batches from ``(condition_id, token_ids)`` items.

    Each item is one sequence (it should begin with a start token, as
    :func:`encode_conditioned` makes it); one longer than ``max_len + 1`` ids is cut
    into chunks of ``max_len`` predictions (a chunk starts at the last id of the
    previous one, and carries the same condition). Inputs are ``ids[:-1]``, targets
    ``ids[1:]``; padding is 0 with weight 0. Chunks of similar length share a batch
    (shuffled with ``seed`` within a length, then the batch order is shuffled; ``seed=None``
    keeps the input order).

    Returns:
        A list of ``((tokens (B, T) int32, condition (B,) int32), targets (B, T) int32,
        weights (B, T) float32)``.
    """
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise DataError(f"batch_size must be a positive integer, got {batch_size!r}")
    if not isinstance(max_len, (int, np.integer)) or max_len < 1:
        raise DataError(f"max_len must be a positive integer, got {max_len!r}")
    pieces = []
    for condition, ids in encoded:
        ids = np.asarray(ids, np.int32).reshape(-1)
        if (ids == 0).any():
            raise DataError("a token sequence contains id 0, which is padding; encode the "
                            "text with a keras-seq tokenizer (id 0 is <pad>, never a token)")
        pieces.extend((int(condition), chunk) for chunk in _chunks(ids, max_len))
    order = np.arange(len(pieces))
    if seed is not None:
        np.random.default_rng(seed).shuffle(order)
        order = np.array(sorted(order, key=lambda i: len(pieces[i][1])), dtype=np.int64)
    groups = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    if seed is not None:
        np.random.default_rng(seed + 1).shuffle(groups)
    batches = []
    for idx in groups:
        width = max(len(pieces[i][1]) for i in idx) - 1
        tokens = np.zeros((len(idx), width), np.int32)
        targets = np.zeros((len(idx), width), np.int32)
        weights = np.zeros((len(idx), width), np.float32)
        condition = np.zeros((len(idx),), np.int32)
        for row, i in enumerate(idx):
            cond, chunk = pieces[i]
            n = len(chunk) - 1
            tokens[row, :n], targets[row, :n], weights[row, :n] = chunk[:-1], chunk[1:], 1.0
            condition[row] = cond
        batches.append(((tokens, condition), targets, weights))
    return batches


def task_data(config: ConditionedConfig):
    """The task a run trains on, made from its config (seed, sizes, split)."""
    return make_conditioned_task(config.data, seed=config.seed, grouping=config.grouping,
                                 shuffle=config.shuffle, split_ratio=config.split_ratio)
