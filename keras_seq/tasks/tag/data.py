"""Aligned tagging data: CoNLL / CoNLL-U files and ``restore-punct`` derived from any corpus.

Every sentence is a pair ``(tokens, tags)`` of equally long lists of strings.
:func:`make_tagging_task` turns a task spec into a :class:`TaggingData` with train/val/test
sentences, the tag vocabulary and the tagging scheme:

* ``conll:PATH`` — whitespace/tab columns, one token per line, a blank line between
  sentences (:func:`read_conll`); ``conllu:PATH`` — Universal Dependencies CoNLL-U
  (:func:`read_conllu`). The sentences are shuffled with ``seed`` and cut by
  ``split_ratio`` (:func:`keras_seq.data.splits.split_items`; default 90/5/5, ``train
  tag``'s config 80/10/10). ``conll:TRAIN,VAL,TEST`` (three comma-separated
  paths, likewise for ``conllu:``) uses the files' own split instead.
* ``restore-punct`` — punctuation and capitalisation restoration (:func:`restore_punct`)
  built from a corpus (``restore-punct:CORPUS`` or ``corpus``, default the embedded
  ``python-docs``); the task's splits are the corpus's contiguous train/val/test parts
  (:func:`keras_seq.data.splits.split_text`), so ``seed`` plays no role.

Tag format of ``restore-punct``: ``CASE|PUNCT`` for each lower-cased, punctuation-free
input word. ``CASE`` is ``lower`` (no upper-case letter, also words without letters),
``Cap`` (first letter upper case, the others lower: ``Python``, ``I``), ``UPPER`` (at
least two letters, all upper case: ``HTTP``, ``DON'T``) or ``mixed`` (anything else:
``iPhone``, ``McDonald``); ``PUNCT`` is the first of ``. , ? ! : ;`` between this word and
the next (empty if none). So ``"Hello, world."`` gives ``hello world`` tagged
``Cap|,`` ``lower|.``; the most common tag, ``lower|``, is the default tag that metrics
leave out of the F1 averages.

This module does not import TensorFlow.

Example:

>>> restore_punct("Hello, world. Say HI!")
[(['hello', 'world', 'say', 'hi'], ['Cap|,', 'lower|.', 'Cap|', 'UPPER|!'])]
>>> restore_text(['hello', 'world'], ['Cap|,', 'lower|.'])
'Hello, world.'
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from keras_seq.data.corpus import EMBEDDED, load_corpus
from keras_seq.data.splits import DEFAULT_SPLIT, SPLITS, parse_split, split_items
from keras_seq.errors import DataError
from keras_seq.extras import require
from keras_seq.tasks.tag.config import TagConfig

TASKS = ("conll:PATH", "conllu:PATH", "restore-punct")

Sentence = tuple[list[str], list[str]]

# -- restore-punct -------------------------------------------------------------------------
CASES = ("lower", "Cap", "UPPER", "mixed")
PUNCT = ".,?!:;"
PUNCT_DEFAULT_TAG = "lower|"
# A word: word characters (letters, digits, underscore) with apostrophes only inside
# ("don't", "cat's"); every other character (quotes, brackets, dashes, symbols) is dropped,
# except that the punctuation marks in PUNCT are attached to the word before them.
WORD_RE = re.compile(r"\w+(?:'\w+)*")
DEFAULT_MAX_LEN = 40

CONLLU_FIELDS = ("id", "form", "lemma", "upos", "xpos", "feats", "head", "deprel", "deps",
                 "misc")
CONLLU_TAG_FIELDS = ("upos", "xpos", "deprel")
_CONLLU_SPLIT = re.compile(r"\t| {2,}")  # how the conllu package splits a token line
_BIO_TAG = re.compile(r"[BI]-\S.*")


# ------------------------------------------------------------------------------------------
# The data of one task


def detect_scheme(tags) -> str:
    """``"bio"`` if every tag is ``O``, ``B-X`` or ``I-X`` (BIO/IOB1/IOB2) and at least one
    is not ``O``; otherwise ``"plain"`` (IOBES tags such as ``S-X`` count as plain).

    >>> detect_scheme(["O", "B-PER", "I-PER"]), detect_scheme(["NOUN", "VERB"])
    ('bio', 'plain')
    """
    tags = set(tags)
    if tags - {"O"} and all(t == "O" or _BIO_TAG.fullmatch(t) for t in tags):
        return "bio"
    return "plain"


@dataclass
class TaggingData:
    """Train/val/test sentences of a tagging task, with their tags and provenance.

    Args:
        name: the task spec, e.g. ``"conll:eng.txt"`` or ``"restore-punct"``.
        splits: ``{"train": [(tokens, tags), ...], "val": [...], "test": [...]}``.
        tags: sorted tag vocabulary of the training split (filled in when empty).
        scheme: ``"bio"`` or ``"plain"`` (detected from ``tags`` when empty).
        sha256: hex sha256 of the sentences of all splits (computed when empty).
        spec: how the data was made (source, its sha256, seed, split ratio, ...).
        default_tag: the "nothing to report" tag left out of F1 averages: ``"O"`` for
            BIO, ``"lower|"`` for ``restore-punct``, else ``None``.
        unseen_tags: ``{split: {tag: count}}`` for val/test tags missing from ``tags``
            (a model trained on train cannot predict them).
        notes: remarks for the user (unseen tags, files, caps).
    """

    name: str
    splits: dict[str, list[Sentence]]
    tags: list[str] = field(default_factory=list)
    scheme: str = ""
    sha256: str = ""
    spec: dict = field(default_factory=dict)
    default_tag: str | None = None
    unseen_tags: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __post_init__(self):
        unknown = set(self.splits) - set(SPLITS)
        if unknown:
            raise DataError(f"TaggingData {self.name!r}: unknown split(s) {sorted(unknown)}; "
                            f"expected {', '.join(SPLITS)}")
        self.splits = {s: [(list(w), list(t)) for w, t in self.splits.get(s, [])]
                       for s in SPLITS}
        for split, sentences in self.splits.items():
            for i, (tokens, tags) in enumerate(sentences):
                if not tokens or len(tokens) != len(tags):
                    raise DataError(
                        f"TaggingData {self.name!r}: {split} sentence {i} has {len(tokens)} "
                        f"token(s) and {len(tags)} tag(s); expected the same positive number"
                    )
        if not self.splits["train"]:
            raise DataError(f"TaggingData {self.name!r}: the training split is empty; "
                            "expected at least one sentence (use more data or another split)")
        train_tags = {t for _, tags in self.splits["train"] for t in tags}
        if not self.tags:
            self.tags = sorted(train_tags)
        if not self.scheme:
            self.scheme = detect_scheme(self.tags)
        if self.default_tag is None and self.scheme == "bio":
            self.default_tag = "O"
        known = set(self.tags)
        for split in ("val", "test"):
            counts = collections.Counter(t for _, tags in self.splits[split] for t in tags
                                         if t not in known)
            if counts:
                self.unseen_tags[split] = dict(sorted(counts.items()))
                listed = ", ".join(f"{t} ({n})" for t, n in sorted(counts.items())[:10])
                self.notes.append(f"{split} has {sum(counts.values())} token(s) with tags "
                                  f"not seen in train: {listed}")
        if not self.sha256:
            digest = hashlib.sha256()
            for split in SPLITS:
                for tokens, tags in self.splits[split]:
                    digest.update(json.dumps([split, tokens, tags], ensure_ascii=False)
                                  .encode("utf-8") + b"\n")
            self.sha256 = digest.hexdigest()

    @property
    def tag_index(self) -> dict[str, int]:
        """``{tag: id}`` in the order of :attr:`tags`."""
        return {t: i for i, t in enumerate(self.tags)}

    def describe(self) -> dict:
        """Sizes, tags and provenance, for ``data stats``-style output and fingerprints."""
        sizes = {s: {"sentences": len(sents), "tokens": sum(len(w) for w, _ in sents)}
                 for s, sents in self.splits.items()}
        counts = collections.Counter(t for _, tags in self.splits["train"] for t in tags)
        return {"task": self.name, "scheme": self.scheme, "sizes": sizes,
                "num_tags": len(self.tags), "tags": list(self.tags),
                "train_tag_counts": dict(counts.most_common()),
                "default_tag": self.default_tag, "unseen_tags": dict(self.unseen_tags),
                "sha256": self.sha256, "spec": dict(self.spec), "notes": list(self.notes)}


# ------------------------------------------------------------------------------------------
# Files


def _read_text(path: str | Path, kind: str) -> tuple[Path, str, str]:
    """``(path, text, sha256 of the bytes)``; DataError for a missing or non-UTF-8 file."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"no such {kind} file {str(path)!r}; expected a UTF-8 text file")
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{path} is not UTF-8 text ({err}); convert it to UTF-8, e.g. "
                        "`iconv -f latin1 -t utf-8 FILE > FILE.utf8`") from None
    return path, text, hashlib.sha256(raw).hexdigest()


