"""Corpora, tokenizers, batching and synthetic tasks. Importing this does not import TensorFlow.

``stream_dataset(ids, batch_size, bptt)`` is the truncated-BPTT stream for ``model.fit``
(a ``keras.utils.PyDataset``: Keras is imported when it is called)."""

from keras_seq.data.batching import StreamLayout, pad_sequences, stream_arrays, stream_dataset
from keras_seq.data.corpus import Corpus, load_corpus
from keras_seq.data.splits import split_text
from keras_seq.data.tokenizers import load_tokenizer, make_tokenizer

__all__ = ["Corpus", "StreamLayout", "load_corpus", "load_tokenizer", "make_tokenizer",
           "pad_sequences", "split_text", "stream_arrays", "stream_dataset"]
