import sys

import numpy as np
import pytest

from keras_seq.data.tokenizers import (
    EOS,
    UNK,
    CharTokenizer,
    Tokenizer,
    WordTokenizer,
    load_tokenizer,
    make_tokenizer,
)
from keras_seq.errors import DataError

TRICKY = (
    "  Leading space. Don't STOP: it's 3.5% (or so)!\n"
    "\n"
    "Tabs\there\tand ünïcödé — dashes; «quotes» café_au_lait\r\n"
    "a <unk> word as in PTB, and <b>tags</b>\n"
    "last line without newline?"
)


def test_word_rule(tiny_text):
    tok = WordTokenizer().fit(tiny_text)
    assert tok.tokenize_lines("Don't stop: the cat's hat!") == [
        ["don't", "stop", ":", "the", "cat's", "hat", "!"]
    ]
    assert tok.vocab[:3] == ["<pad>", UNK, EOS]
    assert tok.vocab[3] == "the"  # most frequent first
    stream = tok.tokens(tiny_text)
    assert stream.count(EOS) == 3  # one per non-blank line
    assert tok.decode(tok.encode("the cat ran\n")) == "the cat <unk>\n"
    assert tok.tokenize_lines("a <unk> b <x>") == [["a", "<unk>", "b", "<", "x", ">"]]


def test_vocab_limits(tiny_text):
    full = WordTokenizer().fit(tiny_text).vocab_size
    assert WordTokenizer(min_count=2).fit(tiny_text).vocab_size < full
    assert WordTokenizer(max_vocab=5).fit(tiny_text).vocab_size == 5
    with pytest.raises(DataError, match="max_vocab"):
        WordTokenizer(max_vocab=2)
    with pytest.raises(DataError, match="min_count"):
        WordTokenizer(min_count=0)


def test_char_roundtrip_and_unknowns():
    tok = CharTokenizer().fit("hello world\n")
    assert tok.decode(tok.encode("hello\nworld")) == "hello\nworld"
    assert tok.decode(tok.encode("xyz")) == "<unk><unk><unk>"
    assert tok.oov_rate("hex") == pytest.approx(1 / 3)


def test_fingerprint_tracks_what_decides_the_ids(tiny_text):
    a = WordTokenizer().fit(tiny_text)
    assert a.fingerprint == WordTokenizer().fit(tiny_text).fingerprint
    assert a.fingerprint != WordTokenizer(lower=False).fit(tiny_text).fingerprint
    assert a.fingerprint != WordTokenizer().fit(tiny_text + "zebra\n").fingerprint
    assert a.fingerprint != CharTokenizer().fit(tiny_text).fingerprint
    assert a.fingerprint.startswith("word:")


@pytest.mark.parametrize("kind", ["char", "word"])
def test_save_load_roundtrip(tmp_path, tiny_text, kind):
    tok = make_tokenizer(kind).fit(tiny_text)
    tok.save(tmp_path)
    again = load_tokenizer(tmp_path)
    assert again.fingerprint == tok.fingerprint
    np.testing.assert_array_equal(again.encode(tiny_text), tok.encode(tiny_text))


def test_load_errors(tmp_path, tiny_text):
    with pytest.raises(DataError, match="no tokenizer"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(DataError, match="not a keras-seq tokenizer"):
        load_tokenizer(tmp_path)
    path = WordTokenizer().fit(tiny_text).save(tmp_path / "t.json")
    path.write_text(path.read_text().replace('"the"', '"thee"'))
    with pytest.raises(DataError, match="corrupt"):
        load_tokenizer(path)


def test_unfitted_and_unknown():
    with pytest.raises(DataError, match="no vocabulary yet"):
        WordTokenizer().encode("x")
    with pytest.raises(DataError, match="unknown tokenizer"):
        make_tokenizer("bpe")
    with pytest.raises(DataError, match="do not apply"):
        make_tokenizer("char", vocab_size=10)
    tok = CharTokenizer().fit("ab")
    with pytest.raises(DataError, match="outside this vocabulary"):
        tok.decode([99])


def test_importing_tokenizers_does_not_import_tensorflow():
    import subprocess

    code = "import keras_seq.data, keras_seq.metrics, sys; assert 'tensorflow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("kind", ["char", "word", "subword"])
def test_graph_path_equals_python_path(kind):
    import tensorflow as tf

    train = ("the quick brown fox jumps over the lazy dog. Don't panic!\n" * 30) + TRICKY
    options = {"vocab_size": 80} if kind == "subword" else {}
    tok = make_tokenizer(kind, **options).fit(train)
    texts = [TRICKY, "the fox\n\nthe dog\n", "", "   \n"]
    graph = tok.tf_encode(tf.constant(texts))
    for text, ids in zip(texts, graph):
        np.testing.assert_array_equal(ids.numpy(), tok.encode(text), err_msg=repr(text))


def test_subword_roundtrip_and_save(tmp_path):
    text = "lower lowest newer newest wider widest\n" * 40
    tok = make_tokenizer("subword", vocab_size=60).fit(text)
    ids = tok.encode("lowest newer\nwidest\n")
    assert tok.decode(ids) == "lowest newer\nwidest\n"
    assert any(t.startswith("##") for t in tok.vocab)
    tok.save(tmp_path)
    again = load_tokenizer(tmp_path)
    np.testing.assert_array_equal(again.encode("newest wider\n"), tok.encode("newest wider\n"))


def test_subword_vocab_size_is_a_maximum():
    rng = np.random.default_rng(0)
    letters = list("abcdefghij")
    words = ["".join(rng.choice(letters, rng.integers(2, 8))) for _ in range(400)]
    text = " ".join(rng.choice(words, 3000)) + "\n"
    tok = make_tokenizer("subword", vocab_size=60).fit(text)
    assert tok.vocab_size <= 60
    sample = " ".join(words[:20]) + "\n"
    assert tok.decode(tok.encode(sample)) == sample  # still spells every word


# -- the fast word and char paths against the reference rule (issue 27) -----------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from keras_seq.data.tokenizers import (  # noqa: E402
    _split_words,
    _split_words_regex,
    line_blocks,
)

