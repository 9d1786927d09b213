"""What an export command exports: a run directory or your own ``.keras`` file.

``keras-seq export tflite|saved-model`` take ``--run-dir RUN`` (a ``keras-seq train lm``
run: its best checkpoint, tokenizer and corpus) or ``--model FILE.keras`` (a model you
trained with your own fit script, saved with ``model.save``) with ``--tokenizer``.
"""

from __future__ import annotations

from keras_seq.data.tokenizers import load_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.models.loading import USER_FILE_HINT, load_keras_file


def model_from_args(args, need_tokenizer: bool = False):
    """``(source, model, tokenizer)`` of an export command: a run directory (``--run-dir``:
    model and tokenizer None, the exporter loads the run) or ``--model FILE.keras`` with
    its ``--tokenizer``."""
    if getattr(args, "model", None) is None:
        for flag in ("tokenizer", "data", "ids"):
            if getattr(args, flag, None) is not None:
                raise KerasSeqError(f"--{flag} goes with --model; a --run-dir export uses the "
                                    "run's own tokenizer and corpus")
        return args.run_dir, None, None
    if need_tokenizer and args.tokenizer is None:
        raise KerasSeqError("--model needs --tokenizer here: the SavedModel's signatures take "
                            "text (save your keras-seq tokenizer with tokenizer.save(folder))")
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    model = load_keras_file(args.model, compile=False, hint=USER_FILE_HINT)
    return args.model, model, tokenizer
