"""The adaptive softmax in the language-model task: config checks, the word ids' frequency
ranking its clusters need, exact scoring, and the TFLite step model's log-probs and top-k
suggestions against Keras's."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_seq.data.tokenizers import WordTokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.export.tflite import export_tflite
from keras_seq.models import RecurrentLM
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.evaluation import evaluate_stream
from keras_seq.tasks.lm.task import build_model

CUTOFFS = [20, 100]


def _text(n_lines: int = 300, seed: int = 0) -> str:
    """Zipf-distributed words w0…w399 (frequent words get small ranks), one line each 12."""
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.2, size=n_lines * 12), 400) - 1
    words = [f"w{r}" for r in ranks]
    return "\n".join(" ".join(words[i:i + 12]) for i in range(0, len(words), 12)) + "\n"


def test_config_checks_adaptive_options():
    assert LMConfig(softmax="adaptive", cutoffs="2000,10000").problems() == []
    assert any("--cutoffs" in p for p in LMConfig(softmax="adaptive").problems())
    assert any("increasing" in p for p in LMConfig(softmax="adaptive",
                                                   cutoffs="10000,2000").problems())
    assert any("for softmax 'adaptive'" in p for p in LMConfig(cutoffs="5,9").problems())
    assert any("tie-weights" in p for p in LMConfig(softmax="adaptive", cutoffs="5,9",
                                                    tie_weights=True).problems())
    with pytest.raises(KerasSeqError, match="vocabulary size"):
        build_model(LMConfig(softmax="adaptive", cutoffs="20,500", units=8, embed_dim=4), 300)


def test_word_ids_are_ranked_by_training_count(shakespeare_available):
    """The clusters assume id order = frequency order (after the specials)."""
    text = shakespeare_available.read_text()[:300_000]
    tok = WordTokenizer(min_count=1).fit(text)
    counts = collections.Counter(t for t in tok.tokens(text) if t != "<eos>")
    ranked = [counts[w] for w in tok.vocab[len(tok.specials):]]
    assert len(ranked) > 1000 and ranked == sorted(ranked, reverse=True)


def _adaptive_lm(vocab_size: int) -> RecurrentLM:
    # init_scale 0.5: log-probs spread widely, so top-5 orders are not near-ties
    lm = RecurrentLM(vocab_size, embed_dim=8, units=16, cell="lstm", softmax="adaptive",
                     cutoffs=CUTOFFS, init_scale=0.5)
    lm(np.zeros((1, 4), "int32"))
    return lm


def test_stream_scoring_is_the_full_distribution():
    lm = _adaptive_lm(150)
    ids = np.random.default_rng(3).integers(0, 150, size=30).astype("int32")
    got, n = evaluate_stream(lm, ids, window=7)  # eval lm's scorer, state carried
    runner = lm.clone_for_batch(1, stateful=False)
    full = np.asarray(runner.head.log_prob(_features(runner, ids[:-1])))[0]  # (29, V)
    np.testing.assert_allclose(np.exp(full).sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(got, full[np.arange(n), ids[1:]], atol=1e-5)


def _features(lm, ids):
    x = lm.embedding(ids[None])
    for rnn in lm.rnns:
        x = rnn(x, training=False)
    return x  # (1, T, U)


def test_tflite_step_gives_keras_log_probs_and_top5(tmp_path):
    data = tmp_path / "zipf.txt"
    data.write_text(_text())
    tok = WordTokenizer(min_count=1).fit(data.read_text())
    config = LMConfig(data=str(data), min_count=1, embed_dim=8, units=16,
                      softmax="adaptive", cutoffs=",".join(map(str, CUTOFFS)))
    lm = _adaptive_lm(tok.vocab_size)
    manifest = export_tflite(tmp_path, tmp_path / "out", variants=["float32"],
                             graphs=["step"], parity_tokens=40, val_tokens=60,
                             printer=lambda *a: None, model=lm, tokenizer=tok, config=config)
    entry = manifest["models"][0]
    assert entry["parity"]["max_abs_logit_diff"] < 1e-5, entry
    meta = json.loads((tmp_path / "out" / "step_float32.json").read_text())
    assert meta["softmax"] == "adaptive" and meta["logits_are"].startswith("log_probs")
    assert meta["cutoffs"] == CUTOFFS

    tflite = LiteRTLM(tmp_path / "out" / "step_float32.tflite", tokenizer=tok)
    runner = lm.clone_for_batch(1, stateful=True)
    ids = tok.encode(_text(3, seed=5))[:25]
    for token in ids:
        got = tflite.step(int(token))  # (V,) log-probs
        want = np.asarray(runner(np.array([[token]], np.int32), training=False))[0, -1]
        np.testing.assert_allclose(np.exp(got.astype(np.float64)).sum(), 1.0, atol=1e-5)
        top = np.argsort(-want)[:5]
        np.testing.assert_array_equal(np.argsort(-got)[:5], top)
        np.testing.assert_allclose(got[top], want[top], atol=1e-5)
    # the runtime's suggestions (specials skipped) are Keras's top words
    words = [w for w, _ in tflite.suggest(5)]
    keep = [i for i in np.argsort(-want) if i not in (tok.pad_id, tok.unk_id)][:5]
    assert words == [tok.vocab[i] for i in keep]


@pytest.mark.slow  # ~25 s on the loaded 2-core machine; the loss paths' fast check is
# tests/backends/test_adaptive_softmax.py::test_loss_equals_pytorch (dense and gather)
def test_bench_softmax_trains_each_variant_on_the_same_steps(tmp_path, eager_tf_functions):
    # lazy: the benchmark module imports the trainer's task
    from keras_seq.benchmarks.softmax import format_table, run_softmax_bench

    data = tmp_path / "zipf.txt"
    data.write_text(_text(400))
    result = run_softmax_bench(str(data), max_vocab=300, cutoffs=(20, 100),
                               variants=("adaptive", "adaptive-gather"), steps=2, chunk=1,
                               warmup=1, units=16, embed_dim=8, batch_size=4, bptt=5,
                               eval_tokens=30, printer=lambda *a: None)
    rows = {r["variant"]: r for r in result["rows"]}
    assert result["steps"] == 3 and all(r["turns"] == 2 for r in rows.values())
    # the two loss paths are one model computed two ways: the same weights after training
    assert rows["adaptive"]["params"] == rows["adaptive-gather"]["params"]
    assert rows["adaptive"]["train_loss_last_chunk"] == pytest.approx(
        rows["adaptive-gather"]["train_loss_last_chunk"], rel=1e-4)
    np.testing.assert_allclose(rows["adaptive"]["val_ppl"], rows["adaptive-gather"]["val_ppl"],
                               rtol=1e-4)
    assert 1 < rows["adaptive"]["val_ppl"] < 2 * result["vocab_size"]
    assert rows["adaptive"]["speedup"] == 1.0
    table = format_table(result)
    assert table.count("\n| ") == 3 and "| adaptive-gather |" in table


_MIRRORED = """
import sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
from keras_seq.models import RecurrentLM
x = np.random.default_rng(0).integers(0, 60, size=(8, 6)).astype("int32")
def run(strategy):
    with strategy.scope():
        keras.utils.set_random_seed(1)
        lm = RecurrentLM(60, 8, 16, softmax="adaptive", cutoffs=[10, 30], div_value=2.0)
        lm(np.zeros((1, 6), "int32"))
        lm.compile(keras.optimizers.SGD(0.5),
                   loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    loss = lm.fit(x, np.roll(x, -1, 1), batch_size=8, epochs=2, verbose=0,
                  shuffle=False).history["loss"]
    return loss, lm.get_weights()
(l1, w1), (l2, w2) = run(tf.distribute.get_strategy()), run(
    tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
print(max(abs(a - b) for a, b in zip(l1, l2)), max(float(abs(a - b).max()) for a, b in zip(w1, w2)))
"""


@pytest.mark.slow  # a TensorFlow process with two logical CPUs: ~40 s on the loaded machine
def test_two_replicas_train_the_adaptive_lm_as_one_device():
    """The adaptive loss is scaled per replica as Keras scales a compiled loss (without it
    the summed gradient and the logged loss were 2× on two replicas)."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-c", _MIRRORED], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    loss_diff, weight_diff = map(float, done.stdout.split()[-2:])
    assert loss_diff < 1e-5 and weight_diff < 1e-6, done.stdout