# Everything the word rule treats specially: ASCII whitespace and punctuation, the two
# marker characters, non-ASCII whitespace (which str.split() would drop), non-ASCII
# punctuation and letters, letters whose lower case changes length, "<unk>" pieces.
HOSTILE = st.lists(
    st.sampled_from(list("aZ9_' \t\n\r\f\v.,<>!-/\x00\x1c\x1d\x1e\x1f\x7f\x85\xa0\u2003"
                         "\u2028—«»éÉİΣßǅ😀") + ["<unk>", "<UNK>", "\r\n", "\n\n", "don't"]),
    max_size=60,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=HOSTILE, lower=st.booleans())
def test_fast_word_split_equals_the_regex_rule(text, lower):
    assert _split_words(text, lower) == _split_words_regex(text, lower)


@settings(max_examples=100, deadline=None)
@given(text=HOSTILE, size=st.integers(1, 8))
def test_tokens_of_line_blocks_are_the_tokens_of_the_text(text, size):
    tok = WordTokenizer().fit(TRICKY + text + " x")
    assert "".join(line_blocks(text, size)) == text
    pieces = [tok.encode(block) for block in line_blocks(text, size)]
    joined = np.concatenate(pieces) if pieces else np.zeros(0, np.int32)
    np.testing.assert_array_equal(joined, tok.encode(text))


@pytest.mark.parametrize("kind", ["char", "word"])
def test_fast_encode_equals_the_token_lookup(kind):
    train = TRICKY * 3 + "Σίσυφος ΟΔΟΣ\n"
    tok = make_tokenizer(kind, min_count=2).fit(train)
    for text in [TRICKY, "unseen wörds\u2003and <unk>s\n\n", "", "\x1e\x1f", TRICKY * 5000]:
        reference = Tokenizer.tokens_to_ids(tok, tok.tokens(text))
        ids, unknown = tok.encode_counting(text)
        np.testing.assert_array_equal(ids, reference)
        assert unknown == sum(t not in tok._index for t in tok.tokens(text))
    assert tok.vocab == make_tokenizer(kind, min_count=2).fit_counts(_counts(kind, train)).vocab


def _counts(kind, text):
    counts = make_tokenizer(kind).counter()
    for block in line_blocks(text, 7):
        counts.add(block)
    return counts


def test_word_fit_counts_literal_unk_as_the_special():
    tok = WordTokenizer().fit("<unk> <unk> a\n")
    assert tok.vocab == ["<pad>", UNK, EOS, "a"]
    assert tok.encode("<UNK> b\n").tolist() == [1, 1, 2]


def test_a_line_longer_than_a_block_is_tokenized_whole():
    """A single line past the block size (no line break to cut at) used to recurse forever."""
    from keras_seq.data import tokenizers

    long_line = "a b. " * (tokenizers._BLOCK_CHARS // 2) + "\nnext line\n"
    tokens = tokenizers.WordTokenizer().tokens(long_line)
    assert len(tokens) == 3 * (tokenizers._BLOCK_CHARS // 2) + 4  # + <eos> next line <eos>
    assert tokens[-4:] == ["<eos>", "next", "line", "<eos>"] and tokens[:4] == ["a", "b", ".", "a"]
