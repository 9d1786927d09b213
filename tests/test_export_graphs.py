"""Step / sequence graphs equal the Keras model over a streamed sequence; fused LSTM op."""

import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter

from keras_seq.errors import KerasSeqError
from keras_seq.export.graphs import LMGraphs
from keras_seq.export.tflite import (
    VARIANTS,
    build_saved_model,
    convert,
    op_list,
    representative_data,
)
from keras_seq.models import RecurrentLM

# every weight matrix ≥ 1,024 elements (embedding and head 40 × 32, kernels 32 × 32·gates),
# so the dynamic-range and integer quantizers really quantize them
VOCAB, T, UNITS = 40, 9, 32
CASES = [("rnn", 1), ("gru", 1), ("lstm", 1), ("lstm", 2), ("gru", 2), ("keras-lstm", 1)]


def _model(cell, layers):
    import keras

    keras.utils.set_random_seed(0)
    lm = RecurrentLM(VOCAB, embed_dim=UNITS, units=UNITS, num_layers=layers, cell=cell)
    lm(np.zeros((1, 2), "int32"))
    # non-trivial biases, so a wrong gate order or bias layout shows; different in every
    # layer (see test_every_variant_stays_close_to_keras)
    rng = np.random.default_rng(1)
    for w in lm.weights:
        if w.path.endswith("bias"):
            w.assign(rng.normal(0, 0.5, w.shape).astype("float32"))
    return lm


def _ids():
    return np.random.default_rng(0).integers(0, VOCAB, T).astype("int32")


class _StepExport:
    """:func:`_model` of one case with its step graph saved as a SavedModel; each variant
    converted once (the float32 step model is streamed by three tests)."""

    def __init__(self, cell, layers, folder):
        self.lm = _model(cell, layers)
        self.graphs = LMGraphs(self.lm)
        self.saved = folder / "sm"
        self.info = build_saved_model(self.graphs, self.saved, ["step"])
        self._converted = {}

    def convert(self, variant, representative=None):
        """``convert(saved, "step", variant, representative)``, once per variant (only
        test_every_variant_stays_close_to_keras calibrates, once per case)."""
        if variant not in self._converted:
            self._converted[variant] = convert(self.saved, "step", variant, representative)
        return self._converted[variant]


@pytest.fixture(scope="module")
def step_export(tmp_path_factory):
    """``step_export(cell, layers)``: that case's :class:`_StepExport`, made once per
    module (the same seeded model every time it is built)."""
    made = {}

    def get(cell, layers):
        if (cell, layers) not in made:
            made[cell, layers] = _StepExport(cell, layers, tmp_path_factory.mktemp("step"))
        return made[cell, layers]

    return get


def _stream_tflite(flat, ids, state_names, units):
    it = Interpreter(model_content=flat)
    sig = list(it.get_signature_list())[0]
    run = it.get_signature_runner(sig)
    states = {n: np.zeros((1, units), np.float32) for n in state_names}
    out = []
    for t in ids:
        res = run(token=np.array([t], np.int32), **states)
        states = {n: res[n] for n in state_names}
        out.append(res["logits"][0])
    return np.stack(out)


@pytest.mark.parametrize("cell,layers", CASES)
def test_step_graph_streams_like_keras(cell, layers, step_export):
    export = step_export(cell, layers)
    lm, g = export.lm, export.graphs
    ids = _ids()
    ref = np.asarray(lm(ids[None]))[0]  # (T, V), one pass from zero state
    states, outs = g.zero_states(1), []
    for t in ids:
        res = g.step(token=np.array([t], np.int32), **states)
        states = {n: np.asarray(res[n]) for n in g.state_names}
        outs.append(np.asarray(res["logits"][0]))
    np.testing.assert_allclose(np.stack(outs), ref, atol=1e-5)
    seq = g.sequence(tokens=ids[None], **g.zero_states(1))
    np.testing.assert_allclose(np.asarray(seq["logits"][0]), ref, atol=1e-5)
    # and the float32 TFLite step model, streamed with explicit state
    flat, _ = export.convert("float32")
    assert "WHILE" not in op_list(flat)
    np.testing.assert_allclose(_stream_tflite(flat, ids, g.state_names, g.units), ref,
                               atol=1e-5)


def test_state_names_and_shapes():
    g = LMGraphs(_model("lstm", 2))
    assert g.state_names == ["h0", "c0", "h1", "c1"]
    assert g.state_shapes(1) == {n: [1, UNITS] for n in g.state_names}
    assert LMGraphs(_model("gru", 2)).state_names == ["h0", "h1"]


