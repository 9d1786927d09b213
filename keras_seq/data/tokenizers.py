"""Tokenizers: ``char``, ``word`` and ``subword`` (WordPiece via tensorflow-text).

Every tokenizer has the same surface: ``fit(train_text)``, ``encode(text) -> ids``,
``decode(ids) -> text``, ``save(dir)`` / :func:`load_tokenizer`, a ``fingerprint`` that
changes whenever the tokens a model sees would change, and ``tf_encode(strings)``, an
in-graph (``tf.string`` → ids) path for exported models that take raw text.

Conventions shared by all kinds:

* id 0 is ``<pad>`` (never a real token, so ``mask_zero`` works) and id 1 is ``<unk>``;
* ``word`` and ``subword`` put ``<eos>`` after every non-blank line (the PTB convention);
  blank lines produce nothing; ``char`` keeps ``"\\n"`` as an ordinary character;
* word splitting: lower-case (option ``lower``), then every character that is not a
  letter, digit, underscore, apostrophe or ASCII whitespace becomes a token of its own
  (``"don't stop!"`` → ``don't``, ``stop``, ``!``), then split on ASCII whitespace; a
  literal ``<unk>`` in the text (as in PTB) stays one token; the control characters
  U+001E and U+001F count as whitespace (keras-seq uses them as markers inside). The
  Python and in-graph paths apply the same rule and are tested to agree;
* input must be a ``str`` of valid Unicode: a lone surrogate (``"\\ud800"``, what
  ``errors="surrogateescape"`` decoding leaves) raises :class:`DataError`, never a
  ``UnicodeEncodeError`` later.

What survives ``decode(encode(text))`` (the round trip the reliability campaign checks):

* ``char``: ``text`` itself, each character outside the vocabulary written ``<unk>``;
* ``word``: the tokens joined by one space, ``"\\n"`` after each line that has one
  (blank lines and extra whitespace go; lower-cased with ``lower``), unknown words as
  ``<unk>``; encoding that again gives the same ids;
* ``subword``: the same as ``word``, with an unknown word (one WordPiece cannot spell)
  as ``<unk>``.

Importing this module does not import TensorFlow; ``subword`` and ``tf_encode`` do (on
any Keras backend); without TensorFlow or tensorflow-text, ``subword`` says so in one line.

Example:

>>> tok = make_tokenizer("word").fit("The cat sat.\\nThe dog sat!\\n")
>>> tok.tokenize_lines("the cat ran.")
[['the', 'cat', 'ran', '.']]
>>> tok.decode(tok.encode("The cat ran.\\n"))
'the cat <unk> .\\n'
"""

from __future__ import annotations

import collections
import hashlib
import inspect
import itertools
import json
import re
from pathlib import Path

import numpy as np

from keras_seq.atomic import write_text_atomic
from keras_seq.backend import require_tensorflow
from keras_seq.errors import DataError
from keras_seq.extras import require

PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"
FORMAT = "keras-seq-tokenizer"
FILENAME = "tokenizer.json"

# ASCII whitespace, written out so Python's re and TensorFlow's RE2 agree exactly.
_WS = " \\t\\n\\r\\f\\v"
_LINE_BREAK = "\x1e"  # record separator: stands for a line break between splitting steps
_UNK_MARK = "\x1f"  # unit separator: stands for a literal "<unk>" already in the text (PTB)
_PY_PUNCT = re.compile(rf"[^\w{_WS}']")
_RE2_PUNCT = rf"[^\pL\pN_{_WS}']"
_PY_BREAKS = re.compile(rf"[{_WS}]*\n[{_WS}]*")
_RE2_BREAKS = rf"[{_WS}]*\n[{_WS}]*"
_PY_LEADING = re.compile(rf"^[{_WS}]+")
_PY_SPLIT = re.compile(rf"[{_WS}]+")
_MARKERS = re.compile(r"[\x1e\x1f]")  # the two markers above: whitespace when in the text
_SURROGATE = re.compile("[\ud800-\udfff]")

# The fast word path (:func:`_word_bytes`) works on UTF-8 bytes, where ``bytes.split()``
# splits on exactly the ASCII whitespace of the rule. A non-ASCII character is punctuation
# when it is not a word character; an ASCII one when it is none of [A-Za-z0-9_'] and
# ASCII whitespace (the two markers count as whitespace: they become spaces first).
_NON_ASCII_PUNCT = re.compile(r"[^\x00-\x7f\w]")
_WS_BYTES = b" \t\n\r\x0b\x0c"
# one table, applied at once: the markers in the text become spaces, line breaks markers
_BYTE_TABLE = bytes.maketrans(b"\x1e\x1f\n", b"  \x1e")
_BREAK_RUNS = re.compile(rb"\x1e(?:[ \t\r\x0b\x0c]*\x1e)+")  # a blank line: one break
_ASCII_PUNCT = np.array([not (chr(b).isascii() and (chr(b).isalnum() or chr(b) in "_'")
                              or chr(b).encode() in _WS_BYTES) for b in range(256)])
