"""Next-token language modelling: config (:mod:`.config`), data (:mod:`.data`: the corpus,
windows and batches), evaluation, loading and sampling (:mod:`.evaluation`, no trainer
import) and the trainer plug-in (:mod:`.task`)."""

from keras_seq.tasks.lm.config import LMConfig

__all__ = ["LMConfig"]