def test_fused_lstm_converts_to_the_builtin_op(tmp_path, step_export):
    export = step_export("lstm", 2)
    lm, g = export.lm, export.graphs
    ids = _ids()
    ref = np.asarray(lm(ids[None]))[0]
    build_saved_model(g, tmp_path / "sm", ["step_fused", "sequence_fused"], seq_length=T)
    fused, _ = convert(tmp_path / "sm", "step_fused", "float32")
    unfused, _ = export.convert("float32")  # the same model's explicit step graph
    fused_ops, unfused_ops = op_list(fused), op_list(unfused)
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in fused_ops
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" not in unfused_ops
    assert "LOGISTIC" in unfused_ops and "LOGISTIC" not in fused_ops  # gates went inside
    # streaming through the fused op: state lives in the interpreter's variable tensors
    it = Interpreter(model_content=fused)
    run = it.get_signature_runner("step_fused")
    got = np.stack([run(token=np.array([t], np.int32))["logits"][0] for t in ids])
    np.testing.assert_allclose(got, ref, atol=1e-5)
    np.testing.assert_allclose(got, _stream_tflite(unfused, ids, g.state_names, g.units),
                               atol=1e-5)
    it.reset_all_variables()  # a new stream starts from zero state again
    run = it.get_signature_runner("step_fused")
    np.testing.assert_allclose(run(token=ids[:1])["logits"][0], ref[0], atol=1e-5)
    # whole-window scoring through the fused op
    seq, _ = convert(tmp_path / "sm", "sequence_fused", "float32")
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in op_list(seq)
    run = Interpreter(model_content=seq).get_signature_runner("sequence_fused")
    np.testing.assert_allclose(run(tokens=ids[None])["logits"][0], ref, atol=1e-5)


def test_fused_refuses_other_cells():
    g = LMGraphs(_model("gru", 1))
    assert not g.fusable()
    with pytest.raises(KerasSeqError, match="fused TFLite LSTM needs plain LSTM"):
        g.fused_sequence(tf.zeros((1, 2), tf.int32))


# max |Δlogits| relative to the logit range (2.7-3.1 here), about 2.5× what each case
# measures (rnn×2 / gru×1 / lstm×2): float16 1.8e-4 / 1.5e-4 / 1.1e-4; dynamic 7.3e-3 /
# 2.6e-3 / 9.8e-4; int8 2.0e-2 / 6.3e-3 / 5.2e-3; int16x8 4.3e-3 / 1.4e-3 / 4.5e-4.
# float32 (measured ≤ 5.1e-7) is absolute.
REL_TOL = {
    ("rnn", 2): {"float16": 5e-4, "dynamic": 0.018, "int8": 0.05, "int16x8": 0.011},
    ("gru", 1): {"float16": 4e-4, "dynamic": 0.0065, "int8": 0.016, "int16x8": 0.0035},
    ("lstm", 2): {"float16": 3e-4, "dynamic": 0.0025, "int8": 0.013, "int16x8": 0.0012},
}


@pytest.mark.parametrize("cell,layers", list(REL_TOL))
def test_every_variant_stays_close_to_keras(cell, layers, step_export):
    # Stacked int16x8 models once looked broken here (errors 0.07-0.9): every layer got the
    # *same* random bias, the converter merged the equal constants into one tensor, and the
    # 16x8 quantizer (unlike int8) then scaled it for one layer only (scale = input scale ×
    # weight scale). With distinct biases (any trained model) int16x8 stacks are fine.
    export = step_export(cell, layers)
    lm, g = export.lm, export.graphs
    ids = np.random.default_rng(2).integers(0, VOCAB, 30).astype("int32")
    ref = np.asarray(lm(ids[None, :T]))[0]
    rep = representative_data(g, ids, "step", export.info["step"], 30)
    for variant in VARIANTS:
        flat, note = export.convert(variant, rep)
        assert note == "", (variant, note)
        got = _stream_tflite(flat, ids[:T], g.state_names, g.units)
        assert got.shape == ref.shape and np.isfinite(got).all()
        err = np.abs(got - ref).max()
        tol = 1e-5 if variant == "float32" else REL_TOL[cell, layers][variant] * np.ptp(ref)
        assert err < tol, (variant, err, np.ptp(ref))


@pytest.mark.parametrize("cell, kwargs", [("rnn", {}), ("lstm", {}), ("gru", {}),
                                          ("lstmp", {"proj_units": 8,
                                                     "coupled_input_forget": True})])
def test_the_merged_gate_matmul_is_the_cells_own_step(cell, kwargs):
    """``merged_step`` ([x, h] @ [kernel; recurrent_kernel]) is what the export graphs call;
    it must be ``call`` exactly, and absent where the recurrent term is not a sum (GRU)."""
    import keras

    keras.utils.set_random_seed(1)
    lm = RecurrentLM(VOCAB, embed_dim=UNITS, units=UNITS, cell=cell, **kwargs)
    lm(np.zeros((1, 2), "int32"))
    layer_cell = lm.rnns[0].cell
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, UNITS)).astype("float32")
    sizes = layer_cell.state_size if isinstance(layer_cell.state_size, list) else \
        [layer_cell.state_size]
    states = [rng.standard_normal((3, n)).astype("float32") for n in sizes]
    merged = layer_cell.merged_step(x, states)
    if cell == "gru":
        assert merged is None
        return
    h, new = layer_cell.call(x, states, training=False)
    np.testing.assert_allclose(merged[0], h, atol=1e-5)
    for a, b in zip(merged[1], new):
        np.testing.assert_allclose(a, b, atol=1e-5)