_ASCII_PUNCT[128:] = False  # bytes of multi-byte characters: padded as characters before
_BREAK, _UNK_BYTE = _LINE_BREAK.encode(), _UNK_MARK.encode()
_BLOCK_CHARS = 1 << 20  # long texts are tokenized in line-aligned blocks of about this size


def _check_text(text, what: str = "text") -> str:
    """``text`` if it is a ``str`` of valid Unicode, else a :class:`DataError` saying why.

    >>> _check_text("ok")
    'ok'
    >>> _check_text("a\\ud800")
    Traceback (most recent call last):
    ...
    keras_seq.errors.DataError: text holds a lone surrogate U+D800 at character 1; ...
    """
    if not isinstance(text, str):
        raise DataError(f"{what} must be a str, got {type(text).__name__}; decode bytes "
                        "first, e.g. data.decode('utf-8', errors='replace')")
    bad = None if text.isascii() else _SURROGATE.search(text)
    if bad:
        raise DataError(f"{what} holds a lone surrogate U+{ord(bad.group()):04X} at character "
                        f"{bad.start():,}; expected valid Unicode text (decode bytes with "
                        "errors='replace', not 'surrogateescape')")
    return text


def _stable_hash(payload: dict) -> str:
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()[:16]


class Tokenizer:
    """Base class: vocabulary bookkeeping, ids, save/load and fingerprint."""

    kind = "base"
    specials: tuple[str, ...] = (PAD, UNK)

    def __init__(self, **options):
        self.options = options
        self.vocab: list[str] = []
        self._index: dict[str, int] = {}
        self._graph_tables = None
        self._fast_lookup = None

    # -- vocabulary ---------------------------------------------------------------------
    def _set_vocab(self, vocab: list[str]) -> None:
        if len(set(vocab)) != len(vocab):
            raise DataError("vocabulary has duplicate entries; it cannot map tokens to ids")
        self.vocab = list(vocab)
        self._index = {t: i for i, t in enumerate(self.vocab)}
        self._graph_tables = None
        self._fast_lookup = None

    def _require_fitted(self) -> None:
        if not self.vocab:
            raise DataError(
                f"{self.kind} tokenizer has no vocabulary yet; call fit(train_text) "
                "or load_tokenizer(path) first"
            )

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @property
    def pad_id(self) -> int:
        return self._index[PAD]

    @property
    def unk_id(self) -> int:
        return self._index[UNK]

    @property
    def eos_id(self) -> int | None:
        return self._index.get(EOS)

    @property
    def fingerprint(self) -> str:
        """``kind:hash`` of the kind, options and vocabulary (what decides the ids)."""
        self._require_fitted()
        digest = _stable_hash({"kind": self.kind, "options": self.options, "vocab": self.vocab})
        return f"{self.kind}:{digest}"

    def describe(self) -> dict:
        return {
            "kind": self.kind,
            "options": dict(self.options),
            "vocab_size": self.vocab_size,
            "fingerprint": self.fingerprint,
        }

    # -- text <-> tokens <-> ids ----------------------------------------------------------
    def fit(self, text: str) -> Tokenizer:  # pragma: no cover - abstract
        raise NotImplementedError

    def tokens(self, text: str) -> list[str]:  # pragma: no cover - abstract
        """The token stream of ``text`` (boundary tokens included, OOV not replaced)."""
        raise NotImplementedError

    def map_unknown(self, tokens: list[str]) -> list[str]:
        """Replace tokens outside the vocabulary with ``<unk>``."""
        self._require_fitted()
        index = self._index
        return [t if t in index else UNK for t in tokens]

    def tokens_to_ids(self, tokens: list[str]) -> np.ndarray:
        self._require_fitted()
        get, unk = self._index.get, self.unk_id
        return np.fromiter((get(t, unk) for t in tokens), dtype=np.int32, count=len(tokens))

    def ids_to_tokens(self, ids) -> list[str]:
        self._require_fitted()
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            bad = ids[(ids < 0) | (ids >= self.vocab_size)][0]
            raise DataError(
                f"token id {int(bad)} is outside this vocabulary (size {self.vocab_size}); "
                "the ids come from a different tokenizer or model"
            )
        return [self.vocab[i] for i in ids]

    def tokenize_lines(self, text: str) -> list[list[str]]:
        """Token strings per non-blank line, without boundary markers, OOV kept as is."""
        lines: list[list[str]] = [[]]
        for tok in self.tokens(text):
            if tok == EOS:
                lines.append([])
            else:
                lines[-1].append(tok)
        return [line for line in lines if line]

    def encode(self, text: str) -> np.ndarray:
        """Ids of the token stream of ``text`` (int32, 1-D); OOV tokens become ``<unk>``."""
        return self.tokens_to_ids(self.tokens(text))

    def encode_counting(self, text: str) -> tuple[np.ndarray, int]:
        """``(encode(text), number of its tokens outside the vocabulary)`` in one pass (a
        literal ``<unk>`` in the text is in the vocabulary, as :meth:`oov_rate` counts)."""
        tokens = self.tokens(text)
        return self.tokens_to_ids(tokens), sum(t not in self._index for t in tokens)

    def counter(self):
        """An empty :class:`TokenCounts` for this kind: ``add(text)`` piece by piece, then
        :meth:`fit_counts` (what :meth:`fit` does on one text)."""
        raise NotImplementedError(f"the {self.kind} tokenizer fits on whole texts only")

    def fit_counts(self, counts: TokenCounts) -> Tokenizer:
        """Fit the vocabulary on counts gathered with :meth:`counter` (the same vocabulary
        as :meth:`fit` on the concatenated text)."""
        raise NotImplementedError(f"the {self.kind} tokenizer fits on whole texts only")

    def decode(self, ids) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def oov_rate(self, text: str) -> float:
        """Share of the tokens of ``text`` that are not in the vocabulary."""
        toks = self.tokens(text)
        if not toks:
            return 0.0
        index = self._index
        return sum(t not in index for t in toks) / len(toks)

    # -- persistence ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        self._require_fitted()
        return {
            "format": FORMAT,
            "version": 1,
            "kind": self.kind,
            "options": dict(self.options),  # copies: editing the dict leaves the tokenizer be
            "vocab": list(self.vocab),
            "fingerprint": self.fingerprint,
        }

    def save(self, path: str | Path) -> Path:
        """Write ``tokenizer.json`` into directory ``path`` (or to ``path`` if it ends in .json)."""
        path = Path(path)
        target = path if path.suffix == ".json" else path / FILENAME
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(target, json.dumps(self.to_dict(), ensure_ascii=False))
        return target

    # -- in-graph path --------------------------------------------------------------------
    def _lookup_table(self):
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        if self._graph_tables is None:
            keys = list(self.vocab)
            values = list(range(len(keys)))
            if self.eos_id is not None:
                keys.append(_LINE_BREAK)
                values.append(self.eos_id)
            init = tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys), tf.constant(values, dtype=tf.int32)
            )
            self._graph_tables = tf.lookup.StaticHashTable(init, default_value=self.unk_id)
        return self._graph_tables

    def tf_encode(self, texts):
        """Encode a batch of strings in-graph: ``tf.string (B,)`` → ``tf.RaggedTensor (B, None)``.

        Gives the same ids as :meth:`encode` on each string.
        """
        raise NotImplementedError  # pragma: no cover - abstract


