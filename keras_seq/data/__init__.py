"""Corpora, tokenizers, batching and synthetic tasks. Importing this does not import TensorFlow."""

from keras_seq.data.corpus import Corpus, load_corpus
from keras_seq.data.splits import split_text
from keras_seq.data.tokenizers import load_tokenizer, make_tokenizer

__all__ = ["Corpus", "load_corpus", "split_text", "make_tokenizer", "load_tokenizer"]
