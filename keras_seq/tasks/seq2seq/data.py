"""Parallel data for sequence-to-sequence models: built-in tasks and user TSV files.

Built-in, offline and deterministic by seed:

* ``dates`` — human-written dates in ~30 formats ("tue 3 mar 98", "March 3rd, 1998",
  "03.03.1998", "the 3rd of March 1998", ...) → ISO ``YYYY-MM-DD``. Sources range from
  6 to ~40 characters. The splits hold *disjoint calendar dates*, so the test set asks
  for dates never seen in training in any format. Ambiguous forms follow one fixed rule
  each: ``a/b/yyyy`` is month/day (US), ``a.b.yyyy`` and ``a-b-yyyy`` day.month, two-digit
  years ``50``–``99`` are 19xx and ``00``–``49`` 20xx.
* ``reverse`` / ``copy`` — random letter strings and their reversal (or copy), lengths
  drawn uniformly from ``[min_len, max_len]``.

User data: :func:`load_tsv_pairs` reads ``source<TAB>target[<TAB>...]`` lines (e.g. the
Anki ``spa.txt`` file: English, Spanish, attribution), cut into splits by the shared rule
(:func:`keras_seq.data.splits.split_items`, seeded shuffle, ``split_ratio`` 90/5/5).

A run's config goes to pairs with :func:`task_data`, to tokenizers with
:func:`fit_tokenizers`, to id pairs with :func:`encode_pairs` and to teacher-forcing
batches with :func:`make_batches`.

Every pair list is ``[(source, target), ...]`` of plain strings; tokenizers from
:mod:`keras_seq.data.tokenizers` turn them into ids. This module does not import
TensorFlow.

Example:

>>> pairs = date_pairs(3, seed=0)
>>> len(pairs), all(len(t) == 10 for _, t in pairs)
(3, True)
>>> reverse_pairs(2, seed=1, min_len=3, max_len=3)[0][1] == \\
...     reverse_pairs(2, seed=1, min_len=3, max_len=3)[0][0][::-1]
True
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import random
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from keras_seq.data.splits import DEFAULT_SPLIT, SPLITS, split_items
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.errors import DataError
from keras_seq.tasks.seq2seq.config import Seq2SeqConfig

TASKS = ("dates", "reverse", "copy")
MONTHS = ["january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december"]
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def _ordinal(n: int) -> str:
    if 11 <= n % 100 <= 13:
        return f"{n}th"
    return f"{n}{ {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _yy(year: int) -> str:
    return f"{year % 100:02d}"


# Each format: date -> human string. Names are for tests and docs.
def _formats():
    def mon(d):
        return MONTHS[d.month - 1]

    def mon3(d):
        return MONTHS[d.month - 1][:3]

    def wd(d):
        return WEEKDAYS[d.weekday()]

    def wd3(d):
        return WEEKDAYS[d.weekday()][:3]

    return {
        "iso": lambda d: d.isoformat(),
        "compact": lambda d: f"{d.year}{d.month:02d}{d.day:02d}",
        "us_slash": lambda d: f"{d.month}/{d.day}/{d.year}",
        "us_slash_pad": lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",
        "us_slash_yy": lambda d: f"{d.month}/{d.day}/{_yy(d.year)}",
        "eu_dot": lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",
        "eu_dot_short": lambda d: f"{d.day}.{d.month}.{_yy(d.year)}",
        "eu_dash": lambda d: f"{d.day}-{d.month}-{d.year}",
        "ymd_slash": lambda d: f"{d.year}/{d.month}/{d.day}",
        "d_mon_yyyy": lambda d: f"{d.day} {mon3(d)} {d.year}",
        "d_mon_yy": lambda d: f"{d.day}-{mon3(d)}-{_yy(d.year)}",
        "d_month_yyyy": lambda d: f"{d.day} {mon(d)} {d.year}",
        "month_d_yyyy": lambda d: f"{mon(d)} {d.day}, {d.year}",
        "Month_d_yyyy": lambda d: f"{mon(d).capitalize()} {d.day} {d.year}",
        "MON_D_YYYY": lambda d: f"{mon3(d).upper()} {d.day} {d.year}",
        "mon_dth_yyyy": lambda d: f"{mon3(d)} {_ordinal(d.day)} {d.year}",
        "Month_dth_yyyy": lambda d: f"{mon(d).capitalize()} {_ordinal(d.day)}, {d.year}",
        "dth_of_month": lambda d: f"the {_ordinal(d.day)} of {mon(d)} {d.year}",
        "dth_of_Month_comma": lambda d: f"the {_ordinal(d.day)} of {mon(d).capitalize()}, "
                                        f"{d.year}",
        "wd_d_month_yyyy": lambda d: f"{wd(d)} {d.day} {mon(d)} {d.year}",
        "Wd_month_dth": lambda d: f"{wd(d).capitalize()}, {mon(d).capitalize()} "
                                  f"{_ordinal(d.day)}, {d.year}",
        "wd3_d_mon_yy": lambda d: f"{wd3(d)} {d.day} {mon3(d)} {_yy(d.year)}",
        "Wd3_comma": lambda d: f"{wd3(d).capitalize()}, {d.day} {mon3(d).capitalize()} "
                               f"{d.year}",
        "WD_UPPER": lambda d: f"{wd(d).upper()} {d.day} {mon(d).upper()} {d.year}",
        "yyyy_month_d": lambda d: f"{d.year} {mon(d)} {d.day}",
        "d_mon_apos_yy": lambda d: f"{d.day} {mon3(d)} '{_yy(d.year)}",
        "d_of_month": lambda d: f"{d.day} of {mon(d)}, {d.year}",
        "wd_the_dth_of": lambda d: f"{wd(d)}, the {_ordinal(d.day)} of {mon(d)}, {d.year}",
    }


DATE_FORMATS = _formats()
_DATE_SPLIT_MOD = 20  # dates with ordinal % 20 == 0 are test, == 1 val, the rest train


def _dates_in_split(split: str, first: dt.date, last: dt.date) -> list[dt.date]:
    wanted = {"test": {0}, "val": {1}, "train": set(range(2, _DATE_SPLIT_MOD))}[split]
    out, day = [], first
    while day <= last:
        if day.toordinal() % _DATE_SPLIT_MOD in wanted:
            out.append(day)
        day += dt.timedelta(days=1)
    return out


def date_pairs(n: int, seed: int = 0, split: str = "train", min_year: int = 1950,
               max_year: int = 2049, formats: list[str] | None = None) -> list[tuple[str, str]]:
    """``n`` (human date, ISO date) pairs; the same ``seed`` gives the same pairs.

    Args:
        n: number of pairs.
        seed: random seed.
        split: ``train``, ``val`` or ``test``; the three use disjoint calendar dates.
        min_year, max_year: range of years (two-digit forms assume 1950–2049).
        formats: names from :data:`DATE_FORMATS` (default: all of them).
    """
    _check_count(n)
    if split not in SPLITS:
        raise DataError(f"split must be train, val or test; got {split!r}")
    names = list(formats or DATE_FORMATS)
    unknown = [f for f in names if f not in DATE_FORMATS]
    if unknown:
        raise DataError(f"unknown date format(s) {unknown}; expected names from "
                        f"{', '.join(DATE_FORMATS)}")
    if not 1 <= min_year <= max_year <= 9999:
        raise DataError(f"need 1 ≤ min_year ≤ max_year ≤ 9999; got {min_year}, {max_year}")
    days = _dates_in_split(split, dt.date(min_year, 1, 1), dt.date(max_year, 12, 31))
    rng = random.Random(f"dates:{seed}:{split}")
    pairs = []
    for _ in range(n):
        day = rng.choice(days)
        pairs.append((DATE_FORMATS[rng.choice(names)](day), day.isoformat()))
    return pairs


def reverse_pairs(n: int, seed: int = 0, min_len: int = 1, max_len: int = 20,
                  alphabet: str = LETTERS, copy: bool = False) -> list[tuple[str, str]]:
    """``n`` (string, reversed string) pairs — or (string, string) with ``copy=True``.

    Lengths are uniform in ``[min_len, max_len]``; symbols uniform over ``alphabet``.
    """
    _check_count(n)
    if not 1 <= min_len <= max_len:
        raise DataError(f"need 1 ≤ min_len ≤ max_len; got min_len={min_len}, max_len={max_len}")
    if len(set(alphabet)) < 2:
        raise DataError(f"alphabet needs at least 2 distinct symbols; got {alphabet!r}")
    rng = random.Random(f"{'copy' if copy else 'reverse'}:{seed}")
    pairs = []
    for _ in range(n):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(min_len, max_len)))
        pairs.append((s, s if copy else s[::-1]))
    return pairs


def _check_count(n) -> None:
    if not isinstance(n, int) or n < 1:
        raise DataError(f"number of pairs must be a positive integer; got {n!r}")


# ----------------------------------------------------------------------------------------
# User-supplied parallel text


def load_tsv_pairs(path: str | Path, source_col: int = 0, target_col: int = 1,
                   max_pairs: int | None = None, lower: bool = False) -> list[tuple[str, str]]:
    """Read ``source<TAB>target`` pairs from a UTF-8 file (extra columns are ignored).

    Blank lines are skipped; a non-blank line without enough columns is an error that
    names the line.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise DataError(f"no such parallel-text file {str(path)!r}; expected a UTF-8 TSV "
                        "file with source<TAB>target lines")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{path} is not UTF-8 text ({err}); convert it to UTF-8") from None
    pairs = []
    need = max(source_col, target_col) + 1
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < need:
            raise DataError(
                f"{path}:{lineno} has {len(cols)} tab-separated column(s), expected at least "
                f"{need} (source column {source_col}, target column {target_col}): {line[:60]!r}"
            )
        src, tgt = cols[source_col].strip(), cols[target_col].strip()
        if src and tgt:
            pairs.append((src.lower(), tgt.lower()) if lower else (src, tgt))
        if max_pairs and len(pairs) >= max_pairs:
            break
    if not pairs:
        raise DataError(f"{path} holds no source<TAB>target pairs")
    return pairs


