"""keras_seq.layers.LSTMP / LSTMPCell (an LSTM with a recurrent projection, CIFG optional):
a numpy reference, keras.layers.LSTM with an identity projection, the fused kernel's
hand-written gradient, masks, state, saving, the ``lstmp`` language model and its export."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_seq.layers import LSTMP, LSTMPCell, _fused, count_params, weight_shapes
from keras_seq.layers.testing import run_with_gradients
from keras_seq.models import RecurrentLM

TOL = 1e-5
U, P, D = 6, 3, 4  # units, proj_units, input features
RNG = np.random.default_rng(0)
X = RNG.normal(size=(3, 5, D)).astype("float32")  # (B, T, D)
RIGHT = np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], bool)


def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def numpy_lstmp(x, kernel, rec, bias, proj, h, c, cifg):
    """A plain numpy LSTMP over ``x (B, T, D)``: outputs ``(B, T, P)``, final ``h``, ``c``."""
    units = proj.shape[0]
    outs = []
    for t in range(x.shape[1]):
        z = x[:, t] @ kernel + h @ rec + bias
        if cifg:
            f = sigmoid(z[:, :units])
            g = np.tanh(z[:, units:2 * units])
            o = sigmoid(z[:, 2 * units:])
            i = 1.0 - f
        else:
            i, f = sigmoid(z[:, :units]), sigmoid(z[:, units:2 * units])
            g, o = np.tanh(z[:, 2 * units:3 * units]), sigmoid(z[:, 3 * units:])
        c = f * c + i * g
        h = (o * np.tanh(c)) @ proj
        outs.append(h)
    return np.stack(outs, 1), h, c


def _random_weights(layer, seed=1):
    """Non-trivial weights (biases included), so a wrong gate order or layout shows."""
    rng = np.random.default_rng(seed)
    layer.set_weights([rng.normal(0, 0.5, w.shape).astype("float32")
                       for w in layer.get_weights()])


@pytest.mark.parametrize("cifg", [False, True])
def test_matches_numpy_reference(cifg):
    layer = LSTMP(U, P, coupled_input_forget=cifg, return_sequences=True, return_state=True)
    h0 = RNG.normal(size=(3, P)).astype("float32")
    c0 = RNG.normal(size=(3, U)).astype("float32")
    layer(X, initial_state=[h0, c0])
    _random_weights(layer)
    kernel, rec, bias, proj = layer.get_weights()
    gates = 3 if cifg else 4
    assert (kernel.shape, rec.shape, bias.shape, proj.shape) == \
        ((D, gates * U), (P, gates * U), (gates * U,), (U, P))
    ref = numpy_lstmp(X, kernel, rec, bias, proj, h0, c0, cifg)
    for got, want in zip(layer(X, initial_state=[h0, c0]), ref):  # fused fast path
        np.testing.assert_allclose(np.asarray(got), want, atol=TOL)
    # the cell alone, one step at a time inside keras.layers.RNN (no fast loop)
    rnn = keras.layers.RNN(layer.cell, return_sequences=True, return_state=True)
    for got, want in zip(rnn(X, initial_state=[h0, c0]), ref):
        np.testing.assert_allclose(np.asarray(got), want, atol=TOL)


def test_identity_projection_equals_keras_lstm():
    kw = dict(return_sequences=True, return_state=True)
    ref = keras.layers.LSTM(U, **kw)
    ours = LSTMP(U, U, **kw)
    ref(X)
    ours(X)
    _random_weights(ref)
    ours.set_weights(ref.get_weights() + [np.eye(U, dtype="float32")])
    for call in ({}, {"mask": RIGHT}):  # fused, and the masked autodiff loop
        out, dx, dw = run_with_gradients(ours, X, **call)
        ref_out, ref_dx, ref_dw = run_with_gradients(ref, X, **call)
        for a, b in zip(out, ref_out):
            np.testing.assert_allclose(a, b, atol=TOL)
        np.testing.assert_allclose(dx, ref_dx, atol=TOL)
        for a, b in zip(dw[:3], ref_dw):  # kernel, recurrent_kernel, bias
            np.testing.assert_allclose(a, b, atol=TOL)


def _python_loop_reference(xs, h0, c0, rec, proj, cifg):
    """The LSTMP recurrence as a plain Python loop of TF ops (autodiff for the gradient)."""
    units = c0.shape[-1]
    h, c, hs = h0, c0, []
    for t in range(xs.shape[0]):
        z = xs[t] + h @ rec
        if cifg:
            f, g, o = tf.sigmoid(z[:, :units]), tf.tanh(z[:, units:2 * units]), \
                tf.sigmoid(z[:, 2 * units:])
            i = 1.0 - f
        else:
            i, f = tf.sigmoid(z[:, :units]), tf.sigmoid(z[:, units:2 * units])
            g, o = tf.tanh(z[:, 2 * units:3 * units]), tf.sigmoid(z[:, 3 * units:])
        c = f * c + i * g
        h = (o * tf.tanh(c)) @ proj
        hs.append(h)
    return tf.stack(hs), h, c


@pytest.mark.parametrize("cifg", [False, True])
@pytest.mark.parametrize("outputs_used", ["all", "sequence_only", "final_only"])
def test_fused_gradient_matches_autodiff(cifg, outputs_used):
    rng = np.random.default_rng(3)
    gates = 3 if cifg else 4
    T, B = 6, 2
    args = [tf.constant(rng.normal(0, s, shape).astype("float32")) for s, shape in
            ((1.0, (T, B, gates * U)), (0.5, (B, P)), (0.5, (B, U)),
             (0.5, (P, gates * U)), (0.5, (U, P)))]
    weights = [rng.normal(size=shape).astype("float32") for shape in
               ((T, B, P), (B, P), (B, U))]
    use = {"all": (1, 1, 1), "sequence_only": (1, 0, 0), "final_only": (0, 1, 1)}[outputs_used]

    def grads(fn):
        with tf.GradientTape() as tape:
            tape.watch(args)
            outs = fn(*args, cifg)
            loss = sum(tf.reduce_sum(o * w) for o, w, u in zip(outs, weights, use) if u)
        return [np.asarray(o) for o in outs], [np.asarray(g) for g in tape.gradient(loss, args)]

    out, got = grads(_fused.lstmp_sequence)
    ref_out, want = grads(_python_loop_reference)
    for a, b in zip(out, ref_out):
        np.testing.assert_allclose(a, b, atol=TOL)
    names = ["xs", "h0", "c0", "recurrent_kernel", "projection_kernel"]
    for name, a, b in zip(names, got, want):
        np.testing.assert_allclose(a, b, atol=TOL, err_msg=name)


@pytest.mark.parametrize("cifg", [False, True])
def test_fused_fast_path_equals_autodiff_loop(cifg, monkeypatch):
    calls = []
    real = _fused.lstmp_sequence
    monkeypatch.setattr(_fused, "lstmp_sequence", lambda *a: calls.append(1) or real(*a))
    kw = dict(coupled_input_forget=cifg, return_sequences=True, return_state=True)
    fast = LSTMP(U, P, **kw)
    fast(X)
    _random_weights(fast)
    ref_out, ref_dx, ref_dw = run_with_gradients(fast, X)
    assert calls, "the fused kernel did not run"
    slow = LSTMP(U, P, unroll=True, **kw)  # the Python-unrolled autodiff loop
    slow(X)
    slow.set_weights(fast.get_weights())
    n = len(calls)
    for layer, call in ((slow, {}), (fast, {"mask": np.ones((3, 5), bool)})):  # while loop
        out, dx, dw = run_with_gradients(layer, X, **call)
        for a, b in zip(out + [dx] + dw, ref_out + [ref_dx] + ref_dw):
            np.testing.assert_allclose(a, b, atol=TOL)
    assert len(calls) == n  # neither of those went through the fused kernel


def test_right_padded_mask_carries_output_and_states():
    layer = LSTMP(U, P, coupled_input_forget=True, return_sequences=True, return_state=True)
    layer(X)
    _random_weights(layer)
    out, h, c = (np.asarray(t) for t in layer(X, mask=RIGHT))
    for row, length in enumerate(RIGHT.sum(1)):
        alone = [np.asarray(t)[0] for t in layer(X[row:row + 1, :length])]
        np.testing.assert_allclose(out[row, :length], alone[0], atol=TOL)
        # masked steps repeat the last real output; the states stop there
        np.testing.assert_allclose(out[row, length:], np.broadcast_to(
            alone[0][-1], out[row, length:].shape), atol=TOL)
        np.testing.assert_allclose(h[row], alone[1], atol=TOL)
        np.testing.assert_allclose(c[row], alone[2], atol=TOL)


def test_stateful_two_halves_equal_one_whole():
    x = X[:2]
    whole = LSTMP(U, P, return_sequences=True, return_state=True)
    ref = [np.asarray(t) for t in whole(x)]
    layer = LSTMP(U, P, return_sequences=True, return_state=True, stateful=True)
    layer(x[:, :2])
    layer.set_weights(whole.get_weights())
    layer.reset_state()
    assert [tuple(s.shape) for s in layer.states] == [(2, P), (2, U)]
    first, second = layer(x[:, :2]), layer(x[:, 2:])
    np.testing.assert_allclose(np.concatenate([first[0], second[0]], 1), ref[0], atol=TOL)
    np.testing.assert_allclose(np.asarray(second[1]), ref[1], atol=TOL)
    np.testing.assert_allclose(np.asarray(second[2]), ref[2], atol=TOL)
    layer.reset_state()
    assert not any(np.any(np.asarray(s)) for s in layer.states)
    np.testing.assert_allclose(np.asarray(layer(x[:, :2])[0]), ref[0][:, :2], atol=TOL)


def test_dropouts_are_training_only():
    layer = LSTMP(U, P, weight_dropout=0.5, seed=1, return_sequences=True)
    base = np.asarray(layer(X))
    np.testing.assert_allclose(np.asarray(layer(X, training=False)), base)
    trained = np.asarray(layer(X, training=True))
    assert trained.shape == base.shape and not np.allclose(trained, base)
    mask = np.asarray(layer.cell.get_weight_dropout_mask())  # DropConnect on (P, 4U)
    assert mask.shape == (P, 4 * U) and set(np.unique(mask)) == {0.0, 2.0}
    # One DropConnect mask per sequence on the recurrent kernel: the same as a layer whose
    # recurrent kernel was multiplied by it (the cached mask is the one the call uses).
    rec_mask = (np.random.default_rng(5).random((P, 4 * U)) > 0.5).astype("float32") * 2
    layer.cell._weight_dropout_mask = tf.constant(rec_mask)
    masked = np.asarray(layer(X, training=True))
    kernel, rec, bias, proj = layer.get_weights()
    zeros = (np.zeros((3, P), "float32"), np.zeros((3, U), "float32"))
    want, _, _ = numpy_lstmp(X, kernel, rec * rec_mask, bias, proj, *zeros, cifg=False)
    np.testing.assert_allclose(masked, want, atol=TOL)
    drop = LSTMP(U, P, dropout=0.5, recurrent_dropout=0.5, seed=2, return_sequences=True)
    base = np.asarray(drop(X))
    trained = np.asarray(drop(X, training=True))
    assert np.all(np.isfinite(trained)) and not np.allclose(trained, base)


def test_config_and_save_round_trip(tmp_path):
    layer = LSTMP(U, P, coupled_input_forget=True, dropout=0.1, return_sequences=True, seed=2,
                  projection_initializer="orthogonal", projection_regularizer="l2",
                  projection_constraint="max_norm")
    config = layer.get_config()
    assert config["proj_units"] == P and config["coupled_input_forget"] is True
    assert config["projection_initializer"]["class_name"] == "Orthogonal"
    assert LSTMP.from_config(config).get_config() == config
    assert layer.proj_units == P  # the cell's arguments are layer attributes, as for LSTM
    cell = LSTMPCell(4, 2, unit_forget_bias=False)
    assert LSTMPCell.from_config(cell.get_config()).get_config() == cell.get_config()

    inputs = keras.Input((5, D))
    model = keras.Model(inputs, LSTMP(U, P, return_sequences=True)(
        keras.layers.Masking()(inputs)))
    model.save(tmp_path / "lstmp.keras")
    loaded = keras.saving.load_model(tmp_path / "lstmp.keras")
    assert type(loaded.layers[-1]) is LSTMP
    np.testing.assert_allclose(np.asarray(loaded(X)), np.asarray(model(X)), atol=1e-6)

    lm = RecurrentLM(20, embed_dim=P, units=U, proj_units=P, num_layers=2, cell="lstmp",
                     coupled_input_forget=True, tie_weights=True)
    ids = RNG.integers(0, 20, (2, 6)).astype("int32")
    out = np.asarray(lm(ids))
    lm.save(tmp_path / "lm.keras")
    again = keras.saving.load_model(tmp_path / "lm.keras")
    assert again.proj_units == P and again.coupled_input_forget is True
    assert again.rnns[1].cell.coupled_input_forget and again.rnns[1].proj_units == P
    np.testing.assert_allclose(np.asarray(again(ids)), out, atol=1e-6)


def test_parameter_counts_and_shapes():
    for cifg, name in ((False, "lstmp"), (True, "cifg_lstmp")):
        layer = LSTMP(U, P, coupled_input_forget=cifg)
        layer.build((None, 5, D))
        assert layer.count_params() == count_params(name, D, U, proj_units=P)
        assert [tuple(w.shape) for w in layer.weights] == \
            list(weight_shapes(name, D, U, proj_units=P).values())
    assert count_params("lstmp", D, U, proj_units=P) == 4 * (D * U + P * U + U) + U * P
    with pytest.raises(ValueError, match="proj_units"):
        count_params("lstmp", D, U)
    with pytest.raises(ValueError, match="no projection"):
        count_params("lstm", D, U, proj_units=P)


def test_lm_ties_weights_to_the_projection_size():
    lm = RecurrentLM(20, embed_dim=P, units=U, proj_units=P, num_layers=2, cell="lstmp",
                     tie_weights=True)
    assert tuple(lm(np.zeros((2, 4), "int32")).shape) == (2, 4, 20)
    assert not any("logits" in w.path and "kernel" in w.path for w in lm.weights)
    # the second layer reads the first one's projected output
    assert tuple(lm.rnns[1].cell.kernel.shape) == (P, 4 * U)
    assert tuple(lm.rnns[0].cell.recurrent_kernel.shape) == (P, 4 * U)
    with pytest.raises(ValueError, match="tie_weights needs embed_dim == proj_units"):
        RecurrentLM(20, embed_dim=U, units=U, proj_units=P, cell="lstmp", tie_weights=True)


def test_lm_arguments_are_checked():
    with pytest.raises(ValueError, match="needs proj_units"):
        RecurrentLM(20, units=U, cell="lstmp")
    with pytest.raises(ValueError, match="≤ units"):
        RecurrentLM(20, units=U, proj_units=U + 1, cell="lstmp")
    with pytest.raises(ValueError, match="for cell='lstmp' only"):
        RecurrentLM(20, units=U, proj_units=P, cell="lstm")
    with pytest.raises(ValueError, match="coupled_input_forget"):
        RecurrentLM(20, units=U, cell="gru", coupled_input_forget=True)
    with pytest.raises(ValueError, match="proj_units=4 > units=3"):
        LSTMP(3, 4)
    with pytest.raises(ValueError, match="proj_units"):
        LSTMPCell(3, 0)


def test_lm_config_fields_flags_and_checks(capsys):
    from keras_seq.cli import main
    from keras_seq.commands.tasks import config_from_args, shapes
    from keras_seq.errors import KerasSeqError
    from keras_seq.tasks.lm.config import LMConfig

    with pytest.raises(SystemExit):
        main(["train", "lm", "--help"])
    help_text = capsys.readouterr().out
    assert "--proj-units" in help_text and "--cifg" in help_text and "lstmp" in help_text

    from keras_seq.cli import build_parser

    args = build_parser().parse_args(["train", "lm", "--run-dir", "unused", "--cell", "lstmp",
                                      "--units", "16", "--proj-units", "4", "--cifg"])
    config = config_from_args(shapes()["lm"], args).validate()
    assert (config.cell, config.proj_units, config.cifg) == ("lstmp", 4, True)
    assert LMConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config

    bad = {"proj_units is for cell 'lstmp' only": dict(cell="lstm", proj_units=4),
           "cell 'lstmp' needs proj_units": dict(cell="lstmp"),
           "proj_units must be ≥ 1": dict(cell="lstmp", proj_units=0),
           "proj_units must be ≤ units": dict(cell="lstmp", units=8, proj_units=9),
           "cifg needs cell 'lstm' or 'lstmp'": dict(cell="gru", cifg=True)}
    for message, fields in bad.items():
        with pytest.raises(KerasSeqError, match=message):
            LMConfig(**fields).validate()
    LMConfig(cell="lstm", cifg=True).validate()


def test_lm_trains_and_loss_goes_down():
    keras.utils.set_random_seed(0)
    vocab = 8
    lm = RecurrentLM(vocab, embed_dim=4, units=8, proj_units=4, cell="lstmp",
                     coupled_input_forget=True, tie_weights=True, weight_dropout=0.1)
    lm.compile(optimizer=keras.optimizers.Adam(0.05),
               loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    seq = np.arange(64) % vocab  # a deterministic cycle: the next token is easy to learn
    x = np.stack([np.roll(seq, -k)[:12] for k in range(16)]).astype("int32")
    y = (x + 1) % vocab
    logs = lm.fit(x, y, batch_size=8, epochs=20, verbose=0).history
    history = logs["loss"]
    assert history[-1] < 0.5 * history[0], history
    rnn_norm = [v for k, v in logs.items() if k == f"grad_norm/{lm.rnns[0].name}"]
    assert rnn_norm and rnn_norm[0][-1] > 0  # the step's gradient went through the layer


# -- the lstmp language model, exported ----------------------------------------------------

_RUNS: dict = {}


# the exported run: 2 stacked CIFG-LSTMP layers, h (B, 16), c (B, 32), tied embeddings
RUN_UNITS, RUN_PROJ = 32, 16
RUN_SHAPES = {"h0": [1, RUN_PROJ], "c0": [1, RUN_UNITS], "h1": [1, RUN_PROJ],
              "c1": [1, RUN_UNITS]}


def _lstmp_run(tmp_path_factory):
    """A tiny CIFG-LSTMP run directory trained for 40 steps on the export tests' toy corpus
    (once per module, ~4 s): enough for logits that span ~5 and depend on the context, so
    a state carried wrongly shows."""
    if "run" not in _RUNS:
        from keras_seq.tasks.lm.config import LMConfig
        from keras_seq.tasks.lm.task import train_lm
        from tests.fixtures.lm_runs import toy_corpus_text

        root = tmp_path_factory.mktemp("run_lstmp")
        (root / "toy.txt").write_text(toy_corpus_text())
        config = LMConfig(data=str(root / "toy.txt"), embed_dim=RUN_PROJ, units=RUN_UNITS,
                          proj_units=RUN_PROJ, cifg=True, cell="lstmp", num_layers=2,
                          tie_weights=True, batch_size=8, bptt=12, lr=0.02, epochs=1,
                          max_steps_per_epoch=40, sample_tokens=0, histogram_freq=0, seed=3)
        train_lm(config, root / "run", verbose=0, printer=lambda *a: None)
        _RUNS["run"] = root / "run"
    return _RUNS["run"]


@pytest.fixture(scope="module")
def lstmp_export(tmp_path_factory):
    from keras_seq.export.tflite import export_tflite

    run = _lstmp_run(tmp_path_factory)
    out = tmp_path_factory.mktemp("tflite_lstmp")
    manifest = export_tflite(run, out, variants=("float32", "int8"), graphs=("step",),
                             calib_tokens=40, parity_tokens=40, val_tokens=100,
                             printer=lambda *a: None)
    return run, out, manifest


def test_step_graph_states_and_fusable(tmp_path_factory):
    from keras_seq.export.graphs import LMGraphs
    from keras_seq.tasks.lm.evaluation import load_run

    _, _, model = load_run(_lstmp_run(tmp_path_factory))
    g = LMGraphs(model)
    assert g.kind == "lstmp" and not g.fusable()
    assert g.state_shapes(1) == RUN_SHAPES
    assert g.state_shapes(2)["h1"] == [2, RUN_PROJ]
    assert {k: list(v.shape) for k, v in g.zero_states(1).items()} == RUN_SHAPES
    ids = RNG.integers(0, model.vocab_size, 7).astype("int32")
    ref = np.asarray(model.clone_for_batch(1, stateful=False)(ids[None]))[0]
    states, outs = g.zero_states(1), []
    for t in ids:
        res = g.step(token=np.array([t], np.int32), **states)
        states = {n: np.asarray(res[n]) for n in g.state_names}
        outs.append(np.asarray(res["logits"][0]))
    np.testing.assert_allclose(np.stack(outs), ref, atol=1e-5)
    seq = g.sequence(tokens=ids[None], **g.zero_states(1))
    np.testing.assert_allclose(np.asarray(seq["logits"][0]), ref, atol=1e-5)


def test_tflite_step_models_stream_like_keras(lstmp_export):
    from keras_seq.export.tflite import keras_logits
    from keras_seq.runtime.litert import LiteRTLM
    from keras_seq.tasks.lm.evaluation import load_run

    run, out, manifest = lstmp_export
    by_name = {m["name"]: m for m in manifest["models"]}
    assert set(by_name) == {"step_float32", "step_int8"}  # no fused graph for lstmp
    assert all("error" not in m for m in manifest["models"]), manifest["models"]
    assert manifest["model"]["proj_units"] == RUN_PROJ
    meta = json.loads((out / "step_float32.json").read_text())
    assert meta["state_shapes"] == RUN_SHAPES
    _, tokenizer, model = load_run(run)
    ids = tokenizer.encode("the cat sat on a mat\nthe dog ran\n" * 2)
    ref = keras_logits(model, ids)  # one stateless Keras pass from zero state
    lm = LiteRTLM(out / "step_float32.tflite")
    assert {k: list(v.shape) for k, v in lm.states.items()} == RUN_SHAPES
    got = np.stack([lm.step(int(t)).copy() for t in ids])  # state carried in LiteRT
    np.testing.assert_allclose(got, ref, atol=1e-4)
    # the carried state matters: token by token from zero state is far off
    alone = []
    for t in ids:
        lm.reset()
        alone.append(lm.step(int(t)).copy())
    assert np.abs(np.stack(alone) - ref).max() > 0.1 and np.ptp(ref) > 2
    int8 = LiteRTLM(out / "step_int8.tflite")
    got8 = np.stack([int8.step(int(t)).copy() for t in ids])
    assert np.isfinite(got8).all()
    # int8: measured max|Δ| 0.035 with logits spanning ~5; allowed 5% of the span
    assert np.abs(got8 - ref).max() < 0.05 * np.ptp(ref), (np.abs(got8 - ref).max(),
                                                           np.ptp(ref))
    assert by_name["step_int8"]["parity"]["max_abs_logit_diff"] < 0.05 * np.ptp(ref)
    assert abs(by_name["step_int8"]["parity"]["ppl_delta_pct"]) < 1.5
    assert abs(by_name["step_float32"]["parity"]["ppl_delta_pct"]) < 1e-3


def test_streaming_benchmark_runs_an_lstmp_model(lstmp_export):
    from keras_seq.export.streaming import format_report, run_streaming_benchmark

    run, out, _ = lstmp_export
    report = run_streaming_benchmark(run, tokens=5, warmup=2, threads=(1,), export_dir=out,
                                     progress=lambda *a: None)
    runtimes = [r["runtime"] for r in report["rows"]]
    assert runtimes == ["keras-eager", "tf-function", "saved-model", "tflite step_float32",
                        "tflite step_int8"]
    assert report["model"]["proj_units"] == RUN_PROJ and report["model"]["cifg"] is True
    assert f"lstmp (CIFG) 2×{RUN_UNITS} units → {RUN_PROJ}" in format_report(report)
