"""Training with ``model.fit``: callbacks for truncated BPTT and diagnostics, the perplexity
metric, the stateful-fit check, and the shared trainer behind ``keras-seq train``.

The names below load on first use (importing this package loads no Keras), so the command
line's light modules (``keras_seq.training.config``) stay quick to import:

>>> from keras_seq.training import ResetStatesCallback, Perplexity
>>> ResetStatesCallback.__name__, Perplexity.__name__
('ResetStatesCallback', 'Perplexity')

docs/api.md lists every public name; docs/fit-script.md uses them in a plain fit script.
"""

from keras_seq.lazy import lazy_exports

_EXPORTS = {
    "ActivationRangeTracker": "keras_seq.training.callbacks",
    "ResetStatesCallback": "keras_seq.training.callbacks",
    "RowStateResets": "keras_seq.training.callbacks",
    "PTBLearningRate": "keras_seq.training.callbacks",
    "GradientNormLogger": "keras_seq.training.callbacks",
    "NaNGuard": "keras_seq.training.callbacks",
    "TrainingDiagnostics": "keras_seq.training.callbacks",
    "TimeBudget": "keras_seq.training.callbacks",
    "check_stateful_fit": "keras_seq.training.fit_checks",
    "Perplexity": "keras_seq.models.perplexity",
    "start_run": "keras_seq.training.trainer",
    "tensorboard_callbacks": "keras_seq.training.trainer",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
