"""Prepared corpora (keras_seq/data/prepared.py): the same ids as tokenizing the text, in
bounded pieces; a manifest that catches damage; every LM reader takes the directory."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_seq.cli import main
from keras_seq.data import splits
from keras_seq.data.corpus import StreamedText, load_corpus
from keras_seq.data.prepared import (
    MANIFEST,
    TOKENS,
    PreparedCorpus,
    cut_pieces,
    is_prepared,
    prepare_corpus,
    read_chunks,
)
from keras_seq.data.tokenizers import make_tokenizer
from keras_seq.errors import DataError

# Unicode (letters whose lower case changes, non-ASCII space and dashes), CRLF and lone
# CR, blank lines, a literal <unk>, a byte-order mark, an invalid byte, no final newline.
HOSTILE = ("\ufeffOne <unk> TWO, don't\r\n\r\n  ΣΑΣ café — «x»\u00a0y\n\n\n\tlast\r"
           "line İs ok!\n").encode() * 30 + b"z \xff tail without newline"


@pytest.fixture
def hostile(tmp_path):
    path = tmp_path / "hostile.txt"
    path.write_bytes(HOSTILE)
    return path


@pytest.mark.parametrize("kind", ["word", "char"])
@pytest.mark.parametrize("chunk_bytes,block_chars", [(1, 1), (3, 5), (7, 64), (1 << 20, 1 << 20)])
def test_ids_equal_encoding_each_split_of_the_text(tmp_path, hostile, kind, chunk_bytes,
                                                   block_chars):
    prepared = prepare_corpus(hostile, tmp_path / "p", tokenizer=kind, min_count=2,
                              chunk_bytes=chunk_bytes, block_chars=block_chars)
    corpus = load_corpus(hostile)  # today's path: whole text, 90/5/5, fit on train
    tok = make_tokenizer(kind, min_count=2).fit(corpus.text("train"))
    assert prepared.tokenizer.vocab == tok.vocab
    for split in ("train", "val", "test"):
        np.testing.assert_array_equal(prepared.split(split), tok.encode(corpus.text(split)))
    assert prepared.sha256 == corpus.sha256 and prepared.notes == corpus.notes
    assert prepared.describe()["chars"] == {s: len(t) for s, t in corpus.splits.items()}


@pytest.mark.parametrize("kind", ["word", "char"])
def test_one_split_holds_the_ids_of_the_whole_text(tmp_path, hostile, kind):
    prepared = prepare_corpus(hostile, tmp_path / "p", tokenizer=kind, split="100/0/0",
                              chunk_bytes=2, block_chars=3)
    text = load_corpus(hostile, split="100/0/0").text("train")
    np.testing.assert_array_equal(prepared.ids, prepared.tokenizer.encode(text))


def test_directory_and_registry_sources(tmp_path):
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"first file\r\nno final newline")
    (folder / "b.txt").write_bytes(b"\xef\xbb\xbfsecond file\n" * 40)
    for source in (folder, "tinyshakespeare"):
        prepared = prepare_corpus(source, tmp_path / "p", tokenizer="word", chunk_bytes=5000)
        corpus = load_corpus(str(source))
        tok = make_tokenizer("word").fit(corpus.text("train"))
        for split in ("train", "val", "test"):
            np.testing.assert_array_equal(prepared.split(split), tok.encode(corpus.text(split)))
        assert (prepared.sha256, prepared.notes) == (corpus.sha256, corpus.notes)


def test_cut_pieces_cuts_where_split_text_cuts(monkeypatch):
    rng = np.random.default_rng(0)
    alphabet = ["a", "bb", " ", "\n", "\n\n", "é", "long line " * 3]
    monkeypatch.setattr(splits, "_SNAP_LIMIT", 4)  # cuts that may not reach a line break
    monkeypatch.setattr("keras_seq.data.prepared._SNAP_LIMIT", 4)
    for _ in range(300):
        text = "".join(rng.choice(alphabet, rng.integers(0, 30)))
        bounds = np.sort(rng.integers(0, len(text) + 1, 4))
        pieces = [text[a:b] for a, b in zip([0, *bounds], [*bounds, len(text)])]
        for spec in ("90/5/5", "50/50", "1/98/1", "20/0/80"):
            got = dict.fromkeys(splits.SPLITS, "")
            for split, piece in cut_pieces(pieces, len(text), splits.parse_split(spec)):
                got[split] += piece
            assert got == splits.split_text(text, spec), (text, spec)


def test_streamed_text_refuses_what_load_corpus_refuses(tmp_path):
    path = tmp_path / "bin.txt"
    path.write_bytes(b"text\n" * 10 + b"\x00")
    with pytest.raises(DataError, match="NUL byte at byte offset 50"):
        list(StreamedText(str(path), chunk_bytes=3).pieces())
    path.write_bytes("é".encode("latin-1") * 40)
    with pytest.raises(DataError, match="40 of 40 bytes are invalid"):
        list(StreamedText(str(path), chunk_bytes=3).pieces())


def test_dtype_grows_with_the_vocabulary(tmp_path):
    words = " ".join(f"w{i}" for i in range(70_000))
    path = tmp_path / "big.txt"
    path.write_text(words + "\n")
    prepared = prepare_corpus(path, tmp_path / "p", split="100/0/0")
    assert prepared.dtype == "uint32" and prepared.tokenizer.vocab_size == 70_003
    assert os.path.getsize(tmp_path / "p" / TOKENS) == 4 * len(prepared)
    small = prepare_corpus(path, tmp_path / "q", split="100/0/0", max_vocab=65_536)
    assert small.dtype == "uint16"


def _prepared(tmp_path, **options):
    path = tmp_path / "t.txt"
    path.write_text("the cat sat on the mat\nthe dog sat\n" * 40)
    return prepare_corpus(path, tmp_path / "p", **options).path


def _edit_manifest(folder, **changes):
    manifest = json.loads((folder / MANIFEST).read_text())
    manifest.update(changes)
    (folder / MANIFEST).write_text(json.dumps(manifest))


def test_damaged_directories_say_what_and_how_to_fix(tmp_path):
    folder = _prepared(tmp_path)
    tokens = folder / TOKENS
    blob = tokens.read_bytes()
    tokens.write_bytes(blob[:-2])
    with pytest.raises(DataError, match=r"has 878 bytes.*440 uint16 ids.*truncated.*data prepare"):
        PreparedCorpus(folder)
    tokens.write_bytes(blob)
    _edit_manifest(folder, version=2)
    with pytest.raises(DataError, match="version 2; this keras-seq reads version 1"):
        PreparedCorpus(folder)
    _edit_manifest(folder, version=1, dtype="int8")
    with pytest.raises(DataError, match="damaged: dtype 'int8'"):
        PreparedCorpus(folder)
    _edit_manifest(folder, dtype="uint16", tokenizer={"fingerprint": "word:0000"})
    with pytest.raises(DataError, match="the tokenizer was replaced"):
        PreparedCorpus(folder)
    (folder / MANIFEST).unlink()
    assert not is_prepared(folder)
    with pytest.raises(DataError, match="no prepared.json .*interrupted"):
        PreparedCorpus(folder)


def test_verify_reads_the_ids(tmp_path):
    folder = _prepared(tmp_path)
    PreparedCorpus(folder).verify()
    blob = bytearray((folder / TOKENS).read_bytes())
    blob[0] ^= 1
    (folder / TOKENS).write_bytes(bytes(blob))
    with pytest.raises(DataError, match="does not have the sha256"):
        PreparedCorpus(folder).verify()


def test_a_killed_prepare_never_looks_complete(tmp_path):
    folder = _prepared(tmp_path)  # a complete one first: a re-prepare replaces it
    code = ("import sys; from keras_seq.data.prepared import prepare_corpus; "
            f"prepare_corpus({str(tmp_path / 't.txt')!r}, {str(folder)!r}, block_chars=10)")
    env = dict(os.environ, KERAS_SEQ_KILL_AT=f"{TOKENS}:1:mid-write")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True)
    assert done.returncode == -9
    assert not is_prepared(folder)
    with pytest.raises(DataError, match="no prepared.json"):
        PreparedCorpus(folder)


def test_out_must_be_new_empty_or_prepared(tmp_path):
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.md").write_text("mine")
    with pytest.raises(DataError, match="already holds notes.md"):
        prepare_corpus("python-docs", tmp_path / "other")
    with pytest.raises(DataError, match="word or char"):
        prepare_corpus("python-docs", tmp_path / "new", tokenizer="subword")


def test_requests_that_differ_from_the_preparation_are_refused(tmp_path):
    corpus = PreparedCorpus(_prepared(tmp_path, min_count=2))
    corpus.check_request(tokenizer="word", min_count=2, split_ratio="0.9,0.05,0.05")
    with pytest.raises(DataError, match="--tokenizer char"):
        corpus.check_request(tokenizer="char")
    with pytest.raises(DataError, match="--min-count 2, but --min-count 1"):
        corpus.check_request(min_count=1)
    with pytest.raises(DataError, match="--split-ratio 90/5/5, but 90/10"):
        corpus.check_request(split_ratio="90/10")


def test_read_chunks_and_stream_batches_come_from_the_file(tmp_path):
    from keras_seq.data.batching import stream_arrays, stream_dataset

    train = PreparedCorpus(_prepared(tmp_path)).split("train")
    assert np.array_equal(np.concatenate(list(read_chunks(train, 7))), train)
    x, y = stream_arrays(train, 4, 5)
    batches = stream_dataset(train, 4, 5)
    assert batches.region is not None  # read from the file batch by batch, not a view
    for k in range(len(batches)):
        bx, by = batches[k]
        assert bx.dtype == np.int32
        np.testing.assert_array_equal(bx, x[4 * k: 4 * k + 4])
        np.testing.assert_array_equal(by, y[4 * k: 4 * k + 4])


def test_data_commands_read_a_prepared_directory(tmp_path, capsys):
    path = tmp_path / "t.txt"
    path.write_text("The cat sat.\nThe dog sat!\n" * 30 + "A rare word\n")
    out = tmp_path / "p"
    assert main(["data", "prepare", "--data", str(path), "--min-count", "2", "--out", str(out),
                 "--quiet"]) == 0
    assert "uint16 ids" in capsys.readouterr().out
    stats = {}
    for data in (str(path), str(out)):
        assert main(["data", "stats", "--data", data, "--min-count", "2", "--json"]) == 0
        stats[data] = json.loads(capsys.readouterr().out)
    assert stats[str(path)]["splits"] == stats[str(out)]["splits"]
    assert stats[str(path)]["tokenizer"] == stats[str(out)]["tokenizer"]
    for data in (str(path), str(out)):
        target = tmp_path / "tok.txt"
        assert main(["data", "tokenize", "--data", data, "--min-count", "2", "--split", "test",
                     "--out", str(target)]) == 0
        stats[data] = target.read_text()
    assert stats[str(path)] == stats[str(out)]


def test_ngram_reads_the_ids_of_a_prepared_directory(tmp_path):
    from keras_seq.ngram.counts import Vocabulary
    from keras_seq.ngram.data import load_tokenized
    from keras_seq.ngram.external import id_chunks_from_lines

    path = tmp_path / "t.txt"
    path.write_text("the cat sat\nthe dog sat down\n\nA cat ran\n" * 30)
    folder = prepare_corpus(path, tmp_path / "p", min_count=2).path
    text, ids = load_tokenized(str(path), min_count=2), load_tokenized(str(folder), min_count=2)
    assert text.train == ids.train and text.lines("val") == ids.lines("val")
    assert text.fingerprint("test") == ids.fingerprint("test")
    vocab = Vocabulary.from_lines(text.train)
    assert ids.vocabulary().words == vocab.words
    np.testing.assert_array_equal(np.concatenate(list(ids.id_chunks(vocab))),
                                  np.concatenate(list(id_chunks_from_lines(text.train, vocab))))
    with pytest.raises(DataError, match="min-count 2, but --min-count 1"):
        load_tokenized(str(folder), min_count=1)


def test_bounded_ngram_train_of_a_prepared_directory_never_makes_lines(tmp_path, hostile,
                                                                        monkeypatch):
    from keras_seq.ngram.data import PreparedTokenized, load_tokenized

    folder = prepare_corpus(hostile, tmp_path / "p", min_count=2).path
    lines = load_tokenized(str(hostile), min_count=2).train  # empty lines, no final newline
    assert load_tokenized(str(folder), min_count=2).n_predicted() == sum(
        len(line) + 1 for line in lines if line)
    arpa = {}
    for data in (hostile, folder):
        arpa[data] = tmp_path / f"{data.name}.arpa"
        assert main(["ngram", "train", "--data", str(data), "--min-count", "2", "--order", "3",
                     "--memory", "64K", "--out", str(arpa[data])]) == 0
        monkeypatch.setattr(PreparedTokenized, "train", property(lambda self: 1 / 0))
    assert arpa[hostile].read_bytes() == arpa[folder].read_bytes()


def test_lm_data_of_a_prepared_directory(tmp_path):
    from keras_seq.tasks.lm.config import LMConfig
    from keras_seq.tasks.lm.data import corpus_for, has_text, lm_tokenizer, split_ids

    path = tmp_path / "t.txt"
    path.write_text("the cat sat on the mat\nthe dog sat\n" * 40)
    folder = prepare_corpus(path, tmp_path / "p", tokenizer="char").path
    text_config = LMConfig(data=str(path), tokenizer="char")
    prep_config = LMConfig(data=str(folder), tokenizer="char")
    text, prepared = corpus_for(text_config), corpus_for(prep_config)
    tok = lm_tokenizer(text_config, text)
    assert lm_tokenizer(prep_config, prepared).fingerprint == tok.fingerprint
    for split in ("train", "val", "test"):
        assert has_text(prepared, split) == has_text(text, split)
        np.testing.assert_array_equal(split_ids(prepared, tok, split), split_ids(text, tok, split))
    assert isinstance(split_ids(prepared, tok, "train"), np.memmap)
    with pytest.raises(DataError, match="holds char tokens, but --tokenizer word"):
        corpus_for(LMConfig(data=str(folder)))