def read_conll(path: str | Path, token_col: int = 0, tag_col: int = -1) -> list[Sentence]:
    """Sentences of a CoNLL-style file (CoNLL-2000/2003 chunking and NER, POS files, ...).

    One token per line with columns separated by whitespace (spaces or tabs); a blank
    line ends a sentence; ``-DOCSTART-`` lines are skipped. Every non-blank line needs the
    token and tag columns (Python indices: ``tag_col=-1`` is the last column).

    Returns:
        ``[(tokens, tags), ...]`` in file order.

    Raises:
        DataError: missing or non-UTF-8 file, no sentences, or a line with too few
            columns (the message names the file and the 1-based line number).
    """
    path, text, _ = _read_text(path, "CoNLL")
    need = max(_columns_needed(token_col), _columns_needed(tag_col), 2)
    if _columns_needed(token_col) == _columns_needed(tag_col) and (token_col < 0) == (
            tag_col < 0):
        raise DataError(f"read_conll: token_col={token_col} and tag_col={tag_col} are the "
                        "same column; expected two different columns")
    sentences: list[Sentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        cols = line.split()
        if not cols or cols[0] == "-DOCSTART-":
            if tokens:
                sentences.append((tokens, tags))
                tokens, tags = [], []
            continue
        if len(cols) < need:
            raise DataError(
                f"{path}:{lineno}: {len(cols)} column(s), expected at least {need} "
                f"whitespace-separated columns (token column {token_col}, tag column "
                f"{tag_col}); a blank line separates sentences: {line[:60]!r}"
            )
        tokens.append(cols[token_col])
        tags.append(cols[tag_col])
    if tokens:
        sentences.append((tokens, tags))
    if not sentences:
        raise DataError(f"{path} holds no sentences; expected one 'token ... tag' line per "
                        "token and a blank line between sentences")
    return sentences


def _columns_needed(col: int) -> int:
    return col + 1 if col >= 0 else -col


def read_conllu(path: str | Path, tag_field: str = "upos") -> list[Sentence]:
    """Sentences of a CoNLL-U file (Universal Dependencies), tagged with one field.

    Each token line is parsed with the ``conllu`` package (``conllu.parser.parse_line``,
    line by line so that an error can name its line). Comment lines (``#``) are skipped,
    and so are multi-word token ranges (ids like ``1-2``: the surface form ``don't`` whose
    words ``do`` and ``n't`` follow) and empty nodes (ids like ``1.1``): the tokens are the
    syntactic words.

    Args:
        path: the ``.conllu`` file.
        tag_field: ``"upos"`` (universal POS, default), ``"xpos"`` or ``"deprel"``.

    Raises:
        DataError: missing file, no sentences, a line without the 10 tab-separated fields,
            a field the ``conllu`` parser rejects, or a word without a ``tag_field`` value
            (``_``); the message names the file and the 1-based line number.
    """
    conllu = require("conllu", "conllu", "reading CoNLL-U (--data conllu:FILE)")
    # lazy: the conllu package is there once require() returned
    from conllu.exceptions import ParseException

    if tag_field not in CONLLU_TAG_FIELDS:
        raise DataError(f"read_conllu: received tag_field={tag_field!r}; expected one of "
                        f"{', '.join(CONLLU_TAG_FIELDS)}")
    path, text, _ = _read_text(path, "CoNLL-U")
    parsers = dict(conllu.parser.DEFAULT_FIELD_PARSERS)  # parse_line adds aliases to it
    sentences: list[Sentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            if tokens:
                sentences.append((tokens, tags))
                tokens, tags = [], []
            continue
        if line.startswith("#"):
            continue
        fields = _CONLLU_SPLIT.split(line)
        if len(fields) != len(CONLLU_FIELDS):
            raise DataError(
                f"{path}:{lineno}: {len(fields)} field(s), expected 10 tab-separated CoNLL-U "
                f"fields ({' '.join(f.upper() for f in CONLLU_FIELDS)}); use _ for an "
                f"empty field: {line[:60]!r}"
            )
        try:
            token = conllu.parser.parse_line(line, CONLLU_FIELDS, parsers)
        except ParseException as err:
            raise DataError(f"{path}:{lineno}: not a valid CoNLL-U token line ({err}): "
                            f"{line[:60]!r}") from None
        if not isinstance(token["id"], int):  # (1, '-', 2) range or (1, '.', 1) empty node
            continue
        tag = token[tag_field]
        if tag in (None, "_", ""):
            raise DataError(f"{path}:{lineno}: word {token['form']!r} has no {tag_field} "
                            f"(it is '_'); expected a tag on every word. Pick another "
                            f"tag_field ({', '.join(CONLLU_TAG_FIELDS)})")
        tokens.append(token["form"])
        tags.append(tag)
    if tokens:
        sentences.append((tokens, tags))
    if not sentences:
        raise DataError(f"{path} holds no CoNLL-U sentences; expected token lines with 10 "
                        "tab-separated fields and a blank line after each sentence")
    return sentences


# ------------------------------------------------------------------------------------------
# restore-punct


def case_class(word: str) -> str:
    """Capitalisation of ``word``: ``lower``, ``Cap``, ``UPPER`` or ``mixed`` (see module doc).

    >>> [case_class(w) for w in ("cat", "Cat", "CAT", "I", "iPhone", "42", "HTTP2")]
    ['lower', 'Cap', 'UPPER', 'Cap', 'mixed', 'lower', 'UPPER']
    """
    letters = [c for c in word if c.isalpha()]
    if not any(c.isupper() for c in letters):
        return "lower"
    if len(letters) >= 2 and not any(c.islower() for c in letters):
        return "UPPER"
    if letters[0].isupper() and not any(c.isupper() for c in letters[1:]):
        return "Cap"
    return "mixed"


def punct_tags(line: str) -> Sentence:
    """Words of one line (lower-cased, punctuation removed) and their ``CASE|PUNCT`` tags.

    >>> punct_tags('Use "str()", not repr(); see PEP 8.')
    (['use', 'str', 'not', 'repr', 'see', 'pep', '8'], \
['Cap|', 'lower|,', 'lower|', 'lower|;', 'lower|', 'UPPER|', 'lower|.'])
    """
    matches = list(WORD_RE.finditer(line))
    words, tags = [], []
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        gap = line[match.end():end]
        punct = next((c for c in gap if c in PUNCT), "")
        words.append(match.group().lower())
        tags.append(f"{case_class(match.group())}|{punct}")
    return words, tags


def restore_punct(text: str, max_len: int = DEFAULT_MAX_LEN) -> list[Sentence]:
    """Punctuation/case restoration sentences from raw text.

    Each line (the embedded corpus has one paragraph per line) is split into words with
    :func:`punct_tags`, and a line of more than ``max_len`` words is cut into the fewest
    consecutive chunks of at most ``max_len`` words, of near-equal length. Chunks do not
    follow sentence boundaries, so a chunk may start mid-sentence and hold several
    sentence ends: the model has to find them. Lines without words are skipped.

    Returns:
        ``[(words, tags), ...]`` in text order.
    """
    if not isinstance(max_len, int) or isinstance(max_len, bool) or max_len < 1:
        raise DataError(f"restore_punct: received max_len={max_len!r}; expected a positive "
                        "integer (words per sentence), e.g. 40")
    sentences = []
    for line in text.splitlines():
        words, tags = punct_tags(line)
        if not words:
            continue
        pieces = -(-len(words) // max_len)  # ceil
        bounds = [len(words) * k // pieces for k in range(pieces + 1)]
        for a, b in zip(bounds[:-1], bounds[1:]):
            sentences.append((words[a:b], tags[a:b]))
    return sentences


def restore_text(words: list[str], tags: list[str]) -> str:
    """Apply ``CASE|PUNCT`` tags to words: the inverse of :func:`punct_tags` up to ``mixed``
    case (left as given) and dropped symbols.

    >>> restore_text(["i", "like", "numpy", "ok"], ["Cap|", "lower|", "mixed|,", "UPPER|?"])
    'I like numpy, OK?'
    """
    if len(words) != len(tags):
        raise DataError(f"restore_text: {len(words)} word(s) but {len(tags)} tag(s); "
                        "expected one tag per word")
    out = []
    for word, tag in zip(words, tags):
        case, sep, punct = tag.partition("|")
        if not sep or case not in CASES:
            raise DataError(f"restore_text: received tag {tag!r}; expected CASE|PUNCT with "
                            f"CASE in {', '.join(CASES)}, e.g. 'Cap|.' or 'lower|'")
        if case == "UPPER":
            word = word.upper()
        elif case == "Cap":
            first = next((i for i, c in enumerate(word) if c.isalpha()), None)
            if first is not None:
                word = word[:first] + word[first].upper() + word[first + 1:]
        out.append(word + punct)
    return " ".join(out)


# ------------------------------------------------------------------------------------------
# Task specs


def _cap_splits(splits: dict[str, list[Sentence]], max_sentences: int,
                fractions) -> dict[str, list[Sentence]]:
    """Keep the first ``max(1, round(max_sentences × share))`` sentences of each split."""
    return {s: sents[:max(1, round(max_sentences * f))] if f > 0 else sents[:0]
            for (s, sents), f in zip(splits.items(), fractions)}


def make_tagging_task(spec: str, seed: int = 0, split_ratio: str = DEFAULT_SPLIT,
                      max_sentences: int | None = None, corpus: str | None = None,
                      data_dir: str | Path | None = None, max_len: int = DEFAULT_MAX_LEN,
                      token_col: int = 0, tag_col: int = -1,
                      tag_field: str = "upos") -> TaggingData:
    """Train/val/test tagging data for ``conll:PATH``, ``conllu:PATH`` or ``restore-punct``.

    Args:
        spec: ``conll:PATH`` / ``conllu:PATH`` (one file, split by ``split_ratio`` after a
            seeded shuffle of its sentences; ``conll:TRAIN,VAL,TEST`` uses three files as
            the splits) or ``restore-punct`` (``restore-punct:CORPUS`` is short for
            ``corpus=CORPUS``).
        seed: shuffles the sentences of a single file before splitting (same seed → same
            split). ``restore-punct`` does not use it.
        split_ratio: train/val/test shares (default 90/5/5; see
            :func:`keras_seq.data.splits.parse_split`); for ``restore-punct`` the corpus
            is cut into contiguous parts by it (see :func:`keras_seq.data.corpus.load_corpus`).
        max_sentences: cap on the number of sentences in all splits together: the first
            ``max_sentences`` of a single file (before splitting), else the first
            ``round(max_sentences × share)`` (at least 1) of each split.
        corpus: ``restore-punct`` only: the corpus (``python-docs`` by default, a registry
            name, a text file or a directory; see ``load_corpus``).
        data_dir: extra folder searched for registry corpora.
        max_len: ``restore-punct`` only: words per sentence (longer lines are cut).
        token_col, tag_col: ``conll`` only: columns of the token and the tag.
        tag_field: ``conllu`` only: ``upos``, ``xpos`` or ``deprel``.

    Raises:
        DataError: unknown spec, unreadable data, or too little of it to split.
    """
    spec = str(spec)
    fractions = parse_split(split_ratio)
    if max_sentences is not None and (not isinstance(max_sentences, int) or max_sentences < 1):
        raise DataError(f"make_tagging_task: received max_sentences={max_sentences!r}; "
                        "expected a positive integer or None (no cap)")
    info: dict = {"task": spec, "seed": seed, "split_ratio": split_ratio,
                  "max_sentences": max_sentences}
    notes: list[str] = []
    default_tag = None
    kind, _, rest = spec.partition(":")
    if kind in ("conll", "conllu") and rest:
        if kind == "conll":
            info.update(token_col=token_col, tag_col=tag_col)
        else:
            info.update(tag_field=tag_field)
        read = functools.partial(_read_tagged, kind, token_col=token_col, tag_col=tag_col,
                                 tag_field=tag_field)
        splits = _file_splits(spec, kind, rest, read, fractions, seed, max_sentences, info,
                              notes)
    elif kind == "restore-punct":
        splits = _restore_punct_splits(spec, rest, corpus, data_dir, split_ratio, fractions,
                                       max_len, max_sentences, info, notes)
        default_tag = PUNCT_DEFAULT_TAG
    else:
        raise DataError(f"unknown tagging task {spec!r}; expected one of {', '.join(TASKS)} "
                        "(e.g. conll:data/eng.train or conllu:en_ewt-ud-train.conllu)")
    for split, sents in splits.items():
        if split != "train" and not sents and fractions[SPLITS.index(split)] > 0:
            notes.append(f"the {split} split is empty")
    return TaggingData(spec, splits, spec=info, default_tag=default_tag, notes=notes)


def _read_tagged(kind: str, path, token_col: int, tag_col: int,
                 tag_field: str) -> list[Sentence]:
    """The sentences of one ``conll`` (:func:`read_conll`) or ``conllu`` file."""
    if kind == "conll":
        return read_conll(path, token_col, tag_col)
    return read_conllu(path, tag_field)


def _file_splits(spec: str, kind: str, rest: str, read, fractions, seed: int,
                 max_sentences: int | None, info: dict,
                 notes: list[str]) -> dict[str, list[Sentence]]:
    """The splits of ``conll:``/``conllu:`` ``rest`` (one file, shuffled and split, or
    three files); records the files' sha256 (and "files" as the split) in ``info`` and a
    cap in ``notes``."""
    paths = [p.strip() for p in rest.split(",")] if "," in rest else [rest]
    if len(paths) not in (1, 3) or not all(paths):
        raise DataError(f"{spec!r}: expected one file ({kind}:PATH) or three "
                        f"comma-separated files ({kind}:TRAIN,VAL,TEST)")
    info["sources"] = {p: _read_text(p, kind)[2] for p in paths}  # sha256 of each file
    if len(paths) == 1:
        sentences = read(paths[0])
        if max_sentences is not None and len(sentences) > max_sentences:
            notes.append(f"kept the first {max_sentences} of {len(sentences)} sentences")
            sentences = sentences[:max_sentences]
        return split_items(sentences, fractions, seed=seed)
    splits = dict(zip(SPLITS, (read(p) for p in paths)))
    info["split_ratio"] = "files"
    if max_sentences is not None:
        total = sum(len(s) for s in splits.values())
        splits = _cap_splits(splits, max_sentences,
                             [len(s) / total for s in splits.values()])
    return splits


def _restore_punct_splits(spec: str, rest: str, corpus: str | None, data_dir, split_ratio,
                          fractions, max_len: int, max_sentences: int | None, info: dict,
                          notes: list[str]) -> dict[str, list[Sentence]]:
    """The splits of ``restore-punct`` (``rest``: the corpus named in the spec) from the
    corpus's splits; records the corpus in ``info`` and ``notes``."""
    if rest and corpus is not None and corpus != rest:
        raise DataError(f"{spec!r} names corpus {rest!r} but corpus={corpus!r}; give one")
    text = load_corpus(rest or corpus or EMBEDDED, data_dir=data_dir, split=split_ratio)
    splits = {s: restore_punct(text.text(s), max_len) for s in SPLITS}
    if max_sentences is not None:
        splits = _cap_splits(splits, max_sentences, fractions)
    info.update(corpus=text.name, corpus_sha256=text.sha256, max_len=max_len)
    notes.append(f"derived from corpus {text.name!r}: words lower-cased without "
                 "punctuation; tag = CASE|PUNCT of the original word")
    return splits


def task_data(config: TagConfig):
    """The task a run trains on, made from its config (seed, sizes, split)."""
    return make_tagging_task(config.data, seed=config.seed, split_ratio=config.split_ratio,
                             max_sentences=config.max_sentences,
                             data_dir=config.data_dir, max_len=config.max_len,
                             token_col=config.token_col, tag_col=config.tag_col,
                             tag_field=config.tag_field)
