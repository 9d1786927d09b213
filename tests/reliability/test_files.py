"""Reliability area "files": the quick campaign, and one regression test per bug it found."""

import io
import json
import warnings

import numpy as np
import pytest

from keras_seq import __version__
from keras_seq.data.corpus import load_corpus
from keras_seq.data.tokenizers import (
    CharTokenizer,
    SubwordTokenizer,
    WordTokenizer,
    load_tokenizer,
    make_tokenizer,
)
from keras_seq.errors import DataError, KerasSeqError
from keras_seq.ngram import read_arpa, train_kneser_ney, write_arpa
from keras_seq.tasks.lm.config import LMConfig
from tools.reliability.files import run


@pytest.fixture(scope="module")
def quick_rows(tmp_path_factory):
    return run("quick", tmp_path_factory.mktemp("files"), print)


def test_quick_campaign_has_no_failures(quick_rows):
    assert len(quick_rows) == 13 and all(row.cases > 0 for row in quick_rows)
    broken = [row for row in quick_rows if not row.ok]
    assert not broken, broken


# ----------------------------------------------------------------------------------------
# corpus.py


def test_nul_anywhere_is_refused_with_its_offset(tmp_path):
    path = tmp_path / "late.txt"
    path.write_bytes(b"a\n" * 40_000 + b"\x00b\n")  # past the first 64 KiB
    with pytest.raises(DataError, match=r"late.txt looks binary \(a NUL byte at byte offset 80,"):
        load_corpus(path)


def test_folder_files_are_decoded_one_by_one(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"good text\n" * 5000)
    (tmp_path / "b.txt").write_bytes(b"\xef\xbb\xbfsecond\r\n")
    corpus = load_corpus(tmp_path, split="1/0/0")
    assert corpus.text("train").endswith("good text\nsecond\n")  # its BOM is dropped too
    (tmp_path / "c.txt").write_bytes(b"ok " + "caf\u00e9 na\u00efve\n".encode("latin-1") * 10)
    with pytest.raises(DataError, match=r"c.txt is not UTF-8 .*byte offset 6\)"):
        load_corpus(tmp_path)  # 20 bad bytes among 50 kB: refused, naming the file


def test_replaced_bytes_note_names_the_offset(tmp_path):
    path = tmp_path / "t.txt"
    path.write_bytes(b"ok\n" * 100 + "\ud800".encode("utf-8", errors="surrogatepass") + b"\n")
    corpus = load_corpus(path, split="1/0/0")
    assert corpus.replaced_bytes == 3
    assert any("byte offset 300" in note for note in corpus.notes)


def test_unreadable_corpus_file_is_a_data_error(tmp_path, monkeypatch):
    path = tmp_path / "t.txt"
    path.write_text("text\n")

    def denied(self):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(type(path), "read_bytes", denied)
    with pytest.raises(DataError, match="cannot read corpus file .*t.txt: Permission denied"):
        load_corpus(path)


# ----------------------------------------------------------------------------------------
# tokenizers.py


@pytest.mark.parametrize("kind", ["char", "word"])
def test_lone_surrogates_are_a_data_error(kind, tmp_path):
    with pytest.raises(DataError, match="lone surrogate U\\+D800 at character 1"):
        make_tokenizer(kind).fit("a\ud800b")
    tok = make_tokenizer(kind).fit("a b\n")
    with pytest.raises(DataError, match="lone surrogate"):
        tok.encode("b \udcff")
    with pytest.raises(DataError, match="must be a str"):
        tok.encode(b"bytes")
    tok.save(tmp_path)  # the fingerprint hashes cleanly


def test_kind_that_is_not_a_string_is_a_data_error():
    with pytest.raises(DataError, match="unknown tokenizer"):
        make_tokenizer(["char"])


def test_internal_markers_in_the_text_are_whitespace():
    tok = WordTokenizer().fit("a b c\n")
    assert tok.tokens("a\x1eb\x1fc") == ["a", "b", "c"]  # not <eos> / <unk>


