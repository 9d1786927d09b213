"""Aligned N→N sequence tagging (POS, NER/BIO, punctuation and case restoration).

* :mod:`~keras_seq.tasks.tag.data` — CoNLL / CoNLL-U readers, the ``restore-punct`` task
  derived from any corpus, and :func:`~keras_seq.tasks.tag.data.make_tagging_task`;
* :mod:`~keras_seq.tasks.tag.metrics` — token accuracy, per-tag and micro/macro F1, BIO
  span F1 (conlleval rules).

The model is :class:`keras_seq.models.tagger.SequenceTagger`.
"""
