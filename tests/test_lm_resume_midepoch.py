"""`train lm` stopped mid-epoch by its budget, resumed to an uninterrupted run's weights;
epochs shorter than the stream (--steps-per-epoch); validation on a sample (--eval-tokens).

The budget stop is made deterministic with the test hook
:data:`keras_seq.training.callbacks.BUDGET_BATCHES_ENV` (the budget counts as spent after
K batches), which goes through the same mid-epoch commit as a stop on the clock; one test
stops on the clock itself.
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_seq.atomic import KILL_AT_ENV
from keras_seq.errors import KerasSeqError
from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.classify.task import train_classifier
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.evaluation import perplexity_interval
from keras_seq.tasks.lm.task import TASK, stream_batches, train_lm
from keras_seq.training import callbacks as cb
from keras_seq.training.checkpoints import CHECKPOINTS, resume_point


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    words = "the cat dog sat ran on a mat log and big small red".split()
    lines = [" ".join(rng.choice(words, rng.integers(3, 9))) for _ in range(160)]
    path = tmp_path_factory.mktemp("corpus") / "tiny.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def config(corpus_file, **kw):
    # 160 lines: batch 4 × bptt 6 → N = 40 stream batches (test_stream_length)
    base = dict(data=corpus_file, embed_dim=8, units=12, batch_size=4, bptt=6, epochs=2,
                max_steps_per_epoch=8, sample_tokens=0, histogram_freq=0, log_every=2,
                seed=7, lr=0.01, dropout=0.2, state_reset_prob=0.2)
    return LMConfig(**{**base, **kw})


def weights(run_dir):
    return keras.saving.load_model(run_dir / CHECKPOINTS / "last.keras").get_weights()


def assert_same_weights(a, b):
    wa, wb = weights(a), weights(b)
    assert len(wa) == len(wb)
    for x, y in zip(wa, wb):
        np.testing.assert_array_equal(x, y)


def csv_rows(run_dir):
    return (run_dir / "metrics.csv").read_text().splitlines()


@pytest.fixture(scope="module")
def straight(corpus_file, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "straight"
    train_lm(config(corpus_file), run, verbose=0)
    return run


# slow: a stop in the second epoch (the first is the fast tier's: the same resume path)
@pytest.mark.parametrize("stop_after", [5, pytest.param(11, marks=pytest.mark.slow)],
                         ids=["epoch1-batch5", "epoch2-batch3"])
def test_budget_stop_mid_epoch_resumes_to_the_uninterrupted_weights(
        corpus_file, straight, tmp_path, monkeypatch, stop_after):
    run = tmp_path / "stopped"
    monkeypatch.setenv(cb.BUDGET_BATCHES_ENV, str(stop_after))
    stopped = train_lm(config(corpus_file), run, verbose=0)
    epochs, batches = divmod(stop_after, 8)
    assert stopped["time_budget_hit"] and stopped["epochs_done"] == epochs
    assert stopped["batches_done"] == batches
    point = resume_point(run)
    assert (point.epochs_done, point.batches_done) == (epochs, batches)
    assert len(point.stream_states) == 2  # (h, c) of the LSTM, every stream row
    assert point.stream_states[0].shape == (4, 12) and np.abs(point.stream_states[0]).sum() > 0
    assert point.state["metric_states"]  # the epoch's loss and perplexity so far
    monkeypatch.delenv(cb.BUDGET_BATCHES_ENV)
    resumed = train_lm(config(corpus_file), run, resume=True, verbose=0)
    assert resumed["epochs_done"] == 2 and not resumed["time_budget_hit"]
    assert_same_weights(straight, run)
    assert csv_rows(run) == csv_rows(straight)  # the stopped epoch's metrics whole


def test_a_clock_budget_stops_mid_epoch(corpus_file, tmp_path):
    run = tmp_path / "clock"
    # 0.001 min = 60 ms: past it at the first batch end, inside an epoch of 40 batches
    result = train_lm(config(corpus_file, max_steps_per_epoch=None, max_minutes=0.001,
                             dropout=0.0, state_reset_prob=0.0), run, verbose=0)
    assert result["time_budget_hit"] and result["epochs_done"] == 0
    assert 1 <= result["batches_done"] < 40
    state = json.loads((run / "state.json").read_text())
    assert state["batches_done"] == result["batches_done"]
    assert (run / CHECKPOINTS / state["states_file"]).is_file()


def test_stream_length(corpus_file, tmp_path):
    full = config(corpus_file, max_steps_per_epoch=None)
    prepared = TASK.prepare(full, tmp_path, False, print)
    assert stream_batches(full, len(prepared.state.train_ids)) == 40
    assert len(prepared.state.val_ids) > 4 * 7  # validation runs in fit


def test_steps_per_epoch_goes_on_through_the_stream(corpus_file, tmp_path):
    # Two epochs of the 40-batch stream, or ten "epochs" of 8 batches: the same batches in
    # the same order with the state carried across epoch ends and validation.
    kw = dict(max_steps_per_epoch=None, state_reset_prob=0.0)
    train_lm(config(corpus_file, epochs=2, **kw), tmp_path / "passes", verbose=0)
    short = train_lm(config(corpus_file, epochs=10, steps_per_epoch=8, **kw),
                     tmp_path / "short", verbose=0)
    assert short["epochs_done"] == 10
    assert_same_weights(tmp_path / "passes", tmp_path / "short")


def test_reset_states_where_the_stream_starts(monkeypatch):
    reset = cb.ResetStatesCallback(num_batches=5, steps_per_epoch=3)
    resets = []
    monkeypatch.setattr(cb, "reset_recurrent_states",
                        lambda model: resets.append((reset.epoch, batch)))
    for epoch in range(4):
        reset.on_epoch_begin(epoch)
        for batch in range(3):
            reset.on_train_batch_begin(batch)
    assert resets == [(0, 0), (1, 2), (3, 1)]  # global batches 0, 5, 10
    reset.batch_offset = 2  # a resumed fit starting at batch 2 of epoch 1: global 5
    reset.on_epoch_begin(1)
    batch = 0
    reset.on_train_batch_begin(batch)
    assert resets[-1] == (1, 0)


def test_steps_per_epoch_and_max_steps_per_epoch_exclude_each_other(corpus_file):
    problems = config(corpus_file, steps_per_epoch=4).problems()
    assert any("steps_per_epoch and max_steps_per_epoch" in p for p in problems)
    assert not config(corpus_file, max_steps_per_epoch=None, steps_per_epoch=4).problems()


def test_eval_tokens_validates_on_a_sample_with_an_interval(corpus_file, tmp_path):
    run = tmp_path / "sampled"
    result = train_lm(config(corpus_file, eval_tokens=30, epochs=1), run, verbose=0)
    header, row = csv_rows(run)
    values = dict(zip(header.split(","), map(float, row.split(","))))
    assert values["val_ppl_low"] < values["val_perplexity"] < values["val_ppl_high"]
    assert np.isclose(np.log(values["val_perplexity"]), values["val_loss"])
    assert result["val"]["tokens"] > 30  # the whole split when training ends


@pytest.mark.slow  # fast versions: the sampled validation above, the budget stops below
def test_a_budget_stop_with_eval_tokens_evaluates_when_training_ends(corpus_file, tmp_path,
                                                                      monkeypatch):
    stopped = tmp_path / "stopped"
    monkeypatch.setenv(cb.BUDGET_BATCHES_ENV, "3")  # a budget stop mid-epoch leaves the
    result = train_lm(config(corpus_file, eval_tokens=30, epochs=1), stopped, verbose=0)
    monkeypatch.delenv(cb.BUDGET_BATCHES_ENV)  # whole splits for the end (a bounded stop)
    assert "val" not in result and "evaluated when training ends" in result["evaluation"]
    assert "val" in train_lm(config(corpus_file, eval_tokens=30, epochs=1), stopped,
                             resume=True, verbose=0)


def test_perplexity_interval_is_the_ratio_estimator_over_windows():
    rng = np.random.default_rng(1)
    losses = rng.gamma(2.0, 1.5, size=60)  # equal windows of 6: the plain formula
    r = perplexity_interval(-losses, window=6)
    means = losses.reshape(10, 6).mean(axis=1)
    se = means.std(ddof=1) / np.sqrt(10)
    assert np.isclose(r["loss"], losses.mean()) and np.isclose(r["se"], se)
    assert np.isclose(r["ppl_low"], np.exp(losses.mean() - 1.96 * se))
    assert r["windows"] == 10 and r["tokens"] == 60
    # a shorter last window counts by its tokens
    r = perplexity_interval(-losses[:57], window=6)
    assert np.isclose(r["loss"], losses[:57].mean())
    # 95% intervals of independent samples cover the true mean about 95% of the time
    true = 3.0
    samples = rng.gamma(2.0, 1.5, size=(400, 200))  # mean 3
    covered = [np.exp(true) >= perplexity_interval(-s, 4)["ppl_low"] and
               np.exp(true) <= perplexity_interval(-s, 4)["ppl_high"] for s in samples]
    assert 0.90 <= np.mean(covered) <= 0.99


@pytest.mark.slow  # fast version: the LM budget-stop tests above (the same trainer path)
def test_classify_stops_mid_epoch_and_resumes_exactly(tmp_path, monkeypatch):
    # The other task shapes take the same path (fit_kwargs' start_batch): one of them here.
    rng = np.random.default_rng(0)
    rows = ["text\tlabel"] + [f"{' '.join(rng.choice('a b c d good bad'.split(), 5))}\t"
                              f"{'pos' if i % 2 else 'neg'}" for i in range(120)]
    tsv = tmp_path / "reviews.tsv"
    tsv.write_text("\n".join(rows) + "\n")
    cfg = ClassifyConfig(data=f"tsv:{tsv}", units=8, embed_dim=8, batch_size=16, dropout=0.2,
                         seed=3, epochs=2)  # 108 train rows: 7 batches an epoch
    train_classifier(cfg, tmp_path / "straight", verbose=0)
    monkeypatch.setenv(cb.BUDGET_BATCHES_ENV, "4")
    stopped = train_classifier(cfg, tmp_path / "stopped", verbose=0)
    assert (stopped["epochs_done"], stopped["batches_done"]) == (0, 4)
    monkeypatch.delenv(cb.BUDGET_BATCHES_ENV)
    train_classifier(cfg, tmp_path / "stopped", resume=True, verbose=0)
    assert_same_weights(tmp_path / "straight", tmp_path / "stopped")
    assert csv_rows(tmp_path / "stopped") == csv_rows(tmp_path / "straight")


def _cli(run_dir, corpus_file, env, *extra):
    command = [sys.executable, "-m", "keras_seq.cli", "train", "lm", "--run-dir", str(run_dir),
               "--data", corpus_file, "--embed-dim", "8", "--units", "12", "--batch-size", "4",
               "--bptt", "6", "--epochs", "2", "--max-steps-per-epoch", "8",
               "--sample-tokens", "0", "--histogram-freq", "0", "--log-every", "2",
               "--seed", "7", "--lr", "0.01", "--dropout", "0.2", "--state-reset-prob", "0.2",
               "--quiet", *extra]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", ["state.json:2:mid-write", "epoch-0001-b000003.states.npz"
                                     ":1:mid-write", "state.json:2:after-rename"])
def test_sigkill_during_the_mid_epoch_commit_resumes_exactly(corpus_file, straight, tmp_path,
                                                            kill_at):
    env = {k: v for k, v in os.environ.items() if k != KILL_AT_ENV}
    env.update(KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3")
    run = tmp_path / "killed"
    killed = _cli(run, corpus_file, {**env, cb.BUDGET_BATCHES_ENV: "11", KILL_AT_ENV: kill_at})
    assert killed.returncode == -9, killed.stderr[-2000:]
    resumed = _cli(run, corpus_file, env, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert_same_weights(straight, run)
    assert not [p for p in run.rglob(".*") if ".tmp" in p.name]



JAX_SCRIPT = """
import os, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, {tests!r})
import test_lm_resume_midepoch as t
from keras_seq.tasks.lm.task import train_lm
root, corpus = Path(sys.argv[1]), sys.argv[2]
train_lm(t.config(corpus), root / "straight", verbose=0)
os.environ[t.cb.BUDGET_BATCHES_ENV] = "11"
stopped = train_lm(t.config(corpus), root / "stopped", verbose=0)
assert (stopped["epochs_done"], stopped["batches_done"]) == (1, 3), stopped
del os.environ[t.cb.BUDGET_BATCHES_ENV]
assert train_lm(t.config(corpus), root / "stopped", resume=True, verbose=0)["backend"] == "jax"
t.assert_same_weights(root / "straight", root / "stopped")
assert t.csv_rows(root / "straight") == t.csv_rows(root / "stopped")
print("EXACT")
"""


@pytest.mark.slow
def test_jax_budget_stop_mid_epoch_resumes_exactly(corpus_file, tmp_path):
    pytest.importorskip("jax")
    env = {**os.environ, "KERAS_BACKEND": "jax", "CUDA_VISIBLE_DEVICES": "",
           "JAX_PLATFORMS": "cpu"}
    env.pop(cb.BUDGET_BATCHES_ENV, None)
    script = JAX_SCRIPT.format(tests=os.path.dirname(__file__))
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path), corpus_file], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "EXACT" in done.stdout, done.stderr[-3000:]


def test_a_config_written_before_the_wave_3_fields_still_loads(tmp_path):
    """A run directory written by this version before --softmax/--steps-per-epoch/
    --eval-tokens existed reads with their defaults; any other missing field is refused."""
    path = tmp_path / "config.json"
    LMConfig(units=16, steps_per_epoch=3).save(path)
    data = json.loads(path.read_text())
    for name in LMConfig.added:
        del data[name]
    path.write_text(json.dumps(data))
    config = LMConfig.load(path)
    assert (config.softmax, config.cutoffs, config.steps_per_epoch, config.eval_tokens) == \
        ("full", None, None, None) and config.units == 16
    del data["units"]
    path.write_text(json.dumps(data))
    with pytest.raises(KerasSeqError, match="missing field"):
        LMConfig.load(path)
    full = json.loads(json.dumps(LMConfig(units=16).to_dict()))
    del full["eval_tokens"]  # only one of them gone: damage, not an older layout
    path.write_text(json.dumps({**json.loads(path.read_text()), **full}))
    with pytest.raises(KerasSeqError, match="missing field.*eval_tokens"):
        LMConfig.load(path)
