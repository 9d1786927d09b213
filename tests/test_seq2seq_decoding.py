import numpy as np
import pytest
import tensorflow as tf

from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.models.seq2seq import Seq2Seq
from keras_seq.tasks.seq2seq import decoding
from keras_seq.tasks.seq2seq.export import export_saved_model


@pytest.fixture(scope="module")
def setup():
    src_tok = make_tokenizer("char").fit("abcdefgh 0123\n")
    tgt_tok = make_tokenizer("char").fit("abcdefgh\n")
    model = Seq2Seq(src_tok.vocab_size, tgt_tok.vocab_size, embed_dim=4, units=8,
                    max_source_len=8, max_target_len=6)
    model.build()
    # Bias the readout so that <eos> wins after a few steps for some rows only.
    w = model.readout.get_weights()
    w[1][model.eos_id] = 1.0
    model.readout.set_weights(w)
    return model, src_tok, tgt_tok


def _sources(src_tok):
    return decoding.encode_sources(src_tok, ["abc", "h", "gfedcba", "0a1b"], 8)


def test_beam_width_one_equals_greedy(setup):
    model, src_tok, _ = setup
    ids = _sources(src_tok)
    greedy = decoding.greedy_decode(model, ids)
    for alpha in (0.0, 1.0):
        assert decoding.beam_search(model, ids, beam=1, length_penalty=alpha) == greedy


def test_beam_search_is_batched_and_scores_at_least_greedy(setup):
    model, src_tok, _ = setup
    ids = _sources(src_tok)
    one_by_one = [decoding.beam_search(model, ids[i:i + 1], beam=3)[0] for i in range(len(ids))]
    together, scores = decoding.beam_search(model, ids, beam=3, length_penalty=0.0,
                                            return_scores=True)
    assert decoding.beam_search(model, ids, beam=3) == one_by_one
    # With α = 0 the beam's log-probability can't be below greedy's on these tiny cases.
    greedy = decoding.greedy_decode(model, ids)
    for src, hyp, score in zip(ids, greedy, scores):
        memory, states = model.encode(src[None])
        logp, prev = 0.0, model.bos_id
        for tok in hyp + [model.eos_id]:
            logits, states, _ = model.decode_step(np.array([prev]), states, memory)
            logp += float(tf.nn.log_softmax(logits)[0, tok])
            prev = tok
        if len(hyp) < model.max_target_len + 1:
            assert score >= logp - 1e-4
    assert all(len(t) <= model.max_target_len + 1 for t in together)


def test_greedy_attention_rows_sum_to_one(setup):
    model, src_tok, _ = setup
    ids = _sources(src_tok)
    tokens, weights = decoding.greedy_decode(model, ids, return_attention=True)
    for w, src in zip(weights, ids):
        assert w.shape[1] == int((src != 0).sum())
        np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-5)


def test_bad_inputs_are_explained(setup):
    model, src_tok, tgt_tok = setup
    with pytest.raises(KerasSeqError, match="empty"):
        decoding.translate(model, src_tok, tgt_tok, ["abc", "  "])
    with pytest.raises(KerasSeqError, match="maximum of 8"):
        decoding.translate(model, src_tok, tgt_tok, ["abcdefgha"])
    unknown = []
    decoding.translate(model, src_tok, tgt_tok, ["xyz a"],
                       on_unknown=lambda i, n: unknown.append((i, n)))
    assert unknown == [(0, 3)]
    with pytest.raises(KerasSeqError, match="beam width"):
        decoding.beam_search(model, _sources(src_tok), beam=0)


def test_saved_model_string_to_string_round_trip(setup, tmp_path):
    model, src_tok, tgt_tok = setup
    texts = ["abc", "h", "gfedcba", "0a1b", "zz"]  # "zz" is out of vocabulary: <unk>
    expected = decoding.translate(model, src_tok, tgt_tok, texts)
    path = export_saved_model(model, src_tok, tgt_tok, tmp_path / "saved")
    reloaded = tf.saved_model.load(str(path))
    got = [s.decode() for s in reloaded.translate(tf.constant(texts)).numpy()]
    assert got == expected
    served = reloaded.signatures["serving_default"](text=tf.constant(texts))["translation"]
    assert [s.decode() for s in served.numpy()] == expected
    with pytest.raises(tf.errors.InvalidArgumentError, match="maximum of 8"):
        reloaded.translate(tf.constant(["abcdefghabc"]))


def test_saved_model_word_tokenizer(tmp_path):
    src_tok = make_tokenizer("word").fit("go away now\nstop it\n")
    tgt_tok = make_tokenizer("word").fit("vete ya\npara lo\n")
    model = Seq2Seq(src_tok.vocab_size, tgt_tok.vocab_size, embed_dim=4, units=8,
                    max_source_len=6, max_target_len=5)
    model.build()
    texts = ["go away", "Stop it!", "now now now"]
    expected = decoding.translate(model, src_tok, tgt_tok, texts)
    path = export_saved_model(model, src_tok, tgt_tok, tmp_path / "words")
    reloaded = tf.saved_model.load(str(path))  # keep a reference: it owns the variables
    got = reloaded.translate(tf.constant(texts)).numpy()
    assert [s.decode() for s in got] == expected


class _ChainModel:
    """A fake decoder: next-token probabilities depend on the previous token only.

    The likely path is bos → 2 → 3 → 4 → eos (0.9 each); an early <eos> is the second most
    likely token at every step (0.05), so a beam that stopped after collecting ``beam``
    finished hypotheses would return one of those early stops.
    """

    bos_id, eos_id, output_vocab, max_target_len = 5, 6, 7, 8

    def __init__(self):
        table = np.full((7, 7), 0.01)
        for prev, nxt in {5: 2, 2: 3, 3: 4, 4: 6}.items():
            table[prev, 6] = 0.05
            table[prev, nxt] = 0.9
        self.logits = tf.constant(np.log(table / table.sum(1, keepdims=True)), tf.float32)

    def encode(self, source_ids):
        batch = tf.shape(source_ids)[0]
        return {"values": tf.zeros([batch, 1, 1])}, [tf.zeros([batch, 1])]

    def decode_step(self, prev, states, memory):
        return tf.gather(self.logits, tf.cast(prev, tf.int32)), list(states), None


@pytest.mark.parametrize("alpha", [0.0, 1.0])
@pytest.mark.parametrize("beam", [1, 2, 4])
def test_beam_search_does_not_stop_at_improbable_early_eos(beam, alpha):
    model = _ChainModel()
    out = decoding.beam_search(model, np.ones((3, 2), np.int32), beam=beam,
                               length_penalty=alpha)
    assert out == [[2, 3, 4]] * 3