def split_pairs(pairs, seed: int = 0, split_ratio=DEFAULT_SPLIT) -> dict:
    """Shuffle ``pairs`` with ``seed`` and cut ``{"train", "val", "test"}`` by ``split_ratio``
    (:func:`keras_seq.data.splits.split_items`)."""
    return split_items(pairs, split_ratio, seed=seed)


# Anki's Spanish–English sentence pairs, as used by the TensorFlow NMT tutorial. No checksum
# of spa-eng.zip is published, so keras-seq does not download it (an unpinned download could
# change under us): place the file yourself and keras-seq finds it.
ANKI_SPA_ENG = {
    "name": "anki-spa-eng",
    "description": "Anki/Tatoeba English–Spanish sentence pairs (spa.txt: English<TAB>Spanish)",
    "fname": "spa-eng.zip",
    "origin": "http://storage.googleapis.com/download.tensorflow.org/data/spa-eng.zip",
    "member": "spa-eng/spa.txt",
}


def anki_spa_eng_path(data_dir: str | Path | None = None) -> Path:
    """Local path of ``spa.txt``, from a copy in ``data_dir``, ``$KERAS_SEQ_DATA_DIR`` or the
    Keras cache (``spa.txt``, ``spa-eng/spa.txt`` or ``spa-eng.zip``).

    Raises:
        DataError: no local copy; the message names the file, where to get it and where
            to put it.
    """
    dirs = [Path(d) for d in (data_dir, os.environ.get("KERAS_SEQ_DATA_DIR")) if d]
    keras_home = os.environ.get("KERAS_HOME", os.path.join(os.path.expanduser("~"), ".keras"))
    dirs.append(Path(keras_home) / "datasets")
    for d in dirs:
        for candidate in (d / "spa.txt", d / "spa-eng" / "spa.txt"):
            if candidate.is_file():
                return candidate
    zip_path = next((d / ANKI_SPA_ENG["fname"] for d in dirs
                     if (d / ANKI_SPA_ENG["fname"]).is_file()), None)
    if zip_path is None:
        raise DataError(
            f"anki-spa-eng needs {ANKI_SPA_ENG['fname']} (from {ANKI_SPA_ENG['origin']}) or "
            f"its spa.txt in one of: {', '.join(map(str, dirs))}. keras-seq does not download "
            "it because no checksum is published to pin; or pass --data tsv:PATH."
        )
    out = zip_path.parent / "spa-eng" / "spa.txt"
    if not out.is_file():
        with zipfile.ZipFile(zip_path) as archive:
            archive.extract(ANKI_SPA_ENG["member"], zip_path.parent)
    return out


