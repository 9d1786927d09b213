"""One loaded model version: its signatures (input/output specs), TF Serving metadata and
a synchronous :meth:`Servable.run` that the server calls from a worker thread."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from keras_seq.serving.errors import ServingError, bad_request


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: str  # numpy-ish kind: "string", "int32", "int64", "float32", "float64", "bool"
    shape: tuple  # None for unknown dims

    @property
    def is_scalar(self) -> bool:
        return len(self.shape) == 0

    @property
    def batched(self) -> bool:
        return len(self.shape) > 0 and self.shape[0] is None


@dataclass(frozen=True)
class SignatureInfo:
    name: str
    inputs: dict  # name -> InputSpec
    outputs: dict  # name -> InputSpec (same record, for outputs)

    @property
    def batchable(self) -> bool:
        """Rows are independent: every input is a batch of rows (dim 0 unknown) or a scalar
        shared by all rows, and every output has dim 0 unknown."""
        return (any(s.batched for s in self.inputs.values())
                and all(s.batched or s.is_scalar for s in self.inputs.values())
                and all(s.batched for s in self.outputs.values()))


def _spec(name, spec) -> InputSpec:
    shape = tuple(spec.shape.as_list()) if spec.shape.rank is not None else (None,)
    return InputSpec(name, spec.dtype.name, shape)


def _signature_defs(saved_dir: Path) -> dict:
    """The ``signature_def`` map of the SavedModel as TF Serving's metadata JSON prints it."""
    # lazy: loads protobuf, TensorFlow only when this runs
    from google.protobuf import json_format
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    proto.ParseFromString((saved_dir / "saved_model.pb").read_bytes())
    meta = proto.meta_graphs[0]
    out = {}
    for key, sig in meta.signature_def.items():
        out[key] = json_format.MessageToDict(sig, preserving_proto_field_name=True,
                                             always_print_fields_with_no_presence=True)
    return out


class Servable:
    """A SavedModel version loaded with ``tf.saved_model.load``."""

    def __init__(self, name: str, version: int, path, loaded=None):
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        self.name = name
        self.version = int(version)
        self.path = Path(path)
        self._loaded = loaded if loaded is not None else tf.saved_model.load(str(self.path))
        self.signatures: dict[str, SignatureInfo] = {}
        for key, fn in self._loaded.signatures.items():
            inputs = {k: _spec(k, v) for k, v in fn.structured_input_signature[1].items()}
            outputs = {k: _spec(k, v) for k, v in fn.structured_outputs.items()}
            self.signatures[key] = SignatureInfo(key, inputs, outputs)
        self.signature_defs = _signature_defs(self.path)
        self._lock = threading.Lock()
        self.calls = 0  # signature calls (one per batch)
        self.rows = 0  # rows run through them

    def signature(self, name: str | None) -> SignatureInfo:
        key = name or "serving_default"
        if key not in self.signatures:
            raise bad_request(f'Serving signature name: "{key}" not found in signature def '
                              f"(available: {', '.join(sorted(self.signatures))})")
        return self.signatures[key]

    def metadata(self) -> dict:
        """TF Serving's ``GetModelMetadataResponse`` as JSON."""
        return {"model_spec": {"name": self.name, "signature_name": "",
                               "version": str(self.version)},
                "metadata": {"signature_def": {"signature_def": self.signature_defs}}}

    def run(self, signature: str, inputs: dict) -> dict:
        """Call ``signature`` on numpy ``inputs``; numpy outputs. TF's argument errors
        become 400s."""
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        info = self.signature(signature)
        fn = self._loaded.signatures[info.name]
        try:
            feed = {k: tf.constant(v, dtype=info.inputs[k].dtype) for k, v in inputs.items()}
            result = fn(**feed)
        except (tf.errors.InvalidArgumentError, tf.errors.OutOfRangeError,
                ValueError, TypeError) as err:
            message = getattr(err, "message", None) or str(err)
            raise ServingError(400, message.strip().splitlines()[0][:500]) from None
        out = {k: v.numpy() for k, v in result.items()}
        batched = [v for k, v in inputs.items() if info.inputs[k].batched]
        rows = len(batched[0]) if batched else 1
        with self._lock:
            self.calls += 1
            self.rows += rows
        return out
