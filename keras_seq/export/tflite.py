"""Export a trained language model to TFLite: streaming step models and scoring models.

Graphs (see :class:`~keras_seq.export.graphs.LMGraphs`):

* ``step``: token + every layer's state in → logits + states out, static batch 1; every
  cell (SimpleRNN, GRU, LSTM, stacked); a handful of ``FULLY_CONNECTED`` ops.
* ``step_fused`` (plain LSTMs only): the LSTM layers become TFLite's fused
  ``UNIDIRECTIONAL_SEQUENCE_LSTM`` with the state kept inside the interpreter.
* ``sequence`` / ``sequence_fused``: a static ``(batch, length)`` window, for scoring a
  stream (perplexity) window by window; ``sequence`` passes the state in and out (the
  window is unrolled: the layers' ``tf.while_loop`` becomes a TFLite ``WHILE`` that fails
  to prepare under XNNPACK).

Variants: ``float32``; ``float16`` (fp16 weights); ``dynamic`` (dynamic-range int8
weights); ``int8`` (full integer, calibrated on the training corpus, fed to the converter
as dicts keyed by the signature's input names; float input/output); ``int16x8`` (int16
activations, int8 weights). An integer model's ``note`` names every op left in float
(empty: integer kernels throughout, float only at the inputs and outputs). Two more step
variants (:data:`SHARED_TABLE_VARIANTS`, made by ``ai-edge-quantizer`` from the float32
model, see :func:`quantize_shared_table`): ``int4`` (channelwise 4-bit weights, activations
quantized on the fly) and ``dynamic_shared`` (the same at 8 bits). In both the embedding
``GATHER`` becomes ``EMBEDDING_LOOKUP``, so a tied embedding/output table is stored once,
quantized (the converter's ``dynamic`` stores it twice: once per consumer).

Each model is written as ``<graph>_<variant>.tflite`` with its metadata ``.json`` (see
:mod:`keras_seq.runtime.metadata`) and the run's ``tokenizer.json``; ``manifest.json``
lists every model with its size, op list and parity against Keras: max |Δlogits| on real
validation text and the validation perplexity through the TFLite model.

Example::

    export_tflite("runs/lstm", "exports/lstm", variants=["float32", "dynamic"])  # a run
    export_tflite(model, "exports/mine", variants=["float32", "int8"],           # a model
                  tokenizer=tokenizer, text=held_out_text)

(docs/fit-script.md runs the second form end to end in ``make test``; the docstring of
:class:`~keras_seq.runtime.litert.LiteRTLM` exports and streams a model.)
"""

from __future__ import annotations

import contextlib
import gc
import json
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_seq.errors import KerasSeqError
from keras_seq.export.graphs import FrozenWeights, LMGraphs
from keras_seq.export.lm_stack import (
    keras_outputs,
    keras_probs,
    keras_stream_log_probs,
    read_lm,
)
from keras_seq.export.sources import model_from_args
from keras_seq.models import RecurrentLM
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.runtime.metadata import write_metadata
from keras_seq.tables import print_json
from keras_seq.tasks.lm.data import corpus_for
from keras_seq.tasks.lm.evaluation import evaluate_stream, load_run
from keras_seq.tasks.lm.shape import ALL_VARIANTS, SHARED_TABLE_VARIANTS, VARIANTS
from keras_seq.tasks.lm.shape import GRAPHS as DEFAULT_GRAPHS

# The variants and graphs come from keras_seq.tasks.lm.shape's table (SHARED_TABLE_VARIANTS:
# step models quantized by ai-edge-quantizer, pinned in requirements.txt, with the embedding
# table shared with a tied output layer; bits of weight per variant).


# ----------------------------------------------------------------------------------------
# Conversion


def build_saved_model(graphs: LMGraphs, directory: str | Path, graph_names,
                      seq_length: int = 32, seq_batch: int = 1) -> dict:
    """Save one SavedModel with a signature per graph (frozen plain-variable weights).

    Returns ``{graph: signature info}``.
    """
    frozen = FrozenWeights(graphs.model)
    signatures, info = {}, {}
    for name in graph_names:
        fused = name.endswith("_fused")
        if fused and not graphs.fusable():
            continue
        is_seq = name.startswith("sequence")
        batch, length = (seq_batch, seq_length) if is_seq else (1, 1)
        fn = graphs.concrete(name, batch=batch, length=length, frozen=frozen)
        signatures[name] = fn
        states = [] if fused else list(graphs.state_names)
        info[name] = {"batch": batch, "length": length, "state_names": states,
                      "inputs": (["tokens"] if is_seq else ["token"]) + states,
                      "outputs": ["logits"] + states}
    tf.saved_model.save(frozen, str(directory), signatures=signatures)
    return info


