"""AdaptiveSoftmax on whichever Keras backend this process runs (``make test`` runs this
folder under TensorFlow, JAX and PyTorch): parity with PyTorch's
``AdaptiveLogSoftmaxWithLoss`` on copied weights, the training loss, ``fit``, save/load."""

from __future__ import annotations

import keras
import numpy as np
import pytest

from keras_seq.layers import AdaptiveSoftmax
from keras_seq.models import RecurrentLM
from keras_seq.models.loading import load_keras_file
from keras_seq.models.perplexity import Perplexity

BACKEND = keras.backend.backend()
D, V, CUTOFFS = 16, 50, [10, 30]
PATHS = ["dense"] if BACKEND == "jax" else ["dense", "gather"]


@pytest.fixture(scope="module")
def torch():
    """PyTorch, the reference, imported when a test here first runs: at module top it was
    imported while collecting, by every xdist worker of the TensorFlow phase (3.5 s each)."""
    import torch as module

    return module


def _np(x):
    return keras.ops.convert_to_numpy(x)


def _pair(torch, head_bias=True, div_value=2.0, **kwargs):
    """A torch reference and an AdaptiveSoftmax with its weights (Linear weights transposed)."""
    torch.manual_seed(0)
    ref = torch.nn.AdaptiveLogSoftmaxWithLoss(D, V, CUTOFFS, div_value=div_value,
                                              head_bias=head_bias)
    ours = AdaptiveSoftmax(V, CUTOFFS, div_value=div_value, head_bias=head_bias, **kwargs)
    ours.build((None, D))
    weights = [ref.head.weight.detach().numpy().T]
    if head_bias:
        weights.append(ref.head.bias.detach().numpy())
    for tail in ref.tail:
        weights += [tail[0].weight.detach().numpy().T, tail[1].weight.detach().numpy().T]
    ours.set_weights(weights)
    return ref, ours


H = np.random.default_rng(0).normal(size=(4, 6, D)).astype("float32")
# every cluster present: shortlist, tail 0, tail 1, and each boundary id
TARGETS = np.random.default_rng(1).integers(0, V, size=(4, 6)).astype("int32")
TARGETS[0, :6] = [0, 9, 10, 29, 30, 49]


@pytest.mark.parametrize("head_bias", [False, True])
def test_log_prob_equals_pytorch(head_bias, torch):
    ref, ours = _pair(torch, head_bias=head_bias)
    want = ref.log_prob(torch.from_numpy(H.reshape(-1, D))).detach().numpy()
    got = _np(ours(H)).reshape(-1, V)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.exp(got.astype(np.float64)).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(_np(ours.predict(H)).reshape(-1),
                                  ref.predict(torch.from_numpy(H.reshape(-1, D))).numpy())


@pytest.mark.parametrize("loss_path", PATHS)
def test_loss_equals_pytorch(loss_path, torch):
    ref, ours = _pair(torch, loss_path=loss_path)
    out = ref(torch.from_numpy(H.reshape(-1, D)), torch.from_numpy(TARGETS.reshape(-1)).long())
    np.testing.assert_allclose(_np(ours.target_log_prob(H, TARGETS)).reshape(-1),
                               out.output.detach().numpy(), atol=1e-5, rtol=0)
    np.testing.assert_allclose(float(_np(ours.loss(H, TARGETS))), float(out.loss.detach()),
                               atol=1e-5)
    weights = (TARGETS % 2).astype("float32")  # a weighted mean over all positions
    want = -(out.output.detach().numpy() * weights.reshape(-1)).mean()
    np.testing.assert_allclose(float(_np(ours.loss(H, TARGETS, weights))), want, atol=1e-5)


def test_top_k_is_the_full_distributions(torch):
    _, ours = _pair(torch)
    values, ids = ours.top_k(H, 5)
    full = _np(ours.log_prob(H))
    np.testing.assert_array_equal(_np(ids), np.argsort(-full, axis=-1)[..., :5])
    np.testing.assert_allclose(_np(values), np.sort(full, axis=-1)[..., ::-1][..., :5],
                               atol=1e-6)


def test_config_round_trip_and_errors(torch):
    _, ours = _pair(torch)
    clone = AdaptiveSoftmax.from_config(ours.get_config())
    assert (clone.cutoffs, clone.div_value, clone.head_bias) == (CUTOFFS, 2.0, True)
    assert ours.tail_sizes(D) == [(8, 20), (4, 20)]  # torch: int(16 // 2**(i+1))
    for bad in ([30, 10], [0, 5], [10, V], "10,x", []):
        with pytest.raises(ValueError, match="cutoffs"):
            AdaptiveSoftmax(V, bad)
    with pytest.raises(ValueError, match="≥ 1"):
        AdaptiveSoftmax(V, [10, 20, 30], div_value=8.0).build((None, D))


def _lm(**kwargs):
    lm = RecurrentLM(V, embed_dim=8, units=D, stateful=False, softmax="adaptive",
                     cutoffs=CUTOFFS, div_value=2.0, **kwargs)
    lm(np.zeros((2, 5), "int32"))
    return lm


def test_fit_lowers_the_loss_and_reports_exact_perplexity():
    lm = _lm()
    lm.compile(keras.optimizers.Adam(0.02),
               loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
               metrics=[Perplexity(from_logits=True)])
    rng = np.random.default_rng(0)
    x = np.minimum(rng.zipf(1.3, size=(32, 8)) - 1, V - 1).astype("int32")
    y = np.roll(x, -1, axis=1)
    history = lm.fit(x, y, batch_size=8, epochs=4, verbose=0, shuffle=False,
                     validation_data=(x, y)).history
    assert history["loss"][-1] < np.log(V) - 0.5, history["loss"]  # chance is log V
    assert history["val_loss"][-1] < history["val_loss"][0] - 0.1, history["val_loss"]
    # training perplexity is exp(the mean training loss) (equal batches, no weights)
    np.testing.assert_allclose(history["perplexity"], np.exp(history["loss"]), rtol=1e-4)
    # validation scores the full distribution: the same as log_prob at the targets
    logp = _np(lm(x, training=False))
    nats = -np.take_along_axis(logp, y[..., None], -1).mean()
    np.testing.assert_allclose(history["val_loss"][-1], nats, rtol=1e-4)
    np.testing.assert_allclose(history["val_perplexity"][-1], np.exp(nats), rtol=1e-4)


def test_save_load_and_clone(tmp_path):
    lm = _lm()
    x = np.random.default_rng(2).integers(0, V, size=(2, 5)).astype("int32")
    lm.save(tmp_path / "lm.keras")
    loaded = load_keras_file(tmp_path / "lm.keras", compile=False)
    assert loaded.softmax == "adaptive" and loaded.cutoffs == CUTOFFS
    np.testing.assert_allclose(_np(loaded(x)), _np(lm(x)), atol=1e-6)
    one = lm.clone_for_batch(2, stateful=False)
    np.testing.assert_allclose(_np(one(x)), _np(lm(x)), atol=1e-6)


def test_lm_refuses_bad_adaptive_options():
    with pytest.raises(ValueError, match="needs cutoffs"):
        RecurrentLM(V, 8, D, softmax="adaptive")
    with pytest.raises(ValueError, match="tie_weights"):
        RecurrentLM(V, D, D, softmax="adaptive", cutoffs=CUTOFFS, tie_weights=True)
    with pytest.raises(ValueError, match="for softmax='adaptive'"):
        RecurrentLM(V, 8, D, cutoffs=CUTOFFS)
