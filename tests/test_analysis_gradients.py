import numpy as np
import pytest

from keras_seq.analysis import gradients as G


def _linear_cell(w_hh, input_dim=3):
    import keras

    from keras_seq.layers import SimpleRNNCell

    units = w_hh.shape[0]
    cell = SimpleRNNCell(units, activation="linear", use_bias=False,
                         recurrent_initializer=keras.initializers.Constant(w_hh))
    cell.build((None, input_dim))
    return cell


def _orthogonal(n, seed):
    q, _ = np.linalg.qr(np.random.default_rng(seed).normal(size=(n, n)))
    return q


@pytest.mark.parametrize("kind", ["scaled_orthogonal", "random"])
def test_linear_rnn_gradients_match_powers_of_w_hh_transposed(kind):
    import tensorflow as tf

    units, steps = 6, 12
    rng = np.random.default_rng(0)
    if kind == "scaled_orthogonal":
        w = 0.8 * _orthogonal(units, 1)
    else:
        w = rng.normal(scale=0.45, size=(units, units))
    cell = _linear_cell(w.astype("float32"))
    x = rng.normal(size=(4, steps, 3)).astype("float32")
    c = rng.normal(size=(units,)).astype("float32")
    # L = h_T · c, so ∂L/∂h_T = c and ∂L/∂h_{T−d} = c (W_hhᵀ)^d exactly.
    out = G.state_gradient_norms(cell, x, lambda h: tf.reduce_sum(h * c, axis=-1))
    measured = out["norms"][:, ::-1]  # column d
    expected = G.analytic_linear_decay(w, np.tile(c, (4, 1)), steps)
    np.testing.assert_allclose(measured, expected, rtol=1e-4, atol=1e-6)
    if kind == "scaled_orthogonal":  # ‖c (ρQ)ᵀ^d‖ = ρ^d ‖c‖
        np.testing.assert_allclose(measured[0], 0.8 ** np.arange(steps + 1) * np.linalg.norm(c),
                                   rtol=1e-4)
    # Identity activation: φ′ = 1 at every step.
    np.testing.assert_allclose(out["pre_activation_grad"], 1.0)


def test_spectral_stats_and_recurrent_blocks():
    w = np.diag([0.5, -2.0, 1.0])
    s = G.spectral_stats(w)
    assert s["spectral_radius"] == pytest.approx(2.0)
    assert s["sigma_max"] == pytest.approx(2.0)
    rot = np.array([[0.0, -1.0], [0.25, 0.0]])  # eigenvalues ±0.5i, σ_max 1
    s = G.spectral_stats(rot)
    assert s["spectral_radius"] == pytest.approx(0.5)
    assert s["sigma_max"] == pytest.approx(1.0)

    from keras_seq.layers import GRUCell, LSTMCell

    for cls, block in ((GRUCell, 2), (LSTMCell, 2)):
        cell = cls(4)
        cell.build((None, 3))
        rk = cell.recurrent_kernel.numpy()
        np.testing.assert_array_equal(G.recurrent_matrix(cell), rk[:, block * 4:(block + 1) * 4])


def test_probe_curves_for_every_cell_tiny():
    import tensorflow as tf

    windows = np.random.default_rng(0).integers(0, 20, size=(3, 9)).astype("int32")
    for cell in G.CELLS:
        model = G.build_probe(cell, vocab=20, embed_dim=4, units=5, seed=0)
        model(tf.constant(windows[:, :-1]))
        curve = G.probe_gradient_decay(model, windows)
        assert len(curve["relative"]) == 9  # d = 0..8
        assert curve["relative"][0] == pytest.approx(1.0)
        assert all(np.isfinite(curve["mean_norm"]))
        if cell == "rnn":
            # The Pascanu / seed-002 bounds hold for the measured SimpleRNN curve.
            assert np.all(np.asarray(curve["relative"]) <= np.asarray(curve["bound_sigma"]) * 1.001)
            assert curve["sigma_max"] == pytest.approx(1.0, abs=1e-4)  # orthogonal init
        else:
            assert "bound_sigma" not in curve


def test_clipping_experiment_tiny(tmp_path):
    result = G.clipping_experiment(scale=3.0, clip_norm=1.0, steps=3, seq_len=6, batch=4,
                                   units=4, embed_dim=4, progress=False)
    rows = G.clipping_table(result)
    assert [r["run"] for r in rows] == ["no clipping", "clip θ=1"]
    assert all(len(run["loss"]) == 3 for run in result["runs"].values())
    # Same weights and batches: the first step's loss and gradient norm agree.
    a, b = result["runs"].values()
    assert a["loss"][0] == pytest.approx(b["loss"][0])
    assert a["grad_norm"][0] == pytest.approx(b["grad_norm"][0], rel=1e-5)
    assert G.plot_clipping(result, str(tmp_path / "c.png")).endswith("c.png")
    assert (tmp_path / "c.png").stat().st_size > 1000
