"""Loading keras-seq ``.keras`` files: every model class registered, Keras's safe mode on.

>>> import tempfile, keras
>>> from pathlib import Path
>>> from keras_seq.models import RecurrentLM
>>> model = RecurrentLM(vocab_size=5, embed_dim=2, units=3)
>>> _ = model(keras.ops.zeros((1, 4), "int32"))
>>> path = Path(tempfile.mkdtemp()) / "lm.keras"
>>> model.save(path)
>>> type(load_keras_file(path, compile=False)).__name__
'RecurrentLM'
"""

from __future__ import annotations

from pathlib import Path

import keras

# Importing the model classes and the metric registers them with Keras's serialization.
import keras_seq.models  # noqa: F401
import keras_seq.models.perplexity  # noqa: F401
from keras_seq.errors import KerasSeqError
from keras_seq.runs import checkpoint_path


def load_model(run_dir: str | Path, which: str = "best"):
    """The Keras model of a checked run (without its optimizer)."""
    return load_keras_file(checkpoint_path(run_dir, which), compile=False)


RUN_FILE_HINT = ("the file is damaged or was not written by keras-seq: re-train the run")
USER_FILE_HINT = ("a Lambda layer, or a custom class not registered with "
                  "keras.saving.register_keras_serializable, cannot load; the file may also "
                  "be damaged: save the model again with model.save('FILE.keras')")


def load_keras_file(path: str | Path, compile: bool = True, hint: str = RUN_FILE_HINT):
    """A ``.keras`` file, loaded in Keras's safe mode (no ``Lambda`` code, no class that is
    not registered; keras-seq's are). Whatever Keras raises for a damaged or foreign file
    becomes a :class:`KerasSeqError` naming the file, ending in ``hint``."""
    path = Path(path)
    if not path.is_file():
        where = "the run has no checkpoint yet" if hint == RUN_FILE_HINT else \
            "save the model with model.save('FILE.keras')"
        raise KerasSeqError(f"{path} does not exist; {where}")
    try:
        return keras.saving.load_model(path, compile=compile, safe_mode=True)
    except Exception as err:  # Keras raises ValueError, TypeError, OSError, BadZipFile…
        text = str(err).strip()
        reason = text.splitlines()[0][:300] if text else type(err).__name__
        raise KerasSeqError(
            f"cannot load the model in {path}: {reason} (keras-seq loads .keras files in "
            f"Keras safe mode: {hint})") from None
