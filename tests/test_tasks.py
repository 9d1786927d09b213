import math

import numpy as np
import pytest

from keras_seq.data import tasks
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
    assert tasks.ADDING_BASELINE_MSE == pytest.approx(1 / 6)
    # The best constant prediction is the mean (1), and its MSE is Var = 1/6 ≈ 0.167.
    assert np.mean((y - 1.0) ** 2) == pytest.approx(1 / 6, abs=0.005)
    assert np.mean(y) == pytest.approx(1.0, abs=0.01)


def test_copy_memory_structure_and_baseline():
    gap = 15
    x, y = tasks.copy_memory(500, gap, seed=1)
    assert x.shape == y.shape == (500, gap + 20)
    np.testing.assert_array_equal(x[:, :10], y[:, -10:])
    assert ((x[:, :10] >= 1) & (x[:, :10] <= 8)).all()
    np.testing.assert_array_equal(x[:, gap + 9], tasks.COPY_DELIM)
    assert (x[:, 10:gap + 9] == 0).all() and (x[:, gap + 10:] == 0).all()
    assert (y[:, :-10] == 0).all()
    for t in (5, 100, 320):
        assert tasks.copy_baseline(t) == pytest.approx(10 * math.log(8) / (t + 20))
    # The memoryless predictor: blank with certainty, then uniform over the 8 symbols.
    probs = np.zeros((gap + 20, 10))
    probs[:-10, 0] = 1.0
    probs[-10:, 1:9] = 1 / 8
    ce = -np.mean(np.log(probs[np.arange(gap + 20)[None, :], y]))
    assert ce == pytest.approx(tasks.copy_baseline(gap))
    assert tasks.make_task("copy", gap).baseline_loss == pytest.approx(tasks.copy_baseline(gap))


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
    assert tasks.NEGATION_BASELINE_CE == pytest.approx(math.log(2))
    assert (x != 0).all()


def test_bad_arguments_say_how_to_fix():
    with pytest.raises(KerasSeqError, match="unknown memory task 'add'"):
        tasks.make_task("add", 10)
    with pytest.raises(KerasSeqError, match="distance=0"):
        tasks.make_task("copy", 0)
    with pytest.raises(ValueError, match="length=1"):
        tasks.adding_problem(3, 1)
