"""Building subclassed models by running them once, so ``.keras`` files reload with weights."""

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


def logits_dtype() -> str:
    """The dtype of an output (logits) layer: the global policy's variable dtype.

    Under ``mixed_float16``/``mixed_bfloat16`` the rest of a model computes in half
    precision while the logits, the softmax and the loss stay in float32 (Keras's
    mixed-precision guide: the model's last layer in float32).
    """
    return keras.config.dtype_policy().variable_dtype