def _split_words(text: str, lower: bool) -> list[str]:
    """The word rule (see module docstring); line breaks become ``_LINE_BREAK`` tokens."""
    return [UNK if t == _UNK_BYTE else t.decode() for t in _word_bytes(text, lower)]


def _split_words_regex(text: str, lower: bool) -> list[str]:
    """The word rule as a chain of regular expressions over the whole text: the reference
    that :func:`_word_bytes` is tested against (it is the rule the in-graph path mirrors,
    and about four times slower)."""
    text = _MARKERS.sub(" ", _check_text(text))
    if lower:
        text = text.lower()
    text = _PY_LEADING.sub("", text)
    text = _PY_BREAKS.sub(f" {_LINE_BREAK} ", text)
    text = text.replace(UNK, _UNK_MARK)
    text = _PY_PUNCT.sub(r" \g<0> ", text)
    return [UNK if t == _UNK_MARK else t for t in _PY_SPLIT.split(text) if t]


def line_blocks(text: str, size: int = _BLOCK_CHARS):
    """Consecutive slices of ``text`` of about ``size`` characters, each ending just after
    a line break (the last one where the text ends). Every tokenizer here gives the tokens
    of ``text`` as the tokens of its blocks, one after the other.

    >>> list(line_blocks("ab\\ncd\\nef", size=2))
    ['ab\\n', 'cd\\n', 'ef']
    """
    start = 0
    while start < len(text):
        cut = text.find("\n", start + size - 1)
        end = len(text) if cut == -1 else cut + 1
        yield text[start:end]
        start = end


def _word_bytes(text: str, lower: bool) -> list[bytes]:
    """The word rule on UTF-8 bytes: the words of ``text`` as ``bytes``, a line break as
    ``_BREAK`` and a literal ``<unk>`` as ``_UNK_BYTE``; the same tokens as
    :func:`_split_words_regex` (tested), in about a quarter of its time.

    Long texts go in line-aligned blocks (:func:`line_blocks`), so the temporary arrays
    stay small.
    """
    if not isinstance(text, str):
        _check_text(text)
    if len(text) > 2 * _BLOCK_CHARS:
        out: list[bytes] = []
        for block in line_blocks(text):  # a single longer line stays one block
            out += _word_bytes_block(block, lower)
        return out
    return _word_bytes_block(text, lower)


