import csv
import json
import math
import time
import types

import keras
import numpy as np
import pytest

from keras_seq.cli import main
from keras_seq.errors import KerasSeqError
from keras_seq.models import RecurrentLM
from keras_seq.tasks.lm.config import LMConfig, preset
from keras_seq.tasks.lm.evaluation import evaluate_stream
from keras_seq.tasks.lm.task import train_lm
from keras_seq.training import callbacks as cb


@pytest.fixture
def corpus_file(tmp_path):
    rng = np.random.default_rng(0)
    words = "the cat dog sat ran on a mat log and big small red".split()
    lines = [" ".join(rng.choice(words, rng.integers(3, 9))) for _ in range(600)]
    path = tmp_path / "tiny.txt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def tiny_config(corpus_file, **kw):
    base = dict(data=corpus_file, embed_dim=8, units=12, batch_size=4, bptt=6, epochs=2,
                max_steps_per_epoch=8, sample_tokens=8, log_every=2, histogram_freq=1,
                seed=7, lr=0.01)
    return LMConfig(**{**base, **kw})


def test_reset_callback_resets_every_stateful_layer():
    lm = RecurrentLM(10, 4, 4, num_layers=2, cell="gru", stateful=True)
    lm(np.ones((2, 3), "int32"))
    lm(np.ones((2, 3), "int32"))  # state is now non-zero
    callback = cb.ResetStatesCallback()
    callback.set_model(lm)
    callback.on_epoch_begin(0)
    for rnn in lm.rnns:
        assert all(float(np.abs(s).max()) == 0 for s in rnn.states)


def test_eval_carries_state_through_stream():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 15, 53).astype("int32")
    lm = RecurrentLM(15, 6, 6, num_layers=2, cell="lstm")
    lm(ids[None, :4])
    logp, n = evaluate_stream(lm, ids, window=7)  # 7 windows, the last one shorter
    assert n == 52
    logits = np.asarray(lm(ids[None, :-1]))[0]  # one stateless pass over everything
    full = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(logp, full[np.arange(52), ids[1:]], atol=1e-5)


def test_ptb_learning_rate_schedule():
    sched = cb.PTBLearningRate(1.0, 0.5, decay_start=4)
    assert [sched.rate(e) for e in range(6)] == [1.0, 1.0, 1.0, 1.0, 0.5, 0.25]
    small = preset("ptb-small")
    assert (small.units, small.bptt, small.epochs, small.init_scale) == (200, 20, 13, 0.1)
    assert preset("ptb-large").lr_decay == pytest.approx(1 / 1.15)


