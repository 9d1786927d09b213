"""N→1 sequence classification: one label per text.

* :mod:`~keras_seq.tasks.classify.data` — ``(text, label)`` splits from TSV files and the
  generated ``reviews-negation`` task (plain Python/NumPy);
* :mod:`~keras_seq.tasks.classify.metrics` — accuracy, macro-F1, confusion matrix,
  accuracy per group (NumPy; matplotlib for the confusion plot).

The model is :class:`keras_seq.models.classifier.SequenceClassifier`.
"""