def _converter(saved_dir, signature: str, variant: str, representative=None,
               fallback: bool = False, per_channel: bool = True, learned_ranges: bool = False):
    conv = tf.lite.TFLiteConverter.from_saved_model(str(saved_dir), signature_keys=[signature])
    conv._experimental_disable_per_channel = not per_channel  # see PER_TENSOR_RETRY
    if variant == "float32":
        return conv
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    if variant == "float16":
        conv.target_spec.supported_types = [tf.float16]
    elif variant == "dynamic":
        pass
    elif variant in INTEGER_VARIANTS:
        if learned_ranges:  # full-integer QAT: the graph's FakeQuant ops carry the ranges
            if variant != "int8":
                raise KerasSeqError(f"a model trained with qat='int8' exports int8, not "
                                    f"{variant}")
            return conv  # integer kernels wherever a range is known (float_ops checks)
        if representative is None:
            raise KerasSeqError(f"the {variant} variant needs calibration data")
        conv.representative_dataset = representative
        ops = ([tf.lite.OpsSet.TFLITE_BUILTINS_INT8] if variant == "int8" else
               [tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8])
        if fallback:  # float kernels where an op has no integer kernel
            ops.append(tf.lite.OpsSet.TFLITE_BUILTINS)
        conv.target_spec.supported_ops = ops
    else:
        raise KerasSeqError(f"unknown variant {variant!r}; expected one of "
                            f"{', '.join(ALL_VARIANTS)}")
    return conv


INTEGER_VARIANTS = ("int8", "int16x8")
# The int16x8 calibrator keeps one max for a weight table that a GATHER (the embedding)
# and a FULLY_CONNECTED (the tied output layer) both read, then refuses to quantize the
# layer per channel ("Mismatch between number of weight maxs and channels: 1 vs V"): such
# a model converts again with one weight scale per tensor, and the note says so.
PER_TENSOR_RETRY = "Mismatch between number of weight maxs and channels"


@contextlib.contextmanager
def _converting():
    """Around every ``converter.convert()``: the one warning keras-seq cannot fix silenced,
    and the converter's full garbage collection made cheap.

    The converter's own calibrator (int8 / int16x8 variants) builds a
    ``tf.lite.Interpreter``, which warns that it is deprecated in favour of
    ``ai_edge_litert``; everything keras-seq runs itself uses ``ai_edge_litert``.
    The SavedModel converter also runs ``gc.collect()`` after loading each model, to free
    it. That full collection scans every object the process holds: 0.5 s per conversion in
    a process holding many models (a test session, a pipeline that exports several
    variants). The objects older than the conversion are frozen for its duration
    (``gc.freeze``), so the collection scans only the conversion's own and still frees
    them; a caller's own frozen objects are left as they are."""
    freeze = gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore",
                                    message=r"(?s).*tf\.lite\.Interpreter is deprecated")
            yield
    finally:
        if freeze:
            gc.unfreeze()


def convert(saved_dir, signature: str, variant: str, representative=None,
            learned_ranges: bool = False) -> tuple[bytes, str]:
    """Convert one signature; returns ``(flatbuffer, note)``.

    ``learned_ranges``: the graph holds ``FakeQuantWithMinMaxVars`` ops at every quantized
    activation (a ``qat="int8"`` model): the ``int8`` variant takes its ranges from them,
    with no calibration data.

    Integer variants first try integer kernels only; if the converter refuses, they retry
    with float fallback for the ops that have none, and the note says so. The converter
    does not always refuse (with int8 kernels only it silently keeps e.g. ``SIN`` in float),
    so the note of an integer variant also names every op left computing in float (see
    :func:`float_ops`); an empty note means integer kernels throughout, float only at the
    model's inputs and outputs.
    """
    if variant in SHARED_TABLE_VARIANTS:
        with _converting():
            flat = _converter(saved_dir, signature, "float32").convert()
        return quantize_shared_table(flat, SHARED_TABLE_VARIANTS[variant]), ""
    with _converting():
        try:
            flat, note = _converter(saved_dir, signature, variant, representative,
                                    learned_ranges=learned_ranges).convert(), ""
        except Exception as err:  # noqa: BLE001 - the converter raises many kinds
            if variant not in INTEGER_VARIANTS or learned_ranges:
                raise
            first = str(err).strip().splitlines()[-1][:200] if str(err).strip() else repr(err)
            if PER_TENSOR_RETRY in first:
                flat = _converter(saved_dir, signature, variant, representative,
                                  per_channel=False).convert()
                note = "one weight scale per tensor (the tied table refused per-channel)"
            else:
                conv = _converter(saved_dir, signature, variant, representative, fallback=True)
                flat = conv.convert()
                note = f"integer-only conversion failed ({first}); float fallback allowed"
    if variant in INTEGER_VARIANTS:
        ops = float_ops(flat)
        kept = [op for op in ops if op not in ("QUANTIZE", "DEQUANTIZE")] or ops
        if kept:
            note = (f"{note}; " if note else "") + f"float kernels kept: {', '.join(kept)}"
    return flat, note