def _word_bytes_block(text: str, lower: bool) -> list[bytes]:
    """:func:`_word_bytes` on one block, whatever its length."""
    if lower:
        text = text.lower()
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        _check_text(text)  # says where the lone surrogate is
        raise
    raw = raw.translate(_BYTE_TABLE).lstrip(_WS_BYTES + _BREAK).replace(UNK.encode(), _UNK_BYTE)
    raw = _BREAK_RUNS.sub(_BREAK, raw)
    data = np.frombuffer(raw, np.uint8)
    before = _ASCII_PUNCT[data]  # (n,) bool: a space goes before this byte
    after = before.copy()  # (n,) bool: a space goes after this byte
    if not raw.isascii():
        _mark_non_ascii_punct(data, before, after)
    n_before, n_after = np.cumsum(before, dtype=np.int32), np.cumsum(after, dtype=np.int32)
    if data.size and (n_before[-1] or n_after[-1]):  # put the spaces in
        padded = np.full(data.size + int(n_before[-1]) + int(n_after[-1]), ord(" "), np.uint8)
        padded[np.arange(data.size, dtype=np.int32) + n_before + n_after - after] = data
        raw = padded.tobytes()
    return raw.split()


_PUNCT_CODE_POINTS: dict[int, bool] = {}  # non-ASCII code point -> not a word character


def _mark_non_ascii_punct(data: np.ndarray, before: np.ndarray, after: np.ndarray) -> None:
    """Mark the first byte of every non-ASCII punctuation character of UTF-8 ``data`` in
    ``before`` and its last byte in ``after`` (a character is punctuation when it is not
    a word character, ``_NON_ASCII_PUNCT``)."""
    lead = np.flatnonzero(data >= 0xC0)  # first bytes of the multi-byte characters
    first = data[lead].astype(np.int32)
    size = 2 + (first >= 0xE0) + (first >= 0xF0)  # bytes of each character
    cp = first & np.where(size == 2, 0x1F, np.where(size == 3, 0x0F, 0x07))
    padded = np.concatenate([data, np.zeros(3, np.uint8)])  # every lead has 3 bytes after
    for k in (1, 2, 3):
        more = size > k
        cp = np.where(more, (cp << 6) | (padded[lead + k] & 0x3F), cp)
    unique, inverse = np.unique(cp, return_inverse=True)
    known = _PUNCT_CODE_POINTS
    for c in unique.tolist():
        if c not in known:
            known[c] = _NON_ASCII_PUNCT.match(chr(c)) is not None
    punct = np.array([known[c] for c in unique.tolist()], bool)[inverse]
    before[lead[punct]] = True
    after[lead[punct] + size[punct] - 1] = True


def _tf_split_words(texts, lower: bool):
    """In-graph twin of :func:`_split_words`: ``(B,)`` strings → ragged ``(B, None)`` words."""
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    texts = tf.strings.regex_replace(texts, _MARKERS.pattern, " ")
    if lower:
        texts = tf.strings.lower(texts, encoding="utf-8")
    texts = tf.strings.regex_replace(texts, rf"^[{_WS}]+", "")
    texts = tf.strings.regex_replace(texts, _RE2_BREAKS, f" {_LINE_BREAK} ")
    # A literal "<unk>" maps to <unk> (the lookup table's default) as one token.
    texts = tf.strings.regex_replace(texts, UNK, _UNK_MARK)
    texts = tf.strings.regex_replace(texts, _RE2_PUNCT, r" \0 ")
    return tf.strings.split(texts)


class TokenCounts:
    """Token counts gathered piece by piece, for fitting on text too large to hold.

    ``add(text)`` counts the tokens of one piece; pieces must be cut where the tokenizer
    allows it (after a line break: :func:`line_blocks`). :meth:`counts` gives
    ``{token: count}`` as :meth:`WordTokenizer.fit` or :meth:`CharTokenizer.fit` count it.

    Example:

    >>> tok = make_tokenizer("word")
    >>> counts = tok.counter()
    >>> counts.add("a b\\n")
    >>> counts.add("b\\n")
    >>> tok.fit_counts(counts).vocab == make_tokenizer("word").fit("a b\\nb\\n").vocab
    True
    """

    def __init__(self, split):
        self._split = split  # text -> list of bytes tokens
        self._counts: collections.Counter = collections.Counter()

    def add(self, text: str) -> None:
        self._counts.update(self._split(text))  # a list: counted in C

    def counts(self) -> dict[str, int]:
        out = {UNK if t == _UNK_BYTE else t.decode(): c for t, c in self._counts.items()
               if t != _BREAK}
        return out