# ----------------------------------------------------------------------------------------
# One description of "which data", shared by training, evaluation and the CLI


@dataclass
class TaskData:
    """The train/val/test pairs of one task, with what is needed to reproduce them."""

    name: str
    splits: dict[str, list[tuple[str, str]]]
    spec: dict = field(default_factory=dict)

    def describe(self) -> dict:
        sizes = {s: len(p) for s, p in self.splits.items()}
        blob = "\n".join(f"{a}\t{b}" for s in SPLITS
                         for a, b in self.splits[s]).encode("utf-8")
        return {"task": self.name, "sizes": sizes, "spec": dict(self.spec),
                "sha256": hashlib.sha256(blob).hexdigest()}


def make_task(task: str, seed: int = 0, train_size: int = 20000, val_size: int = 500,
              test_size: int = 2000, min_len: int = 1, max_len: int = 20,
              source_col: int = 0, target_col: int = 1, max_pairs: int | None = None,
              data_dir: str | None = None, split_ratio=DEFAULT_SPLIT) -> TaskData:
    """Train/val/test pairs for ``dates``, ``reverse``, ``copy``, ``anki-spa-eng`` or ``tsv:PATH``.

    Generated tasks draw each split with its own seed, so val/test never depend on the
    training size. TSV data is shuffled with ``seed`` and cut by ``split_ratio`` (default
    90/5/5; ``val_size`` and ``test_size`` cap the held-out parts, ``max_pairs`` the file).
    """
    spec = {"task": task, "seed": seed}
    if task == "dates":
        splits = {s: date_pairs(n, seed=seed, split=s)
                  for s, n in (("train", train_size), ("val", val_size), ("test", test_size))}
        spec.update(train_size=train_size, val_size=val_size, test_size=test_size)
    elif task in ("reverse", "copy"):
        copy = task == "copy"
        splits = {
            s: reverse_pairs(n, seed=seed * 1000 + k, min_len=min_len, max_len=max_len, copy=copy)
            for k, (s, n) in enumerate((("train", train_size), ("val", val_size),
                                        ("test", test_size)))
        }
        spec.update(train_size=train_size, val_size=val_size, test_size=test_size,
                    min_len=min_len, max_len=max_len)
    elif task == "anki-spa-eng" or task.startswith("tsv:"):
        path = anki_spa_eng_path(data_dir) if task == "anki-spa-eng" else Path(task[4:])
        pairs = load_tsv_pairs(path, source_col, target_col, max_pairs=max_pairs)
        splits = split_pairs(pairs, seed=seed, split_ratio=split_ratio)
        splits["val"] = splits["val"][:val_size]
        splits["test"] = splits["test"][:test_size]
        spec.update(path=str(path), source_col=source_col, target_col=target_col,
                    max_pairs=max_pairs, val_size=val_size, test_size=test_size,
                    split_ratio=split_ratio)
    else:
        raise DataError(f"unknown seq2seq task {task!r}; expected dates, reverse, copy, "
                        "anki-spa-eng or tsv:PATH (a source<TAB>target file)")
    return TaskData(task, splits, spec)


