import hashlib

import pytest

from keras_seq.data import corpus as corpus_mod
from keras_seq.data.corpus import load_corpus
from keras_seq.data.splits import parse_split, split_text
from keras_seq.errors import DataError

SHAKESPEARE_SHA = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"


def test_registry_corpus_from_data_dir(shakespeare_available):
    corpus = load_corpus("tinyshakespeare")
    assert corpus.sha256 == SHAKESPEARE_SHA
    total = sum(len(t) for t in corpus.splits.values())
    assert total == 1_115_394  # ASCII: one char per byte, nothing lost
    assert 0.89 < len(corpus.text("train")) / total < 0.91


def test_nanogpt_split_has_no_test_part(shakespeare_available):
    corpus = load_corpus("tinyshakespeare", split="90/10")
    assert corpus.text("test") == ""
    assert corpus.text("train") + corpus.text("val") == shakespeare_available.read_text()


def test_split_is_contiguous_and_lossless():
    text = "".join(f"line {i}\n" for i in range(1000))
    parts = split_text(text, "90/5/5")
    assert parts["train"] + parts["val"] + parts["test"] == text
    assert all(p.endswith("\n") for p in parts.values())  # cuts fall on line breaks
    assert split_text(text, "90/5/5") == parts  # deterministic


@pytest.mark.parametrize("spec", ["", "90", "a/b", "-1/50/51", "0/10/0", "1/2/3/4"])
def test_bad_split_spec(spec):
    with pytest.raises(DataError, match="split"):
        parse_split(spec)


def test_split_fractions():
    assert parse_split("90/10") == (0.9, 0.1, 0.0)
    assert parse_split("0.8,0.1,0.1") == pytest.approx((0.8, 0.1, 0.1))


def test_embedded_corpus_is_prose():
    corpus = load_corpus("python-docs")
    train = corpus.text("train")
    assert len(train) > 100_000
    assert "assert" in train.lower()
    assert not any(line.startswith(" ") for line in train.splitlines())
    assert corpus.sha256 == hashlib.sha256(corpus_mod.python_docs_text().encode()).hexdigest()


def test_file_and_directory(tmp_path):
    (tmp_path / "a.txt").write_text("alpha beta\n" * 50)
    (tmp_path / "b.txt").write_text("gamma delta")  # no final newline: one is added
    (tmp_path / "skip.md").write_text("not read")
    corpus = load_corpus(tmp_path)
    joined = "".join(corpus.splits.values())
    assert joined.endswith("gamma delta\n") and "not read" not in joined
    single = load_corpus(tmp_path / "a.txt", split="50/50")
    assert single.text("train").count("\n") == 25


def test_missing_path_names_alternatives():
    with pytest.raises(DataError, match="neither an existing file.*tinyshakespeare"):
        load_corpus("/no/such/file.txt")


def test_empty_corpus(tmp_path):
    (tmp_path / "empty.txt").write_text("\n\n  \n")
    with pytest.raises(DataError, match="empty training split"):
        load_corpus(tmp_path / "empty.txt")
    (tmp_path / "dir").mkdir()
    with pytest.raises(DataError, match="no .txt files"):
        load_corpus(tmp_path / "dir")


def test_binary_is_refused(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(DataError, match="binary"):
        load_corpus(tmp_path / "x.bin")


def test_mostly_invalid_utf8_is_refused(tmp_path):
    (tmp_path / "latin1.txt").write_bytes("café naïve\n".encode("latin-1") * 10)
    with pytest.raises(DataError, match="not UTF-8.*iconv"):
        load_corpus(tmp_path / "latin1.txt")


def test_few_invalid_bytes_are_replaced_and_counted(tmp_path):
    raw = ("good text here\n" * 200).encode() + b"bad \xff\xfe byte\n"
    (tmp_path / "t.txt").write_bytes(raw)
    corpus = load_corpus(tmp_path / "t.txt", split="1/0/0")
    assert corpus.replaced_bytes == 2
    assert "\ufffd" in corpus.text("train")
    assert any("replaced 2 invalid" in n for n in corpus.notes)


def test_crlf_and_bom_are_normalised(tmp_path):
    (tmp_path / "win.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r")
    corpus = load_corpus(tmp_path / "win.txt", split="1/0/0")
    assert corpus.text("train") == "one\ntwo\nthree\n"
    assert any("CRLF" in n for n in corpus.notes) and any("byte-order" in n for n in corpus.notes)


def test_single_huge_line_is_refused(tmp_path):
    (tmp_path / "long.txt").write_bytes(b"word " * 2_000_000)  # 10 MB, no line break
    with pytest.raises(DataError, match="line of 10,000,000 characters.*fold"):
        load_corpus(tmp_path / "long.txt")


def test_offline_without_cache_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_SEQ_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    import keras

    def offline(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(keras.utils, "get_file", offline)
    with pytest.raises(DataError, match=r"Place the file as ptb\.train\.txt in one of"):
        load_corpus("ptb")


def test_cached_file_with_wrong_checksum(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_SEQ_DATA_DIR", str(tmp_path))
    (tmp_path / "ptb.train.txt").write_text("not the penn treebank\n")
    with pytest.raises(DataError, match="pinned md5"):
        load_corpus("ptb")


def test_tinyshakespeare_is_bundled_and_loads_offline(tmp_path, monkeypatch):
    # No data folder, no Keras cache, no network: the xz copy in the package is used.
    monkeypatch.setenv("KERAS_SEQ_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    import keras

    def offline(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(keras.utils, "get_file", offline)
    corpus = load_corpus("tinyshakespeare")
    assert corpus.sha256 == SHAKESPEARE_SHA
    bundled = corpus_mod.BUNDLED_DIR / "tinyshakespeare.txt.xz"
    assert bundled.stat().st_size <= 1_000_000  # ≤ 1 MB on disk


def test_damaged_bundled_copy_is_refused(tmp_path, monkeypatch):
    import lzma

    monkeypatch.setattr(corpus_mod, "BUNDLED_DIR", tmp_path)
    (tmp_path / "tinyshakespeare.txt.xz").write_bytes(b"not xz at all")
    with pytest.raises(DataError, match="is damaged"):
        load_corpus("tinyshakespeare")
    (tmp_path / "tinyshakespeare.txt.xz").write_bytes(lzma.compress(b"other text\n"))
    with pytest.raises(DataError, match="pinned sha256"):
        load_corpus("tinyshakespeare")


def test_ptb_uses_its_own_files(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_SEQ_DATA_DIR", str(tmp_path))
    for split, theirs in (("train", "train"), ("val", "valid"), ("test", "test")):
        (tmp_path / f"ptb.{theirs}.txt").write_text(f" {split} words here \n")
    pinned = {
        name: hashlib.md5((tmp_path / f.fname).read_bytes()).hexdigest()
        for name, f in corpus_mod.REGISTRY["ptb"].files.items()
    }
    files = {
        name: corpus_mod.RemoteFile(f.fname, f.origin, pinned[name])
        for name, f in corpus_mod.REGISTRY["ptb"].files.items()
    }
    monkeypatch.setitem(
        corpus_mod.REGISTRY, "ptb", corpus_mod.RegistryEntry("ptb", "test", files)
    )
    corpus = load_corpus("ptb", split="50/50")  # the split ratio is ignored: own files
    assert corpus.split_spec == "files"
    assert corpus.text("val") == " val words here \n"