class _CharCounts(TokenCounts):
    """:class:`TokenCounts` of code points, in one array indexed by code point."""

    def __init__(self):
        self._bins = np.zeros(0x110000, np.int64)

    def add(self, text: str) -> None:
        self._bins += np.bincount(_code_points(text), minlength=0x110000)

    def counts(self) -> dict[str, int]:
        seen = np.flatnonzero(self._bins)
        return {chr(c): int(n) for c, n in zip(seen, self._bins[seen])}


def _code_points(text: str) -> np.ndarray:
    """The code points of ``text`` as a ``(len(text),)`` uint32 array."""
    try:
        return np.frombuffer(_check_text(text).encode("utf-32-le"), np.uint32)
    except UnicodeEncodeError:  # pragma: no cover - _check_text refuses surrogates first
        raise DataError("text is not valid Unicode") from None


class WordTokenizer(Tokenizer):
    """Whitespace-and-punctuation word tokenizer with a count-ranked vocabulary.

    Args:
        max_vocab: largest vocabulary size, specials included (``None``: no limit).
        min_count: keep words seen at least this often in training (1 keeps every word).
        lower: lower-case the text first.

    Example:

    >>> tok = WordTokenizer(min_count=1).fit("a b a\\n")
    >>> tok.vocab
    ['<pad>', '<unk>', '<eos>', 'a', 'b']
    >>> tok.encode("a c\\n").tolist()
    [3, 1, 2]
    """

    kind = "word"
    specials = (PAD, UNK, EOS)

    def __init__(self, max_vocab: int | None = None, min_count: int = 1, lower: bool = True):
        _check_vocab_options(max_vocab, min_count, len(self.specials))
        _check_lower(lower)
        super().__init__(max_vocab=max_vocab, min_count=min_count, lower=lower)

    def tokens(self, text: str) -> list[str]:
        return [EOS if t == _BREAK else UNK if t == _UNK_BYTE else t.decode()
                for t in _word_bytes(text, self.options["lower"])]

    def _split(self, text: str) -> list[bytes]:
        return _word_bytes(text, self.options["lower"])

    def counter(self) -> TokenCounts:
        return TokenCounts(self._split)

    def fit(self, text: str) -> WordTokenizer:
        counts = self.counter()
        counts.add(text)
        return self.fit_counts(counts)

    def fit_counts(self, counts: TokenCounts) -> WordTokenizer:
        counts = counts.counts()
        if not counts:
            raise DataError("cannot fit a word tokenizer on text with no words")
        self._set_vocab(_ranked_vocab(counts, self.specials, **self._vocab_limits()))
        return self

    def _lookup(self) -> dict[bytes, int]:
        """``{UTF-8 word: id}``, with the line-break and ``<unk>`` markers."""
        self._require_fitted()
        if self._fast_lookup is None:
            lookup = {t.encode(): i for i, t in enumerate(self.vocab)}
            lookup[_BREAK], lookup[_UNK_BYTE] = self.eos_id, self.unk_id
            self._fast_lookup = lookup
        return self._fast_lookup

    def encode(self, text: str) -> np.ndarray:
        return self.encode_counting(text)[0]

    def encode_counting(self, text: str) -> tuple[np.ndarray, int]:
        lookup = self._lookup()
        words = self._split(text)
        ids = np.fromiter(map(lookup.get, words, itertools.repeat(-1, len(words))),
                          dtype=np.int32, count=len(words))
        unknown = ids < 0
        n_unknown = int(unknown.sum())
        if n_unknown:
            ids[unknown] = self.unk_id
        return ids, n_unknown

    def fit_tokens(self, token_lists) -> WordTokenizer:
        """Fit on text that is already split into words (CoNLL columns, tagging data).

        >>> tok = WordTokenizer().fit_tokens([["U.S.", "stocks"], ["stocks", "fell"]])
        >>> tok.encode_tokens(["Stocks", "rose"]).tolist()
        [3, 1]
        """
        lower = self.options["lower"]
        counts = collections.Counter(t.lower() if lower else t
                                     for tokens in token_lists for t in tokens)
        if not counts:
            raise DataError("cannot fit a word tokenizer on data with no words")
        for token in counts:
            _check_text(token, "a word")
        self._set_vocab(_ranked_vocab(counts, self.specials, **self._vocab_limits()))
        return self

    def encode_tokens(self, tokens) -> np.ndarray:
        """Ids of words that are already split (one id per word, no ``<eos>``)."""
        lower = self.options["lower"]
        return self.tokens_to_ids([t.lower() if lower else t for t in tokens])

    def _vocab_limits(self) -> dict:
        return {"max_vocab": self.options["max_vocab"], "min_count": self.options["min_count"]}

    def decode(self, ids) -> str:
        out, line = [], []
        for tok in self.ids_to_tokens(ids):
            if tok == EOS:
                out.append(" ".join(line) + "\n")
                line = []
            elif tok != PAD:
                line.append(tok)
        return "".join(out) + " ".join(line)

    def tf_encode(self, texts):
        words = _tf_split_words(texts, self.options["lower"])
        return self._lookup_table().lookup(words)


