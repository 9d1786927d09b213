
import numpy as np
import pytest

from keras_seq.data import probes as tasks
from keras_seq.errors import KerasSeqError


@pytest.mark.parametrize("name", tasks.TASKS)
def test_generators_are_deterministic_by_seed(name):
    task = tasks.make_task(name, 12)
    x1, y1 = task.generate(32, seed=7)
    x2, y2 = task.generate(32, seed=7)
    x3, _ = task.generate(32, seed=8)
    np.testing.assert_array_equal(x1, x2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(x1, x3)
    assert x1.shape[:2] == (32, task.length)


def test_adding_problem_structure_and_baseline():
    x, y = tasks.adding_problem(20_000, 30, seed=0)
    assert x.shape == (20_000, 30, 2) and y.shape == (20_000,)
    markers = x[..., 1]
    np.testing.assert_array_equal(markers.sum(1), 2)
    assert (markers[:, :15].sum(1) == 1).all()  # one marker in each half
    np.testing.assert_allclose(y, (x[..., 0] * markers).sum(1), rtol=1e-6)
    # The best constant prediction is the mean (1), and its MSE is Var = 2 · 1/12 = 1/6:
    # measured on the data, that is the task's baseline loss.
    assert np.mean(y) == pytest.approx(1.0, abs=0.01)
    mse = {c: np.mean((y - c) ** 2) for c in (0.9, 1.0, 1.1)}
    assert mse[1.0] < mse[0.9] and mse[1.0] < mse[1.1]
    assert tasks.make_task("adding", 30).baseline_loss == pytest.approx(mse[1.0], abs=0.005)
    assert mse[1.0] == pytest.approx(0.1667, abs=0.005)


def test_copy_memory_structure_and_baseline():
    gap = 15
    x, y = tasks.copy_memory(500, gap, seed=1)
    assert x.shape == y.shape == (500, gap + 20)
    np.testing.assert_array_equal(x[:, :10], y[:, -10:])
    assert ((x[:, :10] >= 1) & (x[:, :10] <= 8)).all()
    np.testing.assert_array_equal(x[:, gap + 9], tasks.COPY_DELIM)
    assert (x[:, 10:gap + 9] == 0).all() and (x[:, gap + 10:] == 0).all()
    assert (y[:, :-10] == 0).all()
    # The memoryless predictor, scored on generated data: blank with certainty, then
    # uniform over the 8 symbols. Its loss is the task's baseline at every gap
    # (by hand for gap 5: 10 · ln 8 / 25 = 0.831777).
    for t in (gap, 5, 100, 320):
        _, y = tasks.copy_memory(20, t, seed=t)
        probs = np.zeros((t + 20, 10))
        probs[:-10, 0] = 1.0
        probs[-10:, 1:9] = 1 / 8
        ce = -np.mean(np.log(probs[np.arange(t + 20)[None, :], y]))
        assert tasks.copy_baseline(t) == pytest.approx(ce)
        assert tasks.make_task("copy", t).baseline_loss == pytest.approx(ce)
    assert tasks.copy_baseline(5) == pytest.approx(0.831777, abs=1e-6)


def test_distant_negation_labels_follow_not_at_distance():
    d = 9
    x, y = tasks.distant_negation(4000, d, seed=2)
    assert x.shape == (4000, 4 + d + 4)
    has_not = (x == tasks.NOT_ID).any(1)
    assert (x == tasks.NOT_ID).sum(1).max() == 1
    pos_not = np.argmax(x == tasks.NOT_ID, axis=1)
    sentiment = np.isin(x, [tasks.GOOD_ID, tasks.BAD_ID])
    np.testing.assert_array_equal(sentiment.sum(1), 1)
    pos_sent = np.argmax(sentiment, axis=1)
    np.testing.assert_array_equal(pos_sent[has_not] - pos_not[has_not], d)
    good = x[np.arange(4000), pos_sent] == tasks.GOOD_ID
    np.testing.assert_array_equal(y, (good ^ has_not).astype(int))
    # Balanced labels; the sentiment word alone predicts nothing, "not" alone gives 75 %.
    assert abs(y.mean() - 0.5) < 0.03
    assert abs(y[good].mean() - 0.5) < 0.05 and abs(y[~good].mean() - 0.5) < 0.05
    assert np.mean(y == ~has_not) == pytest.approx(0.75, abs=0.03)
    # A memoryless model sees the sentiment word but not "not": the best it can do is
    # p(y | sentiment word), whose cross-entropy and accuracy, measured here, are the
    # task's baselines (≈ ln 2 and 1/2).
    task = tasks.make_task("negation", d)
    ce, correct = 0.0, 0
    for group in (good, ~good):
        p = y[group].mean()
        ce -= np.sum(y[group] * np.log(p) + (1 - y[group]) * np.log(1 - p))
        correct += max(y[group].sum(), (1 - y[group]).sum())
    assert task.baseline_loss == pytest.approx(ce / len(y), abs=0.005)
    assert task.baseline_accuracy == pytest.approx(correct / len(y), abs=0.03)
    assert (x != 0).all()


def test_bad_arguments_say_how_to_fix():
    with pytest.raises(KerasSeqError, match="unknown memory task 'add'"):
        tasks.make_task("add", 10)
    with pytest.raises(KerasSeqError, match="distance=0"):
        tasks.make_task("copy", 0)
    with pytest.raises(ValueError, match="length=1"):
        tasks.adding_problem(3, 1)
