import keras
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
    keras.utils.set_random_seed(0)
    model.build()
    # Bias the readout so that <eos> wins after a few steps for some rows only.
    w = model.readout.get_weights()
    w[1][model.eos_id] = 1.0
    model.readout.set_weights(w)
    return model, src_tok, tgt_tok


def _sources(src_tok):
    return decoding.encode_sources(src_tok, ["abc", "h", "gfedcba", "0a1b"], 8)


class _TableModel:
    """A fake decoder with random next-token tables (seeded numpy), one per source.

    ``p(next | step, prev)`` comes from table ``source[0] % n_tables``; the table index and
    the step ride in the state so that they follow every beam. ``<eos>`` is unlikely at the
    first step and near-certain at the sixth, so every output ends within the length
    limit; padding and ``<bos>`` are never produced. Log-probabilities of any output can
    then be computed independently from the tables.
    """

    bos_id, eos_id, output_vocab, max_target_len = 1, 2, 7, 8
    steps = 6

    def __init__(self, seed, n_tables=12):
        rng = np.random.default_rng(seed)
        logits = rng.normal(0.0, 1.5, (n_tables, self.steps, 7, 7))
        logits[:, 0, :, self.eos_id] -= 3.0
        logits[:, -1, :, self.eos_id] += 30.0
        logits[..., [0, self.bos_id]] = -30.0
        self.table = tf.constant(logits, tf.float32)
        logits = logits.astype(np.float32).astype(np.float64)
        self.logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        self.n_tables = n_tables

    def encode(self, source_ids):
        batch = tf.shape(source_ids)[0]
        which = tf.cast(source_ids[:, :1] % self.n_tables, tf.float32)  # (B, 1)
        return {"values": tf.zeros([batch, 1, 1])}, [which, tf.zeros([batch, 1])]

    def decode_step(self, prev, states, memory):
        which, step = states
        index = tf.stack([tf.cast(which[:, 0], tf.int32), tf.cast(step[:, 0], tf.int32),
                          tf.cast(prev, tf.int32)], axis=1)
        step = tf.minimum(step + 1.0, self.steps - 1.0)
        return tf.gather_nd(self.table, index), [which, step], None

    def sequence_logp(self, source, tokens):
        """log p(tokens <eos> | source), from the tables."""
        table, prev, total = self.logp[int(source[0]) % self.n_tables], self.bos_id, 0.0
        for t, tok in enumerate(list(tokens) + [self.eos_id]):
            total += table[min(t, self.steps - 1), prev, tok]
            prev = tok
        return total


TABLE_SOURCES = np.arange(1, 13, dtype=np.int32)[:, None]  # one source per table


def test_beam_width_one_equals_greedy():
    model = _TableModel(seed=3)
    greedy = decoding.greedy_decode(model, TABLE_SOURCES)
    assert len({tuple(g) for g in greedy}) > 3  # non-trivial, varied outputs
    for alpha in (0.0, 1.0):
        assert decoding.beam_search(model, TABLE_SOURCES, beam=1, length_penalty=alpha) == greedy


def test_beam_search_is_batched_and_scores_at_least_greedy():
    model = _TableModel(seed=3)
    ids = TABLE_SOURCES
    one_by_one = [decoding.beam_search(model, ids[i:i + 1], beam=4)[0] for i in range(len(ids))]
    assert decoding.beam_search(model, ids, beam=4) == one_by_one
    beams, scores = decoding.beam_search(model, ids, beam=4, length_penalty=0.0,
                                         return_scores=True)
    greedy = decoding.greedy_decode(model, ids)
    better = 0
    for src, hyp, score, g in zip(ids, beams, scores, greedy):
        assert len(g) < model.steps and len(hyp) < model.steps  # both ended with <eos>
        # α = 0: the returned score is the hypothesis's own log-probability …
        assert score == pytest.approx(model.sequence_logp(src, hyp), abs=1e-4)
        # … and never below greedy's (on these examples: beam search is no exact search).
        greedy_logp = model.sequence_logp(src, g)
        assert score >= greedy_logp - 1e-5, (hyp, g)
        better += score > greedy_logp + 1e-3
    assert better >= 1  # and the wider search finds a better output somewhere


def test_beam_finds_the_better_path_greedy_misses():
    model = _ChainModel()
    model.logits = tf.constant(np.log(_GARDEN_PATH), tf.float32)
    ids = np.ones((2, 2), np.int32)
    assert decoding.greedy_decode(model, ids) == [[2, 3]] * 2  # p ≈ 0.55·0.31·0.99
    beam = decoding.beam_search(model, ids, beam=2, length_penalty=0.0)
    assert beam == [[4]] * 2  # p ≈ 0.40·0.99


def test_real_model_beam_is_batched(setup):
    model, src_tok, _ = setup
    ids = _sources(src_tok)
    one_by_one = [decoding.beam_search(model, ids[i:i + 1], beam=3)[0] for i in range(len(ids))]
    together = decoding.beam_search(model, ids, beam=3)
    assert together == one_by_one
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


# Garden path (rows: previous token; bos 5, eos 6): bos → 2 is likeliest (0.55) but leads
# on to no likely token, so greedy's "2 3" has p ≈ 0.17; bos → 4 (0.40) → eos (0.99) has
# p ≈ 0.40, which a beam of 2 keeps and greedy never looks at.
_GARDEN_PATH = np.full((7, 7), 1e-3)
_GARDEN_PATH[5, [2, 4]] = [0.55, 0.40]
_GARDEN_PATH[2, [3, 6]] = [0.31, 0.29]
_GARDEN_PATH[2, [1, 4]] = [0.2, 0.2]
_GARDEN_PATH[3, 6] = 0.99
_GARDEN_PATH[4, 6] = 0.99
_GARDEN_PATH /= _GARDEN_PATH.sum(1, keepdims=True)