class CharTokenizer(Tokenizer):
    """One token per Unicode code point (``"\\n"`` included); unseen characters → ``<unk>``.

    Example:

    >>> tok = CharTokenizer().fit("abca")
    >>> tok.decode(tok.encode("cab"))
    'cab'
    """

    kind = "char"

    def __init__(self, max_vocab: int | None = None, min_count: int = 1):
        _check_vocab_options(max_vocab, min_count, len(self.specials))
        super().__init__(max_vocab=max_vocab, min_count=min_count)

    def tokens(self, text: str) -> list[str]:
        return list(_check_text(text))

    def tokenize_lines(self, text: str) -> list[list[str]]:
        return [list(line) for line in _check_text(text).split("\n") if line]

    def counter(self) -> TokenCounts:
        return _CharCounts()

    def fit(self, text: str) -> CharTokenizer:
        counts = self.counter()
        counts.add(text)
        return self.fit_counts(counts)

    def fit_counts(self, counts: TokenCounts) -> CharTokenizer:
        counts = counts.counts()
        if not counts:
            raise DataError("cannot fit a char tokenizer on empty text")
        self._set_vocab(
            _ranked_vocab(
                counts, self.specials, self.options["max_vocab"], self.options["min_count"],
                order="sorted",
            )
        )
        return self

    def _lookup(self) -> np.ndarray:
        """``(0x110000,)`` int32: the id of each code point, −1 outside the vocabulary."""
        self._require_fitted()
        if self._fast_lookup is None:
            table = np.full(0x110000, -1, np.int32)
            for i, t in enumerate(self.vocab):
                if len(t) == 1:
                    table[ord(t)] = i
            self._fast_lookup = table
        return self._fast_lookup

    def encode(self, text: str) -> np.ndarray:
        return self.encode_counting(text)[0]

    def encode_counting(self, text: str) -> tuple[np.ndarray, int]:
        ids = self._lookup()[_code_points(text)]  # (n,) int32, a copy
        unknown = ids < 0
        n_unknown = int(unknown.sum())
        if n_unknown:
            ids[unknown] = self.unk_id
        return ids, n_unknown

    def decode(self, ids) -> str:
        return "".join(t for t in self.ids_to_tokens(ids) if t != PAD)

    def tf_encode(self, texts):
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        chars = tf.strings.unicode_split(texts, "UTF-8")
        return self._lookup_table().lookup(chars)


def _tf_text():
    """``tensorflow_text``, or a one-line error saying subword tokenization needs it."""
    what = "subword tokenization (WordPiece via tensorflow-text)"
    hint = " (or use --tokenizer char or word)"
    require_tensorflow(what, "tensorflow tensorflow-text", hint)
    return require("tensorflow_text", "subword", what, hint)


