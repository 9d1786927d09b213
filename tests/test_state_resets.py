"""Issue 14 point 7: the zero state stays in training, and a model whose inference is far
worse than its training is caught (by a test and, in words, by the trainer)."""

import math

import numpy as np
import pytest

from keras_seq.models import RecurrentLM
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.evaluation import perplexity_of_run
from keras_seq.tasks.lm.task import train_lm
from keras_seq.training import callbacks as cb


def _stateful_lm(batch=6):
    lm = RecurrentLM(12, 4, 5, num_layers=2, cell="lstm", stateful=True)
    lm(np.ones((batch, 3), "int32"))
    lm(np.arange(batch * 3).reshape(batch, 3) % 12)  # the state is now non-zero
    return lm


def _row_is_zero(lm):
    """(B,) True where every state of every layer is zero for that row."""
    states = [np.asarray(s) for rnn in lm.rnns for s in rnn.states]
    return np.all([np.all(s == 0, axis=1) for s in states], axis=0)


def test_row_resets_zero_the_drawn_rows_of_every_state():
    lm = _stateful_lm()
    before = [np.asarray(s).copy() for rnn in lm.rnns for s in rnn.states]
    assert not _row_is_zero(lm).any()
    resets = cb.RowStateResets(0.5, seed=3)
    resets.set_model(lm)
    resets.on_epoch_begin(2)
    resets.on_train_batch_begin(7)
    zero = _row_is_zero(lm)
    keep = np.random.default_rng([3, 2, 7]).random(6) >= 0.5
    np.testing.assert_array_equal(zero, ~keep)  # the rows drawn from (seed, epoch, batch)
    assert 0 < zero.sum() < 6 and resets.rows_reset == zero.sum()
    after = [np.asarray(s) for rnn in lm.rnns for s in rnn.states]
    for a, b in zip(before, after):  # the other rows are untouched, h and c alike
        np.testing.assert_array_equal(a[keep], b[keep])


def test_row_resets_off_and_all():
    lm = _stateful_lm()
    off = cb.RowStateResets(0.0)
    off.set_model(lm)
    off.on_train_batch_begin(0)
    assert not _row_is_zero(lm).any()
    every = cb.RowStateResets(1.0)
    every.set_model(lm)
    every.on_train_batch_begin(0)
    assert _row_is_zero(lm).all()
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        cb.RowStateResets(1.5)
    assert "state_reset_prob must be from 0 to 1" in \
        " ".join(LMConfig(state_reset_prob=-0.1).problems())


def test_trainer_says_when_validation_is_worse_than_uniform():
    said = []
    d = cb.TrainingDiagnostics(vocab_size=100, printer=said.append)  # ln|V| = 4.605
    d.on_epoch_end(0, {"loss": 5.2, "val_loss": 4.4})  # a first epoch: fine
    assert not said
    d.on_epoch_end(1, {"loss": 4.0, "val_loss": 8.1})  # the tinyshakespeare epoch 1
    assert d.report[-1]["kind"] == "inference_collapse"
    assert "--state-reset-prob" in said[-1] and "zero state" in said[-1]
    quiet = cb.TrainingDiagnostics(vocab_size=100, printer=said.append)
    quiet.on_epoch_end(0, {"loss": 6.0, "val_loss": 4.7})  # both near uniform: not this
    assert all(r["kind"] != "inference_collapse" for r in quiet.report)


@pytest.fixture
def corpus_file(tmp_path):
    # A small grammar ("the big cat sat on a mat"): learnable, unlike random words.
    rng = np.random.default_rng(0)
    pick = lambda words: words.split()[rng.integers(len(words.split()))]  # noqa: E731
    lines = [f"{pick('the a')} {pick('big small red')} {pick('cat dog')} "
             f"{pick('sat ran')} on {pick('the a')} {pick('mat log')}" for _ in range(600)]
    path = tmp_path / "tiny.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_inference_perplexity_is_close_to_training_after_an_epoch(tmp_path, corpus_file):
    # The pipeline's recipe at toy size: AWD regularisers, tied weights, row resets. After
    # one epoch the model scored as a user runs it (dropout off, from the zero state, batch
    # 1) must not be far worse than training (measured with dropout on): an inference-only
    # bug (weight-drop or dropout scaling, state carried wrongly) breaks this.
    config = LMConfig(data=corpus_file, embed_dim=16, units=16, tie_weights=True,
                      dropout=0.3, variational_dropout=True, embed_dropout=0.1,
                      weight_dropout=0.3, batch_size=4, bptt=6, epochs=1, lr=0.02, seed=3,
                      state_reset_prob=0.05, sample_tokens=0, histogram_freq=0,
                      max_steps_per_epoch=None)
    train_lm(config, tmp_path / "run", verbose=0)
    with open(tmp_path / "run" / "metrics.csv") as fh:
        header, *rows = (line.split(",") for line in fh.read().strip().splitlines())
    train_ppl = math.exp(float(rows[-1][header.index("loss")]))
    val = perplexity_of_run(tmp_path / "run", "val")
    vocab = 16  # 13 words + <pad> <unk> <eos>
    assert train_ppl < vocab / 3  # it learned the grammar (about 2.2 at best)
    assert val.ppl < 1.5 * train_ppl, (val.ppl, train_ppl)
