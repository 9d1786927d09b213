"""The JSON file written next to every exported ``.tflite`` (no TensorFlow here).

``model.tflite`` gets ``model.json``::

    {"format": "keras-seq-tflite", "version": 1,
     "graph": "step" | "step_fused" | "sequence" | "sequence_fused",
     "variant": "float32" | "float16" | "dynamic" | "int8" | "int16x8",
     "tflite_sha256": "...",            # ties the metadata to exactly this file
     "tokenizer_fingerprint": "word:...", "tokenizer_file": "tokenizer.json",
     "cell": "lstm", "num_layers": 2, "units": 256, "vocab_size": 2367,
     "state_names": ["h0", "c0", ...], "state_shapes": {"h0": [1, 256], ...},
     "batch": 1, "length": 1, "signature": "step",
     "inputs": [...], "outputs": [...], "run_dir": "...", "parity": {...}}

``graph`` tells the runtime how to stream: ``step`` passes the state in and out
explicitly; ``step_fused`` keeps it inside the interpreter (fused LSTM variable tensors;
``reset_all_variables()`` starts over).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from keras_seq.atomic import file_sha256  # noqa: F401  also this module's API
from keras_seq.errors import KerasSeqError

FORMAT = "keras-seq-tflite"
VERSION = 1
GRAPHS = ("step", "step_fused", "sequence", "sequence_fused")


def metadata_path(model_path: str | Path) -> Path:
    return Path(model_path).with_suffix(".json")


def write_metadata(model_path: str | Path, meta: dict) -> Path:
    meta = {"format": FORMAT, "version": VERSION, **meta,
            "tflite_sha256": file_sha256(model_path)}
    target = metadata_path(model_path)
    target.write_text(json.dumps(meta, indent=2, default=str))
    return target


def read_metadata(model_path: str | Path, data: bytes | None = None) -> dict:
    """The metadata of ``model_path``, after checking it describes exactly that file.

    ``data``: the file's bytes when the caller has read them already (the runtime checks
    and loads those very bytes, so the hash is of what the interpreter gets).
    """
    model_path = Path(model_path)
    if data is None and not model_path.is_file():
        raise KerasSeqError(f"no model at {model_path}; pass the .tflite written by "
                            "`keras-seq export tflite` (or `keras-seq pipeline`)")
    target = metadata_path(model_path)
    if not target.is_file():
        raise KerasSeqError(
            f"{model_path} has no metadata file ({target.name} next to it); keras-seq needs "
            "it to know the tokenizer and state layout. Re-export with `keras-seq export "
            "tflite`, which writes both")
    try:
        meta = json.loads(target.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise KerasSeqError(f"{target} is not valid JSON ({err}); re-export the model") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise KerasSeqError(f"{target} is not keras-seq TFLite metadata (format {found!r}, "
                            f"expected {FORMAT!r})")
    if meta.get("graph") not in GRAPHS:
        raise KerasSeqError(f"{target} names graph {meta.get('graph')!r}; expected one of "
                            f"{', '.join(GRAPHS)}")
    actual = hashlib.sha256(data).hexdigest() if data is not None else file_sha256(model_path)
    if meta.get("tflite_sha256") != actual:
        raise KerasSeqError(
            f"{model_path.name} does not match its metadata {target.name}: the file hashes to "
            f"{actual[:12]}…, the metadata was written for {str(meta.get('tflite_sha256'))[:12]}"
            "…. It is another model's .tflite (or was modified); copy the .tflite together "
            "with its own .json, or re-export")
    return meta