class SubwordTokenizer(Tokenizer):
    """WordPiece subwords learned with tensorflow-text's vocabulary builder.

    Words are first cut by the word rule; each word, as a whole (``don't`` is not cut
    again at the apostrophe), is then split into WordPiece pieces (continuations start
    with ``##``) by ``tensorflow_text.FastWordpieceTokenizer``; a word it cannot spell
    becomes ``<unk>``.

    Args:
        vocab_size: target vocabulary size (the learner may return slightly fewer).
        lower: lower-case the text first.

    Example:

    >>> tok = SubwordTokenizer(vocab_size=60).fit("lower lowest newer newest\\n" * 20)
    >>> tok.decode(tok.encode("lowest newer\\n"))
    'lowest newer\\n'
    """

    kind = "subword"
    specials = (PAD, UNK, EOS)

    def __init__(self, vocab_size: int = 8000, lower: bool = True):
        if not isinstance(vocab_size, int) or vocab_size < 16:
            raise DataError(f"subword vocab_size must be an integer ≥ 16, got {vocab_size!r}")
        _check_lower(lower)
        super().__init__(vocab_size=vocab_size, lower=lower)
        self._wordpiece = None

    def fit(self, text: str) -> SubwordTokenizer:
        _tf_text()
        # lazy: loads TF-Text only when this runs
        from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as lib

        counts = collections.Counter(
            t for t in _split_words(text, self.options["lower"]) if t != _LINE_BREAK
        )
        if not counts:
            raise DataError("cannot fit a subword tokenizer on text with no words")
        learned = lib.learn(
            counts.most_common(),
            vocab_size=self.options["vocab_size"],
            reserved_tokens=list(self.specials),
            lower_thresh=1,
        )
        vocab = list(self.specials) + [t for t in learned if t not in self.specials]
        self._set_vocab(self._cap(vocab, counts))
        return self

    def _cap(self, vocab: list[str], counts: collections.Counter) -> list[str]:
        """Cut a learned vocabulary to ``vocab_size`` entries.

        The learner's threshold search can overshoot the target; then the pieces used
        least on the training words go. Single characters go last, so that every word
        keeps a spelling; when even they are more than ``vocab_size``, the rarest go too
        and words that hold them become ``<unk>``.
        """
        limit = self.options["vocab_size"]
        if len(vocab) <= limit:
            return vocab
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        tf_text = _tf_text()
        words = list(counts)
        tokenizer = tf_text.FastWordpieceTokenizer(vocab=vocab, suffix_indicator="##",
                                                   unknown_token=UNK, no_pretokenization=True)
        pieces = tokenizer.tokenize(tf.constant(words))
        weights = np.repeat([counts[w] for w in words], pieces.row_lengths().numpy())
        usage = np.bincount(pieces.flat_values.numpy(), weights=weights, minlength=len(vocab))
        keep = {i for i, t in enumerate(vocab) if t in self.specials}
        singles = [i for i, t in enumerate(vocab)
                   if i not in keep and len(t.removeprefix("##")) == 1]
        if len(keep) + len(singles) > limit:  # the most frequent characters stay
            freq = collections.Counter()
            for word, count in counts.items():
                freq[word[0]] += count
                for ch in word[1:]:
                    freq["##" + ch] += count
            singles = sorted(singles, key=lambda i: -freq[vocab[i]])[:limit - len(keep)]
        keep.update(singles)
        for i in np.argsort(-usage, kind="stable"):
            if len(keep) >= limit:
                break
            keep.add(int(i))
        return [t for i, t in enumerate(vocab) if i in keep]

    def _set_vocab(self, vocab: list[str]) -> None:
        super()._set_vocab(vocab)
        self._wordpiece = None

    def _tokenizer(self):
        tf_text = _tf_text()
        if self._wordpiece is None:
            self._wordpiece = tf_text.FastWordpieceTokenizer(
                vocab=self.vocab, suffix_indicator="##", unknown_token=UNK,
                support_detokenization=True, no_pretokenization=True,  # words are cut already
            )
        return self._wordpiece

    def tokens(self, text: str) -> list[str]:
        self._require_fitted()
        words = _split_words(text, self.options["lower"])
        if not words:
            return []
        tokenizer = self._tokenizer()  # says so when TensorFlow is missing
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        pieces = tokenizer.tokenize(tf.constant(words, dtype=tf.string))
        ids = pieces.flat_values.numpy()
        rows = pieces.row_lengths().numpy()
        out, start = [], 0
        for word, n in zip(words, rows):
            if word == _LINE_BREAK:
                out.append(EOS)
            elif word == UNK:
                out.append(UNK)
            else:
                out.extend(self.vocab[i] for i in ids[start:start + n])
            start += n
        return out

    def decode(self, ids) -> str:
        out, line = [], ""
        for tok in self.ids_to_tokens(ids):
            if tok == EOS:
                out.append(line + "\n")
                line = ""
            elif tok == PAD:
                continue
            elif tok.startswith("##"):
                line += tok[2:]
            else:
                line = f"{line} {tok}" if line else tok
        return "".join(out) + line

    def tf_encode(self, texts):
        tokenizer = self._tokenizer()
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        words = _tf_split_words(texts, self.options["lower"])
        by_word = tokenizer.tokenize(words)  # (B, words, pieces)
        pieces = by_word.merge_dims(-2, -1)  # (B, pieces)
        # The line-break marker is not a vocabulary entry, so WordPiece maps it to <unk>;
        # put <eos> back where the word was the marker.
        is_break = tf.equal(words.flat_values, _LINE_BREAK)
        mask = tf.repeat(is_break, by_word.row_lengths(axis=2).flat_values)
        flat = tf.where(mask, tf.cast(self.eos_id, pieces.dtype), pieces.flat_values)
        return tf.cast(pieces.with_flat_values(flat), tf.int32)


KINDS = {"char": CharTokenizer, "word": WordTokenizer, "subword": SubwordTokenizer}


def _check_vocab_options(max_vocab, min_count, n_specials: int) -> None:
    if max_vocab is not None and (not isinstance(max_vocab, int) or max_vocab <= n_specials):
        raise DataError(
            f"max_vocab must be an integer larger than the {n_specials} special tokens, "
            f"got {max_vocab!r}; use None for no limit"
        )
    if not isinstance(min_count, int) or min_count < 1:
        raise DataError(f"min_count must be an integer ≥ 1, got {min_count!r}")


def _check_lower(lower) -> None:
    if not isinstance(lower, bool):
        raise DataError(f"lower must be true or false, got {lower!r}")