# ----------------------------------------------------------------------------------------
# From a config to id batches


def task_data(config: Seq2SeqConfig) -> TaskData:
    """The pairs of a run's ``config.data``, re-created from its seed (or read from TSV)."""
    return make_task(config.data, seed=config.seed, train_size=config.train_size,
                     val_size=config.val_size, test_size=config.test_size,
                     min_len=config.min_len, max_len=config.max_len,
                     source_col=config.source_col, target_col=config.target_col,
                     max_pairs=config.max_pairs, data_dir=config.data_dir,
                     split_ratio=config.split_ratio)


def fit_tokenizers(config: Seq2SeqConfig, pairs):
    """Source and target tokenizers of ``config.tokenizer``, fitted on ``pairs``."""
    def fit(texts):
        options = {"max_vocab": config.max_vocab}
        if config.tokenizer == "subword":
            options = {"vocab_size": config.max_vocab or 8000}
        return make_tokenizer(config.tokenizer, **options).fit("\n".join(texts) + "\n")

    return fit([s for s, _ in pairs]), fit([t for _, t in pairs])


def encode_pairs(pairs, src_tok, tgt_tok, max_source_len=None, max_target_len=None):
    """Id arrays of each pair; pairs over the limits or with an empty side are dropped."""
    out = []
    for s, t in pairs:
        s_ids = src_tok.encode(" ".join(s.split("\n")))
        t_ids = tgt_tok.encode(" ".join(t.split("\n")))
        if not len(s_ids) or not len(t_ids):
            continue
        if (max_source_len and len(s_ids) > max_source_len) or \
                (max_target_len and len(t_ids) > max_target_len):
            continue
        out.append((s_ids, t_ids, s, t))
    return out


def make_batches(encoded, batch_size: int, bos: int, eos: int, seed: int | None = 0):
    """Length-bucketed teacher-forcing batches ``((src, dec_in), dec_out, weights)``."""
    order = np.arange(len(encoded))
    if seed is not None:
        np.random.default_rng(seed).shuffle(order)
    order = sorted(order, key=lambda i: len(encoded[i][0]))  # stable: random within a length
    batches = []
    for start in range(0, len(order), batch_size):
        idx = order[start:start + batch_size]
        S = max(len(encoded[i][0]) for i in idx)
        T = max(len(encoded[i][1]) for i in idx) + 1
        src = np.zeros((len(idx), S), np.int32)
        dec_in = np.zeros((len(idx), T), np.int32)
        dec_out = np.zeros((len(idx), T), np.int32)
        w = np.zeros((len(idx), T), np.float32)
        for row, i in enumerate(idx):
            s, t = encoded[i][0], encoded[i][1]
            src[row, :len(s)] = s
            dec_in[row, 0] = bos
            dec_in[row, 1:len(t) + 1] = t
            dec_out[row, :len(t)] = t
            dec_out[row, len(t)] = eos
            w[row, :len(t) + 1] = 1.0
        batches.append(((src, dec_in), dec_out, w))
    return batches
