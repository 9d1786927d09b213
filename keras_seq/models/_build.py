"""Building subclassed models: by running them once, so ``.keras`` files reload with
weights; and before ``fit`` traces its step, so the step is traced once."""

from __future__ import annotations

import keras
from keras import ops


class BuildByCalling:
    """Mixin for a ``keras.Model`` whose sub-layers create weights on first call.

    ``build(shape)`` runs the model on zeros of that shape (``None`` → 1) and records the
    shape, which ``get_build_config`` saves so ``keras.saving.load_model`` can rebuild the
    model before loading its weights.
    """

    def build(self, input_shape):
        self._built_input_shape = tuple(input_shape)
        self.call(ops.zeros(tuple(1 if d is None else d for d in input_shape), "int32"))
        self.built = True
        self._after_build()

    def _after_build(self) -> None:
        """Hook for clean-up after the build call (e.g. zeroing recurrent state)."""

    def get_build_config(self):
        shape = getattr(self, "_built_input_shape", None)
        return {"input_shape": shape} if shape is not None else None

    def build_from_config(self, config):
        if config and config.get("input_shape"):
            self.build(config["input_shape"])


class BuiltBeforeTracing:
    """Mixin for a ``keras.Model``: ``fit``/``evaluate`` build the optimizer's and the
    metrics' variables before the step is traced, as Keras does under a ``tf.distribute``
    strategy.

    Without a strategy, Keras's TensorFlow trainer defers that build to the first trace
    (``_maybe_symbolic_build`` returns early), so the variables are created inside the
    traced step, and ``tf.function`` then traces it a second time without them: twice the
    start-up of every ``fit`` (a tiny LM's first epoch: 4.4 s → 2.9 s). The build runs on
    one batch of the epoch iterator, which Keras resets before the first step. Other
    backends and strategies run Keras unchanged.
    """

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if keras.backend.backend() == "tensorflow" and self._distribute_strategy is None:
            if iterator is not None:
                for _, _, batches in iterator:
                    data_batch = next(batches)
                    break
            self._symbolic_build(data_batch=data_batch)
            return
        super()._maybe_symbolic_build(iterator=iterator, data_batch=data_batch)


def logits_dtype() -> str:
    """The dtype of an output (logits) layer: the global policy's variable dtype.

    Under ``mixed_float16``/``mixed_bfloat16`` the rest of a model computes in half
    precision while the logits, the softmax and the loss stay in float32 (Keras's
    mixed-precision guide: the model's last layer in float32).
    """
    return keras.config.dtype_policy().variable_dtype
