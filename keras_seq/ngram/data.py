"""Corpus → tokenized lines for the n-gram tools (no TensorFlow).

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "tiny.txt")
>>> _ = open(path, "w").write("the cat sat\\nthe dog sat\\n" * 20)
>>> data = load_tokenized(path, split="90/10/0")
>>> data.train[0], data.fingerprint("val")["split"]
(['the', 'cat', 'sat'], 'val')
"""

from __future__ import annotations

from dataclasses import dataclass

from keras_seq.data.corpus import load_corpus
from keras_seq.data.splits import DEFAULT_SPLIT
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.errors import DataError


@dataclass
class TokenizedCorpus:
    """Train lines (OOV already ``<unk>``), the tokenizer and the corpus they came from."""

    corpus: object
    tokenizer: object
    train: list[list[str]]

    def lines(self, split: str) -> list[list[str]]:
        """Token lines of ``split`` with out-of-vocabulary words mapped to ``<unk>``."""
        if split == "train":
            return self.train
        tok = self.tokenizer
        return [tok.map_unknown(line) for line in tok.tokenize_lines(self.corpus.text(split))]

    def raw_lines(self, split: str) -> list[list[str]]:
        """Token lines of ``split`` with unknown words kept as they are."""
        return self.tokenizer.tokenize_lines(self.corpus.text(split))

    def fingerprint(self, split: str) -> dict:
        """What a perplexity on ``split`` depends on (see keras_seq.metrics)."""
        return {
            "tokenizer": self.tokenizer.fingerprint,
            "split": split,
            "corpus_sha256": self.corpus.sha256,
            "corpus": self.corpus.name,
            "split_spec": self.corpus.split_spec,
        }


def load_tokenized(data: str, *, tokenizer: str = "word", max_vocab: int | None = None,
                   min_count: int = 1, split: str = DEFAULT_SPLIT,
                   data_dir=None) -> TokenizedCorpus:
    """Load ``data`` (path, directory or registry name) and tokenize its training split."""
    corpus = load_corpus(data, data_dir=data_dir, split=split)
    if tokenizer != "word":
        raise DataError(
            f"n-gram models take the 'word' tokenizer, got {tokenizer!r}; use --tokenizer word"
        )
    tok = make_tokenizer("word", max_vocab=max_vocab, min_count=min_count)
    train_text = corpus.text("train")
    tok.fit(train_text)
    train = [tok.map_unknown(line) for line in tok.tokenize_lines(train_text)]
    if not train:
        raise DataError(f"the training split of {corpus.name!r} has no tokens")
    return TokenizedCorpus(corpus, tok, train)