def _lookup_tables(flat: bytes) -> bytes:
    """The same model with every ``GATHER`` of rows from a constant 2-D table (the
    embedding) replaced by ``EMBEDDING_LOOKUP`` (same output: row ``ids[i]`` of the table).

    ai-edge-quantizer quantizes ``EMBEDDING_LOOKUP`` tables but leaves a ``GATHER`` table in
    float32, which then keeps a float copy of a tied embedding beside the quantized output
    layer; as ``EMBEDDING_LOOKUP`` the one table is quantized once for both.
    """
    # lazy: LiteRT's flatbuffer tools, only for the shared-table variants
    from ai_edge_litert import schema_py_generated as schema
    from ai_edge_litert.tools import flatbuffer_utils

    model = flatbuffer_utils.read_model_from_bytearray(bytearray(flat))
    ops = schema.BuiltinOperator
    codes = [flatbuffer_utils.get_builtin_code_from_operator_code(c)
             for c in model.operatorCodes]
    lookup_code = None
    for subgraph in model.subgraphs:
        for op in subgraph.operators:
            if codes[op.opcodeIndex] != ops.GATHER:
                continue
            table, ids = int(op.inputs[0]), int(op.inputs[1])
            tensor = subgraph.tensors[table]
            axis = getattr(op.builtinOptions, "axis", 0)
            if model.buffers[tensor.buffer].data is None or len(tensor.shape) != 2 or axis:
                continue  # not a constant table read by rows
            if lookup_code is None:
                code = schema.OperatorCodeT()
                code.builtinCode = code.deprecatedBuiltinCode = ops.EMBEDDING_LOOKUP
                code.version = 1
                model.operatorCodes.append(code)
                lookup_code = len(model.operatorCodes) - 1
            op.opcodeIndex = lookup_code
            op.inputs = np.array([ids, table], np.int32)  # EMBEDDING_LOOKUP(ids, table)
            op.builtinOptionsType, op.builtinOptions = 0, None
    return bytes(flatbuffer_utils.convert_object_to_bytearray(model))


def quantize_shared_table(flat: bytes, bits: int) -> bytes:
    """A float32 step model with its weights quantized to ``bits`` (4 or 8), channelwise,
    by ai-edge-quantizer's dynamic recipe: ``FULLY_CONNECTED`` weights and the embedding
    table (after :func:`_lookup_tables`) stored as integers, activations quantized on the
    fly. A table shared by the embedding and a tied output layer stays one tensor.
    """
    try:
        # lazy: an optional export dependency (pulls its own flatbuffer tools)
        from ai_edge_quantizer import quantizer, recipe
    except ImportError:
        raise KerasSeqError(
            "the int4 and dynamic_shared variants need ai-edge-quantizer, which is not "
            "installed; run `pip install ai-edge-quantizer==0.10.0` (the version in "
            "requirements.txt) or export the other variants") from None
    if bits not in (4, 8):
        raise KerasSeqError(f"received bits={bits}; the shared-table variants have 4 or 8")
    chosen = recipe.dynamic_wi4_afp32() if bits == 4 else recipe.dynamic_wi8_afp32()
    result = quantizer.Quantizer(_lookup_tables(flat), chosen).quantize(
        enable_progress_bar=False, enable_progress_report=False)
    return bytes(result.quantized_model)


def _interpreter(model: bytes | str | Path):
    # lazy: loads LiteRT only when this runs
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kwargs = {"model_content": model} if isinstance(model, bytes) else {"model_path": str(model)}
    # no default delegate: XNNPACK would replace ops by DELEGATE nodes once allocated
    resolver = OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
    return Interpreter(experimental_op_resolver_type=resolver, **kwargs)


def op_list(model: bytes | str | Path) -> list[str]:
    """Sorted distinct builtin op names of a TFLite model."""
    return sorted({d["op_name"] for d in _interpreter(model)._get_ops_details()})


def float_ops(model: bytes | str | Path) -> list[str]:
    """Sorted distinct ops of a TFLite model that compute in float.

    Every op with a floating-point input or output counts, except a ``QUANTIZE`` reading
    a model input and a ``DEQUANTIZE`` writing a model output: the float inputs and
    outputs an integer variant keeps. Empty for a fully integer model.
    """
    interp = _interpreter(model)
    dtypes = {d["index"]: d["dtype"] for d in interp.get_tensor_details()}
    model_inputs = {d["index"] for d in interp.get_input_details()}
    model_outputs = {d["index"] for d in interp.get_output_details()}
    found = set()
    for op in interp._get_ops_details():
        ins = [i for i in op["inputs"] if i >= 0]
        outs = [i for i in op["outputs"] if i >= 0]
        if op["op_name"] == "QUANTIZE" and set(ins) <= model_inputs:
            ins = []
        if op["op_name"] == "DEQUANTIZE" and set(outs) <= model_outputs:
            outs = []
        if any(np.issubdtype(dtypes[i], np.floating) for i in ins + outs):
            found.add(op["op_name"])
    return sorted(found)


# ----------------------------------------------------------------------------------------
# Calibration data


def _stream_states(graphs: LMGraphs, ids: np.ndarray):
    """Run the float step graph over ``ids``: the (token, state-before) pairs."""
    step = tf.function(lambda **kw: graphs.step(**kw))
    states = graphs.zero_states(1)
    out = []
    for token in ids:
        out.append((int(token), {k: v.copy() for k, v in states.items()}))
        res = step(token=np.array([token], np.int32), **states)
        states = {k: np.asarray(res[k]) for k in graphs.state_names}
    return out


