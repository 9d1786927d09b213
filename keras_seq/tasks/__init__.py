"""Task shapes (LM, seq2seq, classify, tag, conditioned LM) plugged into the shared trainer."""

from keras_seq.tasks._common import LABELS_FILE, Labels

__all__ = ["LABELS_FILE", "Labels"]
