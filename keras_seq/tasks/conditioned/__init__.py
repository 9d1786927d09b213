"""One-to-many: a language model conditioned on a label (data, batching and measurement).

The model is :class:`keras_seq.models.conditioned_lm.ConditionedLM`; the offline corpus
``python-docs-topics`` and the batching helpers are in :mod:`.data`.
"""