def test_train_eval_generate_end_to_end(tmp_path, corpus_file, capsys):
    run = tmp_path / "run"
    results = train_lm(tiny_config(corpus_file), run, verbose=0)
    for name in ("config.json", "tokenizer.json", "metrics.csv", "metrics.json", "state.json",
                 "checkpoints/last.keras"):
        assert (run / name).exists(), name
    assert results["val"]["tokens"] > 0 and np.isfinite(results["val"]["ppl"])
    assert results["val"]["fingerprint"]["tokenizer"].startswith("word:")
    logs = {p.name for p in (run / "tensorboard").iterdir()}
    assert {"train", "validation", "diagnostics", "samples", "activations"} <= logs
    capsys.readouterr()
    assert main(["eval", "lm", "--run-dir", str(run), "--split", "test", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["fingerprint"]["split"] == "test"
    assert main(["generate", "--run-dir", str(run), "--prompt", "the cat",
                 "--max-tokens", "5", "--seed", "1", "--sampler", "greedy"]) == 0
    assert capsys.readouterr().out.startswith("the cat")
    with pytest.raises(KerasSeqError, match="already holds a run"):
        train_lm(tiny_config(corpus_file), run, verbose=0)


@pytest.mark.parametrize("regularizers", [
    # slow: the awd case below resumes the same dropout seed generators (and three more)
    pytest.param({"dropout": 0.2}, marks=pytest.mark.slow),
    {"dropout": 0.2, "variational_dropout": True, "embed_dropout": 0.1, "weight_dropout": 0.3,
     "state_reset_prob": 0.2},
], ids=["dropout", "awd"])
def test_resume_ends_with_the_same_weights(tmp_path, corpus_file, regularizers):
    config = tiny_config(corpus_file, epochs=3, **regularizers)
    train_lm(config, tmp_path / "straight", verbose=0)
    # "interrupted" run: stops after one epoch, then resumes to three
    train_lm(tiny_config(corpus_file, epochs=1, **regularizers), tmp_path / "resumed",
             verbose=0)
    train_lm(config, tmp_path / "resumed", resume=True, verbose=0)
    a = keras.saving.load_model(tmp_path / "straight/checkpoints/last.keras").get_weights()
    b = keras.saving.load_model(tmp_path / "resumed/checkpoints/last.keras").get_weights()
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_clipping_bounds_the_update():
    lm = RecurrentLM(10, 4, 4, cell="rnn")
    x = np.random.default_rng(0).integers(0, 10, (2, 5)).astype("int32")
    lm(x)
    before = [w.copy() for w in lm.get_weights()]
    lm.compile(optimizer=keras.optimizers.SGD(1.0, global_clipnorm=1e-3),
               loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    logs = lm.train_on_batch(x, x, return_dict=True)
    step = np.sqrt(sum(((a - b) ** 2).sum() for a, b in zip(lm.get_weights(), before)))
    assert float(logs["grad_norm"]) > 1e-3  # the raw gradient was larger than θ …
    assert step == pytest.approx(1e-3, rel=1e-3)  # … and the applied step is exactly θ·lr


def test_nan_guard_stops_and_keeps_last_good_checkpoint(tmp_path, corpus_file, monkeypatch):
    # Epoch 1 trains normally; from epoch 2 on the SGD schedule sets an infinite learning
    # rate, so the loss turns non-finite a step or two into epoch 2. The weights at the
    # start of epoch 2 (i.e. after epoch 1) are snapshotted where the rate is set.
    after_epoch_1 = {}

    def rate(self, epoch):
        if epoch == 0:
            return self.base_lr
        after_epoch_1.setdefault("weights", [w.copy() for w in self.model.get_weights()])
        return float("inf")

    monkeypatch.setattr(cb.PTBLearningRate, "rate", rate)
    run = tmp_path / "nan"
    with pytest.raises(KerasSeqError) as err:
        train_lm(tiny_config(corpus_file, optimizer="sgd", lr=0.5, clip_norm=None, cell="rnn",
                             epochs=3), run, verbose=0)
    last = run / "checkpoints" / "last.keras"
    message = str(err.value)
    assert "loss became" in message and "at epoch 2," in message, message
    assert f"the last good checkpoint is {last}" in message and "Lower the learning rate" \
        in message
    assert json.loads((run / "state.json").read_text())["epochs_done"] == 1
    kept = keras.saving.load_model(last).get_weights()
    assert len(kept) == len(after_epoch_1["weights"])
    for saved, good in zip(kept, after_epoch_1["weights"]):
        assert np.all(np.isfinite(saved))
        np.testing.assert_array_equal(saved, good)


def test_full_bptt_mode(tmp_path, corpus_file):
    results = train_lm(tiny_config(corpus_file, bptt_mode="full", epochs=1), tmp_path / "f",
                       verbose=0)
    assert np.isfinite(results["val"]["ppl"])


def test_not_learning_and_overfitting_diagnostics():
    said = []
    d = cb.TrainingDiagnostics(vocab_size=100, printer=said.append)
    d.on_epoch_end(0, {"loss": 4.6, "val_loss": 4.0})
    assert not said  # first epoch: too early to judge
    d.on_epoch_end(1, {"loss": 4.5, "val_loss": 4.1})
    d.on_epoch_end(2, {"loss": 4.4, "val_loss": 4.2})
    kinds = [r["kind"] for r in d.report]
    assert "not_learning" in kinds and "overfitting" in kinds
    rep = cb.TrainingDiagnostics(vocab_size=100, sample_fn=lambda: ["a", "b"] * 20,
                                 printer=said.append)
    rep.on_epoch_end(0, {"loss": 1.0})
    assert rep.report[-1]["kind"] == "repetition"


def test_diverging_diagnostic():
    said = []
    d = cb.TrainingDiagnostics(vocab_size=100, printer=said.append)  # ln|V| = 4.605
    d.on_epoch_end(0, {"loss": 4.0})  # below a uniform guess: nothing to say
    d.on_epoch_end(1, {"loss": 6.0})  # worse than uniform, but not far: no verdict
    d.on_epoch_end(2, {"loss": float("nan")})  # non-finite: the NaN guard's business
    assert not said and not d.report
    d.on_epoch_end(3, {"loss": 25.0})  # far above ln|V|: worse than uniform
    assert [r["kind"] for r in d.report] == ["diverging"]
    assert d.report[0]["epoch"] == 4
    assert len(said) == 1 and "diverging: training loss 25" in said[0]
    assert "ln|V| = 4.605" in said[0] and "lower --lr" in said[0]
    d.on_epoch_end(4, {"loss": 30.0})  # recorded again, said only once
    assert [r["kind"] for r in d.report] == ["diverging", "diverging"] and len(said) == 1
    # With a chance loss (a classifier with 2 classes: ln 2) the threshold follows it.
    c = cb.TrainingDiagnostics(chance_loss=math.log(2), printer=said.append)
    c.on_epoch_end(0, {"loss": 2.0})  # 2 < 2·ln 2 + 1 ≈ 2.39: not diverging yet
    assert not c.report
    c.on_epoch_end(1, {"loss": 2.5})
    assert c.report[-1]["kind"] == "diverging" and "the chance loss = 0.693" in said[-1]


def test_bad_input_is_clear(tmp_path, corpus_file, capsys):
    assert main(["train", "lm", "--run-dir", str(tmp_path / "x"), "--data", corpus_file,
                 "--bptt", "0"]) == 2
    assert "bptt must be ≥ 1" in capsys.readouterr().err
    assert main(["train", "lm", "--run-dir", str(tmp_path / "y"), "--data", corpus_file,
                 "--batch-size", "100000", "--bptt", "5"]) == 2
    assert "too short" in capsys.readouterr().err
    assert main(["eval", "lm", "--run-dir", str(tmp_path / "missing")]) == 2
    assert "not a keras-seq run directory" in capsys.readouterr().err


def test_compare_runs_with_an_ngram_and_refuse_other_tokens(tmp_path, corpus_file, capsys):
    run = tmp_path / "run"
    train_lm(tiny_config(corpus_file, epochs=1), run, verbose=0)
    same = tmp_path / "kn.arpa"
    other = tmp_path / "kn-min2.arpa"
    assert main(["ngram", "train", "--data", corpus_file, "--order", "2", "--out", str(same)]) == 0
    assert main(["ngram", "train", "--data", corpus_file, "--order", "2", "--min-count", "2",
                 "--out", str(other)]) == 0
    capsys.readouterr()
    png = tmp_path / "curves.png"
    assert main(["compare", "--runs", str(run), "--ngram", str(same), "--json",
                 "--plot", str(png)]) == 0
    table = json.loads(capsys.readouterr().out)
    assert png.stat().st_size > 1000 and table["plot"] == str(png)
    assert [r["model"].split()[0] for r in table["rows"]] == ["lstm", "kn"]
    assert all(np.isfinite(r["ppl"]) for r in table["rows"])
    # keyboard metrics for both on the same positions, and the paired differences
    assert all(0 <= r["keystrokes saved"] <= 100 for r in table["rows"])
    (diff,) = table["keyboard_differences"]
    assert set(diff) >= {"model", "top-1", "top-3 in-vocab", "keystrokes saved"}
    # a vocabulary with min-count 2 counts different tokens: the comparison is refused
    assert main(["compare", "--runs", str(run), "--ngram", str(other)]) == 2
    assert "not comparable" in capsys.readouterr().err


def test_unseen_unk_warning():
    from keras_seq.tasks.lm.data import unseen_unk_warning

    train = np.array([2, 3, 4, 5] * 50)
    val = np.array([2, 1, 3, 4] * 10)  # 25% <unk> (id 1)
    assert "--min-count 2" in unseen_unk_warning(train, val, unk_id=1)
    assert unseen_unk_warning(np.append(train, 1), val, unk_id=1) is None  # seen in training
    assert unseen_unk_warning(train, np.array([2, 3, 4]), unk_id=1) is None  # no unknowns


def test_keyboard_top1_is_the_models_own_argmax(tmp_path, corpus_file, capsys):
    """`eval lm`'s keyboard line counts what the model itself ranks first: a stateless pass
    over <eos> + the split, its argmax over the suggestable ids, against each target."""
    from keras_seq.data.tokenizers import load_tokenizer
    from keras_seq.tasks.lm.data import corpus_for
    from keras_seq.tasks.lm.evaluation import keyboard_outcomes, load_run

    run = tmp_path / "run"
    train_lm(tiny_config(corpus_file, epochs=1), run, verbose=0)
    out = keyboard_outcomes(run, "val", k=3)
    config, tokenizer, model = load_run(run)
    tokens = load_tokenizer(run).tokens(corpus_for(config).text("val"))
    ids = tokenizer.tokens_to_ids(tokens)
    stateless = model.clone_for_batch(1, stateful=False)
    logits = np.array(stateless(np.concatenate([[tokenizer.eos_id], ids[:-1]])[None]))[0]
    logits[:, [tokenizer.pad_id, tokenizer.unk_id]] = -np.inf
    rated = [i for i, t in enumerate(tokens) if not (t == "<eos>" and (i == 0 or tokens[i - 1]
                                                                       == "<eos>"))]
    hits = (logits.argmax(-1) == ids)[rated] & (ids[rated] != tokenizer.unk_id)
    assert out.kind.size == len(rated)
    np.testing.assert_array_equal(out.rank == 0, hits)
    capsys.readouterr()
    assert main(["eval", "lm", "--run-dir", str(run), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["keyboard"]["top1"] == pytest.approx(hits.mean())
    assert main(["eval", "lm", "--run-dir", str(run), "--suggestions", "0"]) == 2
    assert "--suggestions must be ≥ 1 (got 0)" in capsys.readouterr().err


def test_the_decay_tail_falls_over_the_epochs_training_has_room_for(corpus_file, tmp_path):
    # by count: the last two of three epochs, as decay_start = epochs - 2 would
    sched = cb.BudgetedDecay(1.0, 0.5, last=2, epochs=3)
    assert [sched.rate(e) for e in range(3)] == [1.0, 0.5, 0.25]
    # by time: 2-minute epochs in a 9-minute budget leave room for 4; the rate never rises
    sched = cb.BudgetedDecay(1.0, 0.5, last=2, epochs=50, minutes=9)
    rates = [sched.rate(e, elapsed=120 * e) for e in range(4)]
    assert rates == [1.0, 1.0, 0.5, 0.25]
    assert sched.rate(5, elapsed=200) == 0.25  # faster epochs later: k stays
    # a resumed run counts its epoch times from where it starts
    sched = cb.BudgetedDecay(1.0, 0.5, last=1, epochs=50, minutes=5)
    assert [sched.rate(e, elapsed=60 * (e - 10)) for e in (10, 11, 13, 14)] == \
        [1.0, 1.0, 1.0, 0.5]
    # with a budget, training ends at the end of the last epoch that fits, never in a part
    # epoch the budget would cut: 4 epochs in 7.8 minutes leave room for a 5th in 10, 4 in
    # 8.5 do not
    sched = cb.BudgetedDecay(1.0, 0.5, last=2, epochs=9, minutes=10)
    sched.set_model(types.SimpleNamespace(stop_training=False))
    sched.start = time.monotonic() - 470
    sched.on_epoch_end(3)
    assert not sched.model.stop_training and sched.stopped_after is None
    sched.start = time.monotonic() - 510
    sched.on_epoch_end(3)
    assert sched.model.stop_training and sched.stopped_after == 3
    # in training: the logged rate of each epoch
    run = tmp_path / "run"
    train_lm(tiny_config(corpus_file, epochs=3, lr_decay=0.5, decay_epochs=2, sample_tokens=0,
                         histogram_freq=0), run, verbose=0)
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert [float(r["learning_rate"]) for r in rows] == pytest.approx([0.01, 0.005, 0.0025])
    # configs written before the field read with it off
    old = {k: v for k, v in LMConfig().to_dict().items() if k != "decay_epochs"}
    assert LMConfig.from_dict({"kind": "lm", **old}).decay_epochs == 0
