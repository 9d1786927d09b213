import keras
import numpy as np
import pytest

from keras_seq.models.conditioned_lm import ConditionedLM
from keras_seq.sampling import GreedySampler, TopKSampler

TOKENS = np.array([[2, 5, 6, 7, 8], [2, 9, 4, 0, 0]], np.int32)
COND = np.array([0, 2], np.int32)


def tiny(**kw):
    args = dict(vocab_size=12, num_conditions=3, embed_dim=6, units=8, cell="gru")
    args.update(kw)
    keras.utils.set_random_seed(0)
    return ConditionedLM(**args)


@pytest.mark.parametrize("mode,cell,layers", [("init", "lstm", 2), ("input", "gru", 1),
                                              ("both", "rnn", 1), ("init", "gru", 1)])
def test_modes_build_run_and_mask_padding(mode, cell, layers):
    model = tiny(mode=mode, cell=cell, num_layers=layers)
    logits = np.asarray(model((TOKENS, COND)))
    assert logits.shape == (2, 5, 12) and np.isfinite(logits).all()
    # Right padding: the real steps of row 1 equal the unpadded run.
    alone = np.asarray(model((TOKENS[1:, :3], COND[1:])))
    np.testing.assert_allclose(logits[1, :3], alone[0], atol=1e-5)
    # Left padding: masked steps carry the (condition-made) state over untouched.
    left = np.array([[0, 0, 2, 9, 4]], np.int32)
    np.testing.assert_allclose(np.asarray(model((left, COND[1:])))[0, 2:], alone[0], atol=1e-5)
    # Dict inputs work as well.
    as_dict = model({"tokens": TOKENS, "condition": COND})
    np.testing.assert_allclose(np.asarray(as_dict), logits, atol=1e-6)


def test_modes_differ_in_where_the_condition_goes():
    init, inp, both = (tiny(mode=m) for m in ("init", "input", "both"))
    for m in (init, inp, both):
        m((TOKENS, COND))
    assert [d.name for d in init.state_init] == ["state_init_0"] and not inp.state_init
    kernel = {m.mode: m.rnns[0].cell.kernel.shape[0] for m in (init, inp, both)}
    assert kernel == {"init": 6, "input": 12, "both": 12}  # embed_dim (+ condition_dim)
    assert len(both.weights) == len(init.weights) == len(inp.weights) + 2


@pytest.mark.parametrize("mode", ["init", "input", "both"])
def test_condition_changes_the_output(mode):
    model = tiny(mode=mode, cell="lstm")
    tokens = np.repeat(TOKENS[:1], 3, axis=0)
    logits = np.asarray(model((tokens, np.array([0, 1, 2], np.int32))))
    assert np.abs(logits[0] - logits[1]).max() > 1e-4
    assert np.abs(logits[1] - logits[2]).max() > 1e-4


def test_vector_condition():
    model = tiny(num_conditions=None, condition_features=4, condition_dim=5, mode="both")
    vec = np.array([[1, 0, 0, 0], [0, 0, 0, 1]], np.float32)
    logits = np.asarray(model((TOKENS[:1].repeat(2, 0), vec)))
    assert logits.shape == (2, 5, 12) and np.abs(logits[0] - logits[1]).max() > 1e-4
    ids = model.generate(vec[0], 3, seed=0)
    assert len(ids) == 3
    with pytest.raises(ValueError, match="condition vector of size 2"):
        model.generate([1.0, 2.0], 3)


def test_bad_arguments_say_what_to_do():
    with pytest.raises(ValueError, match="exactly one"):
        ConditionedLM(10)
    with pytest.raises(ValueError, match="exactly one"):
        ConditionedLM(10, num_conditions=2, condition_features=3)
    with pytest.raises(ValueError, match="mode='start'"):
        ConditionedLM(10, num_conditions=2, mode="start")
    with pytest.raises(ValueError, match="cell='keras-lstm'"):
        ConditionedLM(10, num_conditions=2, cell="keras-lstm")
    with pytest.raises(ValueError, match="num_conditions=0"):
        ConditionedLM(10, num_conditions=0)
    with pytest.raises(ValueError, match="dropout=1.0"):
        ConditionedLM(10, num_conditions=2, dropout=1.0)
    model = tiny()
    with pytest.raises(ValueError, match=r"condition=3; expected a label id in \[0, 3\)"):
        model.generate(3, 2)
    with pytest.raises(ValueError, match="expected 'tokens' and 'condition'"):
        model({"tokens": TOKENS})


def test_config_and_keras_file_round_trip(tmp_path):
    model = tiny(mode="both", cell="lstm", num_layers=2, condition_dim=4, dropout=0.1)
    expected = np.asarray(model((TOKENS, COND)))
    config = model.get_config()
    for key in ("vocab_size", "num_conditions", "embed_dim", "units", "cell", "num_layers",
                "mode", "condition_dim", "condition_features", "dropout"):
        assert key in config
    clone = ConditionedLM.from_config(config)
    clone((TOKENS, COND))
    clone.set_weights(model.get_weights())
    np.testing.assert_allclose(np.asarray(clone((TOKENS, COND))), expected, atol=1e-6)
    path = tmp_path / "cond.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, ConditionedLM) and loaded.get_config() == config
    np.testing.assert_allclose(np.asarray(loaded((TOKENS, COND))), expected, atol=1e-6)


def _toy_data(n=64, length=6):
    """Condition 0 always continues with token 3, condition 1 with token 4."""
    cond = np.arange(n, dtype=np.int32) % 2
    seq = np.where(cond[:, None] == 0, 3, 4) * np.ones((n, length + 1), np.int32)
    seq[:, 0] = 2  # start token
    seq[::4, 5:] = 0  # some padding
    weights = (seq[:, 1:] != 0).astype(np.float32)
    return (seq[:, :-1], cond), seq[:, 1:], weights


def test_fit_lowers_loss_and_generation_follows_the_condition(tmp_path):
    model = tiny(vocab_size=6, num_conditions=2, units=8, mode="init")
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x, y, w = _toy_data()
    before = model.evaluate(x, y, sample_weight=w, verbose=0)
    model.fit(x, y, sample_weight=w, batch_size=16, epochs=8, verbose=0)
    after = model.evaluate(x, y, sample_weight=w, verbose=0)
    assert after < 0.5 * before
    greedy = GreedySampler()
    assert model.generate(0, 4, sampler=greedy) == [3, 3, 3, 3]
    assert model.generate(1, 4, sampler=greedy) == [4, 4, 4, 4]
    sampler = TopKSampler(k=6, temperature=3.0)  # a flat distribution: seeds matter
    a = model.generate(0, 12, sampler=sampler, seed=11)
    assert a == model.generate(0, 12, sampler=sampler, seed=11)
    assert a != model.generate(1, 12, sampler=sampler, seed=11)
    assert model.generate(1, 6, sampler=greedy, stop_id=4) == []
    assert model.generate(0, 3, sampler=greedy, prompt_ids=[3, 3]) == [3, 3, 3]
    # A model that has generated still saves; the reloaded one generates the same.
    model.save(tmp_path / "toy.keras")
    loaded = keras.saving.load_model(tmp_path / "toy.keras")
    assert loaded.generate(0, 12, sampler=sampler, seed=11) == a
