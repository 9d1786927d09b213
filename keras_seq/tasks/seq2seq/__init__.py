"""Sequence-to-sequence workflows around :class:`keras_seq.models.seq2seq.Seq2Seq`.

* :mod:`~keras_seq.tasks.seq2seq.decoding` — batched greedy (in-graph) and beam search;
* :mod:`~keras_seq.tasks.seq2seq.metrics` — exact match, token accuracy, corpus BLEU, per length;
* :mod:`~keras_seq.tasks.seq2seq.plots` — attention heatmaps and accuracy-vs-length curves;
* :mod:`~keras_seq.tasks.seq2seq.export` — a string → string SavedModel;
* :mod:`~keras_seq.tasks.seq2seq.config` — the ``train seq2seq`` config (no TensorFlow);
* :mod:`~keras_seq.tasks.seq2seq.data` — generated tasks and TSV pairs, their splits and batches;
* :mod:`~keras_seq.tasks.seq2seq.evaluation` — load, evaluate and plot a run (no trainer);
* :mod:`~keras_seq.tasks.seq2seq.task` — the trainer plug-in: train and resume a run;
* :mod:`~keras_seq.benchmarks.seq2seq` (``keras-seq bench seq2seq``) — attention vs no
  attention on long reversals.
"""