def test_to_dict_returns_copies():
    tok = CharTokenizer().fit("abc")
    tok.to_dict()["vocab"].append("z")
    tok.to_dict()["options"]["min_count"] = 9
    assert tok.vocab[-1] == "c" and tok.options["min_count"] == 1


def _saved(tmp_path, **changes):
    data = WordTokenizer().fit("the cat sat\n").to_dict()
    data.update(changes)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("changes,message", [
    ({"kind": []}, "kind \\[\\]"),
    ({"version": 2}, "version 2; this keras-seq reads version 1"),
    ({"options": {"bogus": 1}}, "has options"),
    ({"options": None}, "has options None"),
    ({"vocab": "abc"}, "no usable vocabulary"),
    ({"vocab": ["<pad>", "<unk>", "<eos>", 5]}, "no usable vocabulary"),
    ({"fingerprint": None}, "has no fingerprint"),
    ({"options": {"lower": "yes"}}, "lower must be true or false"),
])
def test_tampered_tokenizer_json_is_refused(tmp_path, changes, message):
    path = _saved(tmp_path, **changes)
    with pytest.raises(DataError, match=message):
        load_tokenizer(path)


def test_tokenizer_json_that_is_not_an_object(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text("[1, 2]")
    with pytest.raises(DataError, match="not a keras-seq tokenizer file"):
        load_tokenizer(path)


@pytest.fixture(scope="module")
def subword():
    pytest.importorskip("tensorflow_text")
    return SubwordTokenizer(vocab_size=40).fit("don't stop it's a cat's hat\n" * 20)


def test_subword_keeps_a_word_whole(subword):
    # WordPiece used to cut words again at punctuation: "don't" came back as "don ' t".
    assert subword.decode(subword.encode("don't stop\n")) == "don't stop\n"
    assert subword.tokens("it's")[0] != "'"


def test_subword_vocab_size_holds_with_many_characters():
    pytest.importorskip("tensorflow_text")
    rare = "".join(chr(0x4E00 + i) for i in range(300))  # 300 distinct characters
    tok = SubwordTokenizer(vocab_size=64).fit("the cat sat\n" * 10 + " ".join(rare) + "\n")
    assert tok.vocab_size <= 64
    assert tok.decode(tok.encode("the cat\n")) == "the cat\n"


# ----------------------------------------------------------------------------------------
# arpa.py


def _arpa(order=3, lines=None):
    lines = lines or [["a", "b", "c"], ["b", "c", "a"], ["c", "a"]] * 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = train_kneser_ney(lines, order, discount_fallback=True,
                                 metadata={"tokenizer_fingerprint": "t:1"})
    buf = io.StringIO()
    write_arpa(model, buf)
    return model, buf.getvalue()


def _line_of(text, needle):
    return text.split("\n").index(next(ln for ln in text.split("\n") if needle in ln)) + 1


@pytest.mark.parametrize("old,new,message", [
    ("ngram 3=", "ngram 99999=1\nngram 3=", "order 99999 is outside"),
    ("ngram 2=", "ngram 1=1\nngram 2=", "ngram 1 appears twice"),
    ("\\2-grams:", "\\3-grams:", "out of order"),
    ("\\3-grams:", "\\2-grams:", "out of order or repeated"),
])
def test_arpa_header_and_section_errors_name_the_line(old, new, message):
    _, text = _arpa()
    broken = text.replace(old, new, 1)
    line = _line_of(text, old)
    with pytest.raises(DataError, match=f"<stream>, line {line}: .*{message}"):
        read_arpa(io.StringIO(broken))


@pytest.mark.parametrize("junk", ["nan", "inf", "0.5", "abc"])
def test_arpa_bad_probabilities_name_the_line(junk):
    _, text = _arpa()
    lines = text.split("\n")
    at = next(i for i, ln in enumerate(lines) if "\tb c" in ln)
    lines[at] = junk + "\t" + lines[at].split("\t", 1)[1]
    with pytest.raises(DataError, match=f"line {at + 1}: "):
        read_arpa(io.StringIO("\n".join(lines)))


def test_arpa_binary_garbage_is_a_data_error(tmp_path):
    _, text = _arpa()
    raw = text.encode()
    at = raw.index(b"\\2-grams:")
    path = tmp_path / "bad.arpa"
    path.write_bytes(raw[:at] + b"\xff\xfe\x00" + raw[at:])
    line = raw[:at].count(b"\n") + 1
    with pytest.raises(DataError, match=f"bad.arpa, line {line}: byte 1 "):
        read_arpa(path)


def test_arpa_damaged_metadata_is_refused():
    _, text = _arpa()
    with pytest.raises(DataError, match="line 1: the keras-seq metadata is not JSON"):
        read_arpa(io.StringIO(text.replace('"t:1"}', '"t:1"', 1)))
    with pytest.raises(DataError, match="line 1: .*not a JSON object"):
        read_arpa(io.StringIO("# keras-seq [1]\n" + text.split("\n", 1)[1]))


def test_arpa_round_trip_keeps_words_with_unicode_spaces():
    model, text = _arpa(2, [["a\x85b", "\u00a0", "c\u2028"], ["\u00a0", "a\x85b"]] * 2)
    back = read_arpa(io.StringIO(text))
    assert back.vocab.words == model.vocab.words and back.counts == model.counts
    with pytest.raises(DataError, match="no whitespace"):
        _arpa(2, [["a b", "c"]])


def test_arpa_empty_file_says_so():
    with pytest.raises(DataError, match="no \\\\data\\\\ line"):
        read_arpa(io.StringIO(""))


# ----------------------------------------------------------------------------------------
# config.py


def _config_file(tmp_path, **changes):
    data = {"kind": "lm", **LMConfig(epochs=3).to_dict(), **changes}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data, allow_nan=True))
    return path


