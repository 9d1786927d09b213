"""The LiteRT runtime: no TensorFlow on its path, metadata checks, streaming."""

import json
import shutil
import subprocess
import sys

import numpy as np
import pytest

from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.sampling import GreedySampler, TopKSampler
from tests.fixtures.lm_runs import exported


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return exported(tmp_path_factory)


def test_runtime_never_imports_tensorflow(export):
    out, _ = export
    code = (
        "import sys\n"
        "from keras_seq.runtime import LiteRTLM\n"
        "from keras_seq.sampling import TopKSampler\n"
        f"lm = LiteRTLM({str(out / 'step_dynamic.tflite')!r})\n"
        "ids, us = lm.generate('the cat', 5, TopKSampler(3), seed=0)\n"
        "print(len(ids), lm.suggest(3))\n"
        "lm2 = LiteRTLM(" + repr(str(out / "step_fused_float32.tflite")) + ")\n"
        "lm2.feed_text('the dog')\n"
        "bad = [m for m in sys.modules if m == 'tensorflow' or m.startswith('tensorflow.')]\n"
        "assert not bad, bad[:5]\n"
        "print('NO_TF')\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "NO_TF" in res.stdout


def test_streaming_matches_scoring_and_generation_is_seeded(export):
    out, manifest = export
    lm = LiteRTLM(out / "step_float32.tflite")
    ids = lm.tokenizer.encode("the cat sat on a mat\n")
    logp = lm.score_ids(ids)
    lm.reset()
    lm.step(int(ids[0]))
    first = lm.logits.copy()
    z = first - first.max()
    assert logp[0] == pytest.approx(z[ids[1]] - np.log(np.exp(z).sum()), abs=1e-5)
    a, us = lm.generate("the cat", 8, TopKSampler(5), seed=3)
    b, _ = lm.generate("the cat", 8, TopKSampler(5), seed=3)
    assert a == b and len(us) == 8 and all(u > 0 for u in us)
    fused = LiteRTLM(out / "step_fused_float32.tflite")
    assert fused.generate("the cat", 8, GreedySampler())[0] == \
        lm.generate("the cat", 8, GreedySampler())[0]
    top = lm.suggest(3)
    assert len(top) == 3 and top[0][1] >= top[1][1] >= top[2][1]


def test_other_models_tflite_is_refused(export, tmp_path):
    out, _ = export
    shutil.copy(out / "step_float32.tflite", tmp_path / "model.tflite")
    shutil.copy(out / "step_dynamic.json", tmp_path / "model.json")  # someone else's metadata
    shutil.copy(out / "tokenizer.json", tmp_path / "tokenizer.json")
    with pytest.raises(KerasSeqError, match="another model's .tflite"):
        LiteRTLM(tmp_path / "model.tflite")
    (tmp_path / "model.json").unlink()
    with pytest.raises(KerasSeqError, match="has no metadata"):
        LiteRTLM(tmp_path / "model.tflite")
    with pytest.raises(KerasSeqError, match="no model at"):
        LiteRTLM(tmp_path / "missing.tflite")


def test_mismatched_tokenizer_is_refused(export, tmp_path):
    out, _ = export
    other = make_tokenizer("word").fit("completely different words here\n")
    path = other.save(tmp_path)
    with pytest.raises(KerasSeqError, match="does not match the model"):
        LiteRTLM(out / "step_float32.tflite", tokenizer=path)
    meta = json.loads((out / "step_float32.json").read_text())
    assert meta["tokenizer_fingerprint"] != other.fingerprint


def test_empty_and_unknown_prompts(export):
    out, _ = export
    lm = LiteRTLM(out / "step_float32.tflite")
    for prompt in ("", "   "):
        with pytest.raises(KerasSeqError, match="prompt is empty"):
            lm.generate(prompt, 5)
    with pytest.raises(KerasSeqError, match="only unknown tokens"):
        lm.generate("zebra quux", 5)
    with pytest.raises(KerasSeqError, match="max_tokens"):
        lm.generate("the cat", 0)
    with pytest.raises(KerasSeqError, match="outside the vocabulary"):
        lm.step(10_000)


def test_generation_never_produces_pad_or_unk_and_eos_is_a_line_break(export):
    out, _ = export
    lm = LiteRTLM(out / "step_float32.tflite")
    tok = lm.tokenizer
    real_step = lm.step

    def favour_specials(token_id):  # a model that loves <unk> and <pad>
        logits = real_step(token_id).copy()
        logits[[tok.unk_id, tok.pad_id]] = logits.max() + 50.0
        lm.logits = logits
        return logits

    lm.step = favour_specials
    ids, _ = lm.generate("the cat", 40, GreedySampler())
    assert tok.unk_id not in ids and tok.pad_id not in ids
    ids, _ = lm.generate("the cat", 40, TopKSampler(5), seed=1)
    assert tok.unk_id not in ids and tok.pad_id not in ids
    assert all(w not in ("<unk>", "<pad>") for w, _ in lm.suggest(5))
    # <eos> prints as a line break, and the next word starts the line without a space.
    lm.step = real_step
    lm.reset()
    lm.feed_ids([tok.eos_id, int(tok.encode("cat")[0])])
    assert lm.token_text(int(tok.encode("cat")[0])) == "cat"
    lm.feed_ids([int(tok.encode("sat")[0])])
    assert lm.token_text(int(tok.encode("sat")[0])) == " sat"
    assert lm.token_text(tok.eos_id) == "\n"


@pytest.mark.parametrize("name", ["step_dynamic", "step_fused_float32"])
def test_the_in_place_step_gives_the_copying_steps_numbers(export, name):
    out, _ = export
    fast, copying = LiteRTLM(out / f"{name}.tflite"), LiteRTLM(out / f"{name}.tflite",
                                                                zero_copy=False)
    assert fast._buffers is not None and copying._buffers is None
    ids = fast.tokenizer.encode("the cat sat on a mat\nthe dog ran\n" * 3)
    kept = []
    for t in ids:
        a, b = fast.step(int(t)), copying.step(int(t))
        np.testing.assert_array_equal(a, b)  # bit for bit: the same kernels, same inputs
        kept.append(a)
        for n in fast.state_names:
            np.testing.assert_array_equal(fast.states[n], copying.states[n])
    # every step returns its own array: a later step does not overwrite an earlier one
    assert not np.array_equal(kept[0], kept[-1])
    np.testing.assert_array_equal(kept[0], LiteRTLM(out / f"{name}.tflite").step(int(ids[0])))
    fast.reset()  # a new stream starts from the zero state again
    np.testing.assert_array_equal(fast.step(int(ids[0])), kept[0])


def test_a_sequence_model_keeps_the_copying_path(export):
    out, _ = export
    lm = LiteRTLM(out / "sequence_float32.tflite")
    assert lm._buffers is None
    ids = lm.tokenizer.encode("the cat sat on a mat\n")
    np.testing.assert_allclose(lm.score_ids(ids),
                               LiteRTLM(out / "step_float32.tflite").score_ids(ids), atol=1e-4)
