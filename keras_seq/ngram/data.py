"""Corpus → tokenized lines for the n-gram tools (no TensorFlow).

A prepared directory (``keras-seq data prepare --tokenizer word``) is read from its ids:
its lines are the ids turned back into tokens (:class:`PreparedTokenized`), and
:meth:`PreparedTokenized.id_chunks` gives the train ids, in bounded memory, in the form
:func:`keras_seq.ngram.external.train_kn_bounded` takes.

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

import numpy as np

from keras_seq.data.corpus import load_corpus
from keras_seq.data.prepared import PreparedCorpus, is_prepared, read_chunks
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


class PreparedTokenized(TokenizedCorpus):
    """:class:`TokenizedCorpus` of a prepared corpus: the same lines, made from its ids
    when asked for (``train`` on first use)."""

    def __init__(self, corpus: PreparedCorpus):
        self.corpus, self.tokenizer, self._train = corpus, corpus.tokenizer, None

    @property
    def train(self) -> list[list[str]]:
        if self._train is None:
            self._train = self.corpus.token_lines("train")
            if not self._train:
                raise DataError(f"the training split of {self.corpus.name!r} has no tokens")
        return self._train

    def lines(self, split: str) -> list[list[str]]:
        return self.train if split == "train" else self.corpus.token_lines(split)

    def raw_lines(self, split: str) -> list[list[str]]:
        raise DataError(f"{self.corpus.path} holds ids, in which unknown words are already "
                        "<unk>; this needs the words themselves: pass the source corpus as --data")

    def vocabulary(self):
        """The n-gram :class:`~keras_seq.ngram.counts.Vocabulary` of the train split:
        ``Vocabulary.from_lines(self.train)`` (words in order of first appearance),
        found chunk by chunk from the ids."""
        # lazy: ngram.counts is not needed to read lines
        from keras_seq.ngram.counts import Vocabulary

        vocab, seen, order = self.tokenizer.vocab, np.zeros(self.tokenizer.vocab_size, bool), []
        seen[self.tokenizer.eos_id] = True
        none = np.iinfo(np.int64).max
        for block in read_chunks(self.corpus.split("train")):
            unseen = block[~seen[block]]  # few once the vocabulary fills up
            if not unseen.size:
                continue
            first = np.full(seen.size, none)  # where each word first appears in `unseen`
            np.minimum.at(first, unseen, np.arange(unseen.size))
            new = np.flatnonzero(first != none)
            order += new[np.argsort(first[new])].tolist()
            seen[new] = True
        return Vocabulary([vocab[i] for i in order])

    def n_predicted(self, split: str = "train") -> int:
        """Tokens an n-gram model predicts in ``split``: each word and one ``</s>`` per
        non-empty line (``sum(len(line) + 1 for line in lines if line)``), from the ids."""
        eos, total, previous = self.tokenizer.eos_id, 0, self.tokenizer.eos_id
        for block in read_chunks(self.corpus.split(split)):
            if not block.size:
                continue
            is_eos = block == eos
            before = np.concatenate([[previous == eos], is_eos[:-1]])
            total += int(block.size - (is_eos & before).sum())  # an <eos> ending no words
            previous = block[-1]
        return total + int(previous != eos)  # a last line without <eos> still gets </s>

    def id_chunks(self, vocab, split: str = "train"):
        """The ids of ``split`` as ``vocab`` numbers them, chunk by chunk (``</s>`` for
        ``<eos>``): what ``id_chunks_from_lines(self.lines(split), vocab)`` gives,
        without the lines."""
        # lazy: ngram.counts is not needed to read lines
        from keras_seq.ngram.counts import EOS as NGRAM_EOS
        from keras_seq.ngram.counts import UNK as NGRAM_UNK

        get = vocab._input_index.get
        table = np.array([get(t, NGRAM_UNK) for t in self.tokenizer.vocab], np.int32)
        table[self.tokenizer.eos_id] = NGRAM_EOS
        for block in read_chunks(self.corpus.split(split)):
            yield table[block]


def load_tokenized(data: str, *, tokenizer: str = "word", max_vocab: int | None = None,
                   min_count: int = 1, split: str = DEFAULT_SPLIT,
                   data_dir=None) -> TokenizedCorpus:
    """Load ``data`` (path, directory, registry name or prepared directory) and tokenize
    its training split."""
    if is_prepared(data):
        corpus = PreparedCorpus(data)
        corpus.check_request(tokenizer=tokenizer, split_ratio=split, max_vocab=max_vocab,
                             min_count=min_count)
        return PreparedTokenized(corpus)
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