@pytest.mark.parametrize("changes,message", [
    ({"lr": "fast"}, "lr must be a finite number \\(got 'fast'\\)"),  # was a TypeError
    ({"dropout": None}, "dropout must be a finite number"),
    ({"epochs": 10**30}, "epochs must be an integer"),
    ({"clip_norm": float("nan")}, "clip_norm must be a finite number or null"),
    ({"seed": -1}, "seed must be from 0 to 4294967295"),
    ({"version": "0.0.1"}, "written by keras-seq '0.0.1'"),
    ({"epochs": 0}, "epochs must be ≥ 1"),
])
def test_tampered_config_json_is_refused(tmp_path, changes, message):
    path = _config_file(tmp_path, **changes)
    with pytest.raises(KerasSeqError, match=f"config.json.*{message}"):
        LMConfig.load(path)


def test_config_json_missing_field_not_json_or_not_an_object(tmp_path):
    path = _config_file(tmp_path)
    data = json.loads(path.read_text())
    del data["units"]
    path.write_text(json.dumps(data))
    with pytest.raises(KerasSeqError, match="missing field\\(s\\) units"):
        LMConfig.load(path)
    for text, message in (('{"kind": "lm"', "not valid JSON"), ("[1]", "JSON object"),
                          ("[" * 100_000, "not valid JSON")):
        path.write_text(text)
        with pytest.raises(KerasSeqError, match=message):
            LMConfig.load(path)
    with pytest.raises(KerasSeqError, match="cannot read"):
        LMConfig.load(tmp_path / "absent.json")


def test_saved_config_loads_back(tmp_path):
    config = LMConfig(epochs=3, max_minutes=1.5, lower=False)
    config.save(tmp_path / "config.json")
    back = LMConfig.load(tmp_path / "config.json")
    assert back.to_dict() == config.to_dict() and back.version == __version__
    assert np.isclose(back.max_minutes, 1.5)