def _ranked_vocab(counts, specials, max_vocab, min_count, order="count") -> list[str]:
    """Specials first, then tokens by descending count (ties alphabetical) or sorted."""
    kept = [(t, c) for t, c in counts.items() if c >= min_count and t not in specials]
    kept.sort(key=lambda tc: (-tc[1], tc[0]))
    if max_vocab is not None:
        kept = kept[: max_vocab - len(specials)]
    tokens = [t for t, _ in kept]
    if order == "sorted":
        tokens.sort()
    return list(specials) + tokens


def make_tokenizer(kind: str, **options) -> Tokenizer:
    """A new, unfitted tokenizer of ``kind`` (``char``, ``word`` or ``subword``)."""
    if not isinstance(kind, str) or kind not in KINDS:
        raise DataError(f"unknown tokenizer {kind!r}; expected one of {', '.join(KINDS)}")
    cls = KINDS[kind]

    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = {k for k, v in options.items() if v is not None and k not in accepted}
    if unknown:
        raise DataError(
            f"option(s) {', '.join(sorted(unknown))} do not apply to the {kind} tokenizer; "
            f"it accepts {', '.join(sorted(accepted))}"
        )
    return cls(**{k: v for k, v in options.items() if k in accepted and v is not None})


def load_tokenizer(path: str | Path) -> Tokenizer:
    """Load a tokenizer saved with :meth:`Tokenizer.save` (a directory or the .json file).

    A file that is not exactly what :meth:`Tokenizer.save` writes (another format or
    version, a missing or mistyped field, a vocabulary that does not match its
    fingerprint) raises :class:`DataError` naming the file and what is wrong.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = make_tokenizer("char").fit("abc").save(folder)
    >>> load_tokenizer(folder).vocab
    ['<pad>', '<unk>', 'a', 'b', 'c']
    >>> _ = path.write_text('{"format": "keras-seq-tokenizer", "version": 2}')
    >>> load_tokenizer(folder)
    Traceback (most recent call last):
    ...
    keras_seq.errors.DataError: ... has tokenizer file version 2; this keras-seq reads version 1...
    """
    path = Path(path)
    target = path / FILENAME if path.is_dir() else path
    if not target.is_file():
        raise DataError(f"no tokenizer at {target}; expected a {FILENAME} written by save()")
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as err:
        raise DataError(f"{target} is not a keras-seq tokenizer file: {err}") from None
    except OSError as err:
        raise DataError(f"cannot read {target}: {err.strerror or err}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        found = data.get("format") if isinstance(data, dict) else type(data).__name__
        raise DataError(f"{target} is not a keras-seq tokenizer file (format {found!r}, "
                        f"expected {FORMAT!r}); pass the {FILENAME} that save() wrote")
    if data.get("version") != 1:
        raise DataError(f"{target} has tokenizer file version {data.get('version')!r}; this "
                        "keras-seq reads version 1 (re-fit the tokenizer, or use the keras-seq "
                        "that wrote it)")
    tok = _tokenizer_from_dict(data, target)
    if data["fingerprint"] != tok.fingerprint:
        raise DataError(
            f"{target} is corrupt: its vocabulary hashes to {tok.fingerprint}, "
            f"but the file says {data['fingerprint']}"
        )
    return tok


def _tokenizer_from_dict(data: dict, target: Path) -> Tokenizer:
    """The tokenizer a checked ``tokenizer.json`` describes (before its fingerprint check)."""
    kind, options, vocab = data.get("kind"), data.get("options"), data.get("vocab")
    if not isinstance(kind, str) or kind not in KINDS:
        raise DataError(f"{target} names tokenizer kind {kind!r}; expected one of "
                        f"{', '.join(KINDS)}")

    accepted = set(inspect.signature(KINDS[kind].__init__).parameters) - {"self"}
    if not isinstance(options, dict) or set(options) - accepted:
        raise DataError(f"{target} has options {options!r}; a {kind} tokenizer takes a JSON "
                        f"object with some of {', '.join(sorted(accepted))}")
    specials = list(KINDS[kind].specials)
    if (not isinstance(vocab, list) or not all(isinstance(t, str) for t in vocab)
            or vocab[:len(specials)] != specials):
        raise DataError(f"{target} has no usable vocabulary: expected a list of strings that "
                        f"starts with {specials}")
    if not isinstance(data.get("fingerprint"), str):
        raise DataError(f"{target} has no fingerprint (got {data.get('fingerprint')!r}); the "
                        "file is damaged or was not written by save(): re-fit the tokenizer")
    try:
        tok = KINDS[kind](**options)
        _check_text("".join(vocab), "the vocabulary")
        tok._set_vocab(vocab)
    except DataError as err:
        raise DataError(f"{target} is damaged: {err}") from None
    return tok