def representative_data(graphs: LMGraphs, ids, graph: str, info: dict, max_samples: int = 200):
    """A ``representative_dataset`` callable for ``graph``: dicts keyed by input name,
    states taken from a float run over real text (so calibration sees real ranges)."""
    ids = np.asarray(ids, np.int32)
    fused = graph.endswith("_fused")
    if graph.startswith("step"):
        pairs = _stream_states(graphs, ids[:max_samples])

        def gen():
            for token, states in pairs:
                sample = {"token": np.array([token], np.int32)}
                if not fused:
                    sample.update(states)
                yield sample

        return gen
    batch, length = info["batch"], info["length"]
    windows = []
    seq = tf.function(lambda **kw: graphs.sequence(**kw))
    states = graphs.zero_states(batch)
    n_windows = max(1, min(max_samples // max(length, 1) + 1, len(ids) // (batch * length)))
    for w in range(n_windows):
        chunk = ids[w * batch * length:(w + 1) * batch * length]
        if len(chunk) < batch * length:
            break
        tokens = chunk.reshape(batch, length)
        windows.append((tokens, {k: v.copy() for k, v in states.items()}))
        res = seq(tokens=tokens, **states)
        states = {k: np.asarray(res[k]) for k in graphs.state_names}

    def gen():
        for tokens, st in windows:
            sample = {"tokens": tokens}
            if not fused:
                sample.update(st)
            yield sample

    return gen


# ----------------------------------------------------------------------------------------
# Parity


def keras_log_probs(model, ids: np.ndarray) -> np.ndarray:
    """Keras reference: log-probs of every next token of ``ids`` from a zero state (a
    ``RecurrentLM`` through :func:`evaluate_stream`, any other model through its own
    layers' loops, :func:`~keras_seq.export.lm_stack.keras_stream_log_probs`)."""
    stack = read_lm(model)
    if isinstance(stack.model, RecurrentLM):
        return evaluate_stream(stack.model, ids)[0]
    return keras_stream_log_probs(stack, ids)


def keras_logits(model, ids: np.ndarray) -> np.ndarray:
    """Keras logits ``(T, V)`` of a stateless ``RecurrentLM`` pass over ``ids`` (zero
    initial state)."""
    runner = model.clone_for_batch(1, stateful=False)
    return np.asarray(runner(np.asarray(ids, np.int32)[None], training=False))[0]


def keras_reference(model, ids: np.ndarray) -> dict:
    """What the exported models are checked against on ``ids``, from the zero state:
    ``{"probs": (T, V), "logits": (T, V) or None}``. A ``RecurrentLM`` gives its logits
    (a stateless batch-1 copy); any other model is called itself
    (:func:`~keras_seq.export.lm_stack.keras_probs`), and gives logits only when its
    output layer has no activation (a softmax head's output is the probabilities)."""
    stack = read_lm(model)
    if isinstance(stack.model, RecurrentLM):
        logits = keras_logits(stack.model, ids).astype(np.float64)
        return {"probs": _softmax_rows(logits), "logits": logits}
    outputs = keras_outputs(stack, ids)
    if stack.activation == "linear":
        return {"probs": _softmax_rows(outputs), "logits": outputs}
    return {"probs": keras_probs(stack, ids), "logits": None}


def _softmax_rows(logits: np.ndarray) -> np.ndarray:
    z = np.asarray(logits, np.float64)
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def tflite_logits(path, ids: np.ndarray, tokenizer) -> np.ndarray:
    """Logits of a step or sequence TFLite model over ``ids`` from a zero state."""
    lm = LiteRTLM(path, tokenizer=tokenizer)
    if lm.graph.startswith("step"):
        return np.stack([lm.step(int(t)).copy() for t in ids])
    batch, length = lm._in_shape["tokens"]
    interp, out = lm.interpreter, []
    for start in range(0, len(ids), length):
        window = np.zeros((1, length), np.int32)
        chunk = ids[start:start + length]
        window[0, :len(chunk)] = chunk
        interp.set_tensor(lm._in["tokens"], window)
        for name in lm.state_names:
            interp.set_tensor(lm._in[name], lm.states[name])
        interp.invoke()
        for name in lm.state_names:
            lm.states[name] = interp.get_tensor(lm._out[name])
        out.append(interp.get_tensor(lm._out["logits"])[0, :len(chunk)])
    return np.concatenate(out)


def parity(model_path, tokenizer, reference: dict, logit_ids: np.ndarray,
           val_ids: np.ndarray, ref_ppl: float | None) -> dict:
    """The exported model against Keras: max |Δprobabilities| (and |Δlogits| where Keras
    gives logits) and the share of positions whose most likely next token is the same
    (``top1_agreement``) on ``logit_ids``, and the perplexity of ``val_ids`` through the
    model (left out without ``val_ids``). ``reference``: :func:`keras_reference` on
    ``logit_ids`` (or Keras's logits ``(T, V)`` there)."""
    if not isinstance(reference, dict):
        logits = np.asarray(reference, np.float64)
        reference = {"probs": _softmax_rows(logits), "logits": logits}
    got = tflite_logits(model_path, logit_ids, tokenizer).astype(np.float64)
    probs = _softmax_rows(got)
    out = {"max_abs_prob_diff": float(np.abs(probs - reference["probs"]).max()),
           "top1_agreement": float((probs.argmax(-1) == reference["probs"].argmax(-1)).mean()),
           "logit_tokens": int(len(logit_ids)), "keras_val_ppl": ref_ppl}
    if reference.get("logits") is not None:
        out["max_abs_logit_diff"] = float(np.abs(got - reference["logits"]).max())
    if val_ids is not None and len(val_ids) >= 2:
        lm = LiteRTLM(model_path, tokenizer=tokenizer)
        t0 = time.perf_counter()
        logp = lm.score_ids(val_ids)
        ppl = float(np.exp(-logp.mean()))
        out.update(val_tokens=int(len(logp)), val_ppl=ppl,
                   ppl_delta_pct=100.0 * (ppl / ref_ppl - 1.0),
                   score_seconds=time.perf_counter() - t0)
    return out


# ----------------------------------------------------------------------------------------
# The export


def export_ids(config, tokenizer, calib_tokens: int = 200, parity_tokens: int = 200,
               val_tokens: int | None = None):
    """The token ids an export of a run uses: ``(calib_ids, logit_ids, val_ids)``.

    Calibration ids come from the training split; ``val_ids`` is the validation split (the
    end of training when there is none) capped at ``val_tokens``; ``logit_ids`` its first
    ``parity_tokens``. Each starts with the end-of-line token, as a stream does.
    """
    corpus = corpus_for(config)
    train_ids = tokenizer.encode(corpus.text("train")[:200_000])
    val_text = corpus.text("val")
    val_ids = tokenizer.encode(val_text) if val_text.strip() else train_ids[-2000:]
    start = _start_ids(tokenizer)
    val_ids = np.concatenate([start, val_ids]).astype(np.int32)
    if val_tokens:
        val_ids = val_ids[:val_tokens + 1]
    calib_ids = np.concatenate([start, train_ids[:calib_tokens]]).astype(np.int32)
    return calib_ids, val_ids[:parity_tokens], val_ids


def _start_ids(tokenizer) -> np.ndarray:
    """The id a stream starts from: ``<eos>``, or ``"\\n"`` for a char tokenizer."""
    return np.array([tokenizer.eos_id if tokenizer.eos_id is not None
                     else tokenizer.encode("\n")[0]], np.int32)


def given_ids(vocab_size: int, tokenizer=None, ids=None, text=None, calib_ids=None,
              calib_tokens: int = 200, parity_tokens: int = 200,
              val_tokens: int | None = None):
    """The token ids an export of a model uses when they are passed directly:
    ``(calib_ids, logit_ids, val_ids)``, or ``None`` when none were passed.

    ``ids``: a held-out token stream (parity and perplexity are measured on it), or
    ``text`` encoded with ``tokenizer`` (a line start prepended, as a stream begins);
    ``calib_ids``: the stream that calibrates the integer variants (default: the start of
    the held-out one). Every id must lie in ``[0, vocab_size)``.
    """
    if ids is None and text is None and calib_ids is None:
        return None
    if ids is not None and text is not None:
        raise KerasSeqError("received both ids and text; pass the held-out stream once, as "
                            "token ids or as text (with tokenizer=)")
    if text is not None:
        if tokenizer is None:
            raise KerasSeqError("received text but no tokenizer to encode it; pass "
                                "tokenizer= (a keras-seq tokenizer) or token ids as ids=")
        ids = np.concatenate([_start_ids(tokenizer), tokenizer.encode(text)])
    val = None if ids is None else _checked_ids("ids", ids, vocab_size)
    calib = val if calib_ids is None else _checked_ids("calib_ids", calib_ids, vocab_size)
    if val is not None and val_tokens:
        val = val[:val_tokens + 1]
    if val is not None and len(val) < 2:
        raise KerasSeqError(f"the held-out stream has {len(val)} token(s); parity and "
                            "perplexity need at least 2")
    return calib[:calib_tokens + 1], None if val is None else val[:parity_tokens], val


def _checked_ids(name: str, ids, vocab_size: int) -> np.ndarray:
    """``ids`` as a 1-D int32 array, refused when not integers in ``[0, vocab_size)``."""
    arr = np.asarray(ids)
    if arr.size == 0 or not np.issubdtype(arr.dtype, np.integer):
        raise KerasSeqError(f"{name} must be a non-empty sequence of integer token ids, got "
                            f"{arr.dtype} of shape {arr.shape}")
    arr = arr.reshape(-1)
    if arr.min() < 0 or arr.max() >= vocab_size:
        raise KerasSeqError(f"{name} holds ids from {int(arr.min())} to {int(arr.max())}; "
                            f"the model's vocabulary is [0, {vocab_size})")
    return arr.astype(np.int32)


def _check_names(variants, graphs) -> None:
    """Refuse (``KerasSeqError``) variants not in :data:`ALL_VARIANTS` and graphs not in
    :data:`DEFAULT_GRAPHS`."""
    unknown = set(variants) - set(ALL_VARIANTS)
    if unknown:
        raise KerasSeqError(f"unknown variant(s) {', '.join(sorted(unknown))}; expected some "
                            f"of {', '.join(ALL_VARIANTS)}")
    bad = set(graphs) - set(DEFAULT_GRAPHS)
    if bad:
        raise KerasSeqError(f"unknown graph(s) {', '.join(sorted(bad))}; expected some of "
                            f"{', '.join(DEFAULT_GRAPHS)}")


def _keras_reference(model, logit_ids: np.ndarray, val_ids: np.ndarray, printer):
    """The float Keras reference: ``(reference on logit_ids, val PPL on val_ids)``, the
    PPL printed."""
    reference = keras_reference(model, logit_ids)
    ref_ppl = float(np.exp(-keras_log_probs(model, val_ids).mean()))
    printer(f"Keras float reference: val PPL {ref_ppl:.3f} over {len(val_ids) - 1:,} "
            "tokens")
    return reference, ref_ppl


def _graph_variants(graph: str, variants) -> list:
    """The asked ``variants`` that ``graph`` is exported in: sequence graphs float32 and
    dynamic only, the shared-table variants step models only, fused graphs no integer
    variants (float32 when nothing is left)."""
    graph_variants = list(variants)
    if graph.startswith("sequence"):
        graph_variants = [v for v in variants if v in ("float32", "dynamic")] or \
            ["float32"]
    elif graph != "step":  # the shared-table variants are step models
        graph_variants = [v for v in graph_variants
                          if v not in SHARED_TABLE_VARIANTS]
    if graph.endswith("_fused"):  # integer calibration of the fused op is fragile
        graph_variants = [v for v in graph_variants if v in
                          ("float32", "float16", "dynamic")] or ["float32"]
    return graph_variants


def model_metadata(lm_graphs: LMGraphs, graph: str, variant: str, ginfo: dict, flat: bytes,
                   tokenizer, run_dir, note: str = "") -> dict:
    """The metadata ``.json`` written beside one exported model (``write_metadata``): what
    :class:`~keras_seq.runtime.litert.LiteRTLM` and the web page read to run it (signature,
    state names and shapes, tokenizer fingerprint, the model's shape and ops).
    ``ginfo``: the graph's entry of :func:`build_saved_model`; ``flat``: the model bytes.
    Without a tokenizer the model runs on token ids (``tokenizer_fingerprint`` null)."""
    return {"tokenizer_fingerprint": tokenizer.fingerprint if tokenizer else None,
            "tokenizer_file": "tokenizer.json" if tokenizer else None,
            "run_dir": str(run_dir), **lm_graphs.describe(), "graph": graph,
            "variant": variant, "signature": graph, "batch": ginfo["batch"],
            "length": ginfo["length"], "state_names": ginfo["state_names"],
            "state_shapes": {n: lm_graphs.state_shapes(ginfo["batch"])[n]
                             for n in ginfo["state_names"]},
            "inputs": ginfo["inputs"], "outputs": ginfo["outputs"],
            "ops": op_list(flat), "note": note, "size_bytes": len(flat)}


def _parity_line(p: dict) -> str:
    """The parity part of a variant's printed line."""
    if "max_abs_logit_diff" in p:
        diff = f"max|Δlogits| {p['max_abs_logit_diff']:.2e}"
    else:
        diff = f"max|Δprobs| {p['max_abs_prob_diff']:.2e}"
    if "val_ppl" in p:
        diff += f"  PPL {p['val_ppl']:.3f} ({p['ppl_delta_pct']:+.2f}%)"
    return "  " + diff


def _export_variant(saved: Path, out_dir: Path, lm_graphs: LMGraphs, graph: str,
                    ginfo: dict, variant: str, calib: tuple, origin: tuple,
                    parity_args: tuple | None, printer) -> dict:
    """Convert ``graph`` to ``variant``, write it with its metadata, check its parity
    (``parity_args``: :func:`parity`'s arguments after the path; None: no check) and print
    a line; returns its manifest entry (with ``error`` when the conversion failed).
    ``calib``: ``(calib_ids, calib_tokens)`` for the integer variants; ``origin``:
    ``(tokenizer, run_dir)`` for the metadata."""
    t0 = time.perf_counter()
    rep = None
    learned = lm_graphs.stack.qat == "int8" and variant == "int8"  # ranges in the graph
    if variant in INTEGER_VARIANTS and not learned:
        calib_ids, calib_tokens = calib
        rep = representative_data(lm_graphs, calib_ids, graph, ginfo, calib_tokens)
    name = f"{graph}_{variant}"
    path = out_dir / f"{name}.tflite"
    try:
        flat, note = convert(saved, graph, variant, rep, learned_ranges=learned)
    except Exception as err:  # noqa: BLE001 - report and go on
        msg = str(err).strip().splitlines()[-1][:300] if str(err).strip() else \
            repr(err)
        printer(f"  {name:<24} FAILED: {msg}")
        return {"name": name, "graph": graph, "variant": variant, "error": msg}
    path.write_bytes(flat)
    meta = model_metadata(lm_graphs, graph, variant, ginfo, flat, *origin, note=note)
    ops = meta["ops"]
    write_metadata(path, meta)
    entry = {"name": name, "graph": graph, "variant": variant,
             "file": path.name, "size_bytes": len(flat), "ops": ops,
             "note": note, "convert_seconds": time.perf_counter() - t0}
    if parity_args is not None:
        entry["parity"] = parity(path, *parity_args)
        meta["parity"] = entry["parity"]
        write_metadata(path, meta)
    p = entry.get("parity")
    printer(f"  {name:<24} {len(flat) / 1024:8.1f} KiB{_parity_line(p) if p else ''}"
            + (f"  [{note}]" if note else ""))
    return entry


def export_tflite(source, out_dir, variants=VARIANTS, graphs=DEFAULT_GRAPHS,
                  seq_length: int = 32, calib_tokens: int = 200, parity_tokens: int = 200,
                  val_tokens: int | None = None, check_parity: bool = True,
                  printer=print, model=None, tokenizer=None, config=None, *,
                  ids=None, text=None, calib_ids=None) -> dict:
    """Export ``graphs`` × ``variants`` of a language model to ``out_dir``.

    Args:
        source: a ``keras-seq train lm`` run directory, or a built Keras model: a
            ``RecurrentLM`` or your own Sequential / functional model (embedding →
            recurrent and per-token layers → output layer; see
            :func:`~keras_seq.export.lm_stack.read_lm` for what streams). With ``model=``
            given, ``source`` only names the origin in the metadata.
        out_dir: the folder written (created if missing).
        variants: a subset of :data:`ALL_VARIANTS`. Sequence graphs get float32 and dynamic
            only when more are asked (scoring models; the step models are the deployed ones).
        graphs: a subset of ``step``, ``step_fused``, ``sequence``, ``sequence_fused``
            (fused graphs are skipped unless every recurrent layer is a plain LSTM).
        seq_length: static window length of the sequence graphs.
        calib_tokens: tokens that calibrate the integer variants.
        parity_tokens: held-out tokens on which outputs are compared with Keras.
        val_tokens: cap on the held-out tokens scored for PPL (default: all).
        tokenizer: a keras-seq tokenizer, saved beside the models (``tokenizer.json``) for
            the runtime's text methods; None: the models run on token ids.
        config: a run's ``LMConfig``, whose corpus gives the calibration (training split)
            and held-out (validation split) ids.
        ids: instead of ``config``: a held-out token stream (1-D ints) for parity and
            perplexity; ``text``: the same as text, encoded with ``tokenizer``;
            ``calib_ids``: the calibration stream (default: the start of ``ids``).

    Without ``config`` or ids, ``check_parity=False`` and float variants only.
    Returns the manifest (also written to ``out_dir/manifest.json``).
    """
    started = time.perf_counter()
    run_dir = source
    if model is None and isinstance(source, keras.Model):
        model, run_dir = source, f"{type(source).__name__} {source.name}"
    elif model is None:
        config, tokenizer, model = load_run(source)
    _check_names(variants, graphs)
    lm_graphs = LMGraphs(model)
    variants, graphs = _qat_plan(lm_graphs.stack.qat, variants, graphs, printer)
    _check_tokenizer(tokenizer, lm_graphs.vocab_size)
    calib_ids, logit_ids, val_ids = _export_streams(
        lm_graphs.vocab_size, tokenizer, config, (ids, text, calib_ids),
        (calib_tokens, parity_tokens, val_tokens))
    _check_data(variants, check_parity, calib_ids, val_ids)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if tokenizer is not None:
        tokenizer.save(out_dir)

    ref_ppl = parity_args = None
    if check_parity:
        reference, ref_ppl = _keras_reference(model, logit_ids, val_ids, printer)
        parity_args = (tokenizer, reference, logit_ids, val_ids, ref_ppl)

    manifest = {"run_dir": str(run_dir),
                "tokenizer_fingerprint": tokenizer.fingerprint if tokenizer else None,
                "model": lm_graphs.describe(), "keras_val_ppl": ref_ppl, "models": []}
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "saved_model"
        info = build_saved_model(lm_graphs, saved, graphs, seq_length=seq_length)
        for graph, ginfo in info.items():
            for variant in _graph_variants(graph, variants):
                manifest["models"].append(_export_variant(
                    saved, out_dir, lm_graphs, graph, ginfo, variant,
                    (calib_ids, calib_tokens), (tokenizer, run_dir), parity_args, printer))
    manifest["export_seconds"] = time.perf_counter() - started
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    return manifest


def _export_streams(vocab_size: int, tokenizer, config, given: tuple, counts: tuple):
    """``(calib_ids, logit_ids, val_ids)``: from ``given`` = ``(ids, text, calib_ids)``
    where passed (:func:`given_ids`), else from the run's ``config`` (:func:`export_ids`),
    else Nones. ``counts``: ``(calib_tokens, parity_tokens, val_tokens)``."""
    streams = given_ids(vocab_size, tokenizer, *given, *counts)
    if streams is None and config is not None:
        streams = export_ids(config, tokenizer, *counts)
    return streams or (None, None, None)


#: the variants a quantization-aware model exports: the one it trained for (its integers
#: exactly) and, for int4, float32 (the same rounded weights in float, to check against)
#: (an int8 model has no float32 one: the converter makes its FakeQuant ops integer anyway)
QAT_VARIANTS = {"int8": ("int8",), "int4": ("float32", "int4")}


def _qat_plan(qat: str | None, variants, graphs, printer) -> tuple:
    """``(variants, graphs)`` of a quantization-aware model: a variant it did not train
    for is refused; graphs other than ``step`` are left out, saying so."""
    if qat is None:
        return variants, graphs
    wrong = [v for v in variants if v not in QAT_VARIANTS[qat]]
    if wrong:
        what = "int8 weights and activations" if qat == "int8" else "int4 weights"
        raise KerasSeqError(
            f"this model was trained with qat={qat!r} ({what}); it exports "
            f"{' and '.join(QAT_VARIANTS[qat])}, not {', '.join(wrong)}: another variant "
            "would round it to another grid. Export the float run for those")
    dropped = [g for g in graphs if g != "step"]
    if dropped:
        printer(f"note: a qat={qat!r} model exports its step graph; left out: "
                f"{', '.join(dropped)}")
    return variants, [g for g in graphs if g == "step"]


def _check_tokenizer(tokenizer, vocab_size: int) -> None:
    """A tokenizer given with a model must have the model's vocabulary size."""
    if tokenizer is not None and tokenizer.vocab_size != vocab_size:
        raise KerasSeqError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model scores "
            f"{vocab_size}; pass the tokenizer the model was trained with")


def _check_data(variants, check_parity: bool, calib_ids, val_ids) -> None:
    """Refuse, before any work, an export that needs ids it was not given."""
    how = ("pass ids= (a held-out token stream), text= (with tokenizer=) or config= (a "
           "run's LMConfig)")
    if check_parity and val_ids is None:
        raise KerasSeqError(f"checking parity against Keras needs held-out token ids: {how}, "
                            "or check_parity=False")
    calibrated = [v for v in variants if v in INTEGER_VARIANTS]
    if calibrated and calib_ids is None:
        raise KerasSeqError(f"the {', '.join(calibrated)} variant(s) calibrate activation "
                            f"ranges on real token ids: {how}, or leave them out")


def best_demo_model(manifest: dict, tolerance_pct: float = 1.5, latencies: dict | None = None):
    """The step model for the demo: the fastest (by ``latencies[name]`` µs, else smallest)
    step variant whose val PPL is within ``tolerance_pct`` of float Keras."""
    candidates = []
    for m in manifest["models"]:
        if "error" in m or not m["graph"].startswith("step"):
            continue
        p = m.get("parity")
        if p and p["ppl_delta_pct"] > tolerance_pct:
            continue
        key = latencies.get(m["name"]) if latencies else None
        candidates.append((key if key is not None else float("inf"), m["size_bytes"], m))
    if not candidates:
        return None
    return min(candidates, key=lambda c: (c[0], c[1]))[2]


def copy_model(out_dir, name: str, target_dir) -> Path:
    """Copy ``name``.tflite with its metadata and tokenizer into ``target_dir``."""
    out_dir, target_dir = Path(out_dir), Path(target_dir)
    target_dir.mkdir(parents=True, exist_ok=True)
    for suffix in (".tflite", ".json"):
        shutil.copy2(out_dir / f"{name}{suffix}", target_dir / f"{name}{suffix}")
    shutil.copy2(out_dir / "tokenizer.json", target_dir / "tokenizer.json")
    return target_dir / f"{name}.tflite"


def _held_out(args, tokenizer) -> dict:
    """``export_tflite``'s ``ids``/``text`` from ``--ids``/``--data``."""
    if getattr(args, "ids", None):
        try:
            return {"ids": np.load(args.ids, allow_pickle=False)}
        except (OSError, ValueError) as err:
            raise KerasSeqError(f"--ids {args.ids}: cannot read a .npy array ({err}); save "
                                "the ids with numpy.save") from None
    if getattr(args, "data", None):
        if tokenizer is None:
            raise KerasSeqError("--data is text, which needs --tokenizer to become ids; or "
                                "pass the ids themselves with --ids IDS.npy")
        path = Path(args.data)
        if not path.is_file():
            raise KerasSeqError(f"--data {path} is not a file; pass held-out text")
        return {"text": path.read_text(encoding="utf-8")}
    return {}


def run_tflite(args) -> int:
    """``keras-seq export tflite``: the files, and one line (or ``--json``: the manifest)."""
    printer = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    source, model, tokenizer = model_from_args(args)
    held_out = _held_out(args, tokenizer) if model is not None else {}
    if model is not None and not held_out and args.parity:
        raise KerasSeqError("--model needs held-out data for the parity checks: --data "
                            "TEXT_FILE (with --tokenizer) or --ids IDS.npy, or --no-parity")
    manifest = export_tflite(source, args.out, variants=args.variants,
                             graphs=args.graphs, seq_length=args.seq_length,
                             calib_tokens=args.calib_tokens, check_parity=args.parity,
                             printer=printer, model=model, tokenizer=tokenizer, **held_out)
    if args.json:
        print_json(manifest)
    else:
        print(f"wrote {len([m for m in manifest['models'] if 'error' not in m])} model(s) to "
              f"{args.out} (manifest.json lists sizes, ops and parity)")
    return 0
