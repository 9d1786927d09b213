"""Tagging data: CoNLL and CoNLL-U readers, task specs and splits, restore-punct tags."""

import subprocess
import sys

import pytest

from keras_seq.data.corpus import load_corpus
from keras_seq.errors import DataError
from keras_seq.tasks.tag.config import TagConfig
from keras_seq.tasks.tag.data import (
    TaggingData,
    case_class,
    detect_scheme,
    make_tagging_task,
    punct_tags,
    read_conll,
    read_conllu,
    restore_punct,
    restore_text,
)

CONLL = (
    "-DOCSTART- -X- -X- O\n"
    "\n"
    "EU NNP B-NP B-ORG\n"
    "rejects VBZ B-VP O\n"
    "German\tJJ\tB-NP\tB-MISC\n"
    "call NN I-NP O\n"
    "\n"
    "\n"
    "Peter NNP B-NP B-PER\n"
    "Blackburn NNP I-NP I-PER\n"
)

CONLLU = (
    "# newdoc id = d1\n"
    "# sent_id = 1\n"
    "# text = I don't go.\n"
    "1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_\n"
    "2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_\n"
    "3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_\n"
    "4\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
    "4.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t4:conj\t_\n"
    "5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_\n"
    "\n"
    "# sent_id = 2\n"
    "1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\tSpaceAfter=No\n"
    "\n"
)


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _conll_file(tmp_path, n, name="many.conll"):
    lines = []
    for i in range(n):
        lines += [f"w{i}a B-X", f"w{i}b I-X", f"w{i}c O", ""]
    return _write(tmp_path, name, "\n".join(lines))


def test_read_conll_sentences_columns_and_docstart(tmp_path):
    path = _write(tmp_path, "ner.txt", CONLL)
    assert read_conll(path) == [
        (["EU", "rejects", "German", "call"], ["B-ORG", "O", "B-MISC", "O"]),
        (["Peter", "Blackburn"], ["B-PER", "I-PER"]),
    ]
    pos = read_conll(path, token_col=0, tag_col=1)
    assert pos[0][1] == ["NNP", "VBZ", "JJ", "NN"]
    assert read_conll(path, tag_col=-2)[1][1] == ["B-NP", "I-NP"]


def test_read_conll_bad_line_names_file_and_line(tmp_path):
    path = _write(tmp_path, "bad.txt", "a B-X\nb O\n\nlonely\nc O\n")
    with pytest.raises(DataError) as err:
        read_conll(path)
    message = str(err.value)
    assert f"{path}:4" in message and "expected at least 2" in message and "lonely" in message
    # Asking for a column beyond the line is the same error, with its own count.
    with pytest.raises(DataError, match=r":1: 2 column\(s\), expected at least 4"):
        read_conll(_write(tmp_path, "two.txt", "a B-X\n"), tag_col=3)
    with pytest.raises(DataError, match="holds no sentences"):
        read_conll(_write(tmp_path, "empty.txt", "-DOCSTART- O\n\n\n"))
    with pytest.raises(DataError, match="no such CoNLL file"):
        read_conll(tmp_path / "missing.txt")


def test_read_conllu_skips_multiword_ranges_and_empty_nodes(tmp_path):
    path = _write(tmp_path, "ud.conllu", CONLLU)
    assert read_conllu(path) == [
        (["I", "do", "n't", "go", "."], ["PRON", "AUX", "PART", "VERB", "PUNCT"]),
        (["Hi"], ["INTJ"]),
    ]
    assert read_conllu(path, tag_field="xpos")[0][1] == ["PRP", "VBP", "RB", "VB", "."]
    with pytest.raises(DataError, match="tag_field='feats'"):
        read_conllu(path, tag_field="feats")


@pytest.mark.parametrize(
    "bad_line,pattern",
    [
        ("2\tdo\tdo", r"3 field\(s\), expected 10 tab-separated"),
        ("x\tdo\tdo\tAUX\t_\t_\t0\troot\t_\t_", r"not a valid CoNLL-U token line.*'id'"),
        ("2\tdo\tdo\tAUX\t_\t_\tzz\troot\t_\t_", r"not a valid CoNLL-U token line.*'head'"),
        ("2\tdo\tdo\t_\t_\t_\t0\troot\t_\t_", r"has no upos"),
    ],
)
def test_read_conllu_errors_name_file_and_line(tmp_path, bad_line, pattern):
    text = "# sent_id = 1\n1\tI\tI\tPRON\t_\t_\t0\troot\t_\t_\n" + bad_line + "\n\n"
    path = _write(tmp_path, "bad.conllu", text)
    with pytest.raises(DataError, match=pattern) as err:
        read_conllu(path)
    assert f"{path}:3:" in str(err.value)


def test_conll_task_split_is_seeded_deterministic_and_complete(tmp_path):
    path = _conll_file(tmp_path, 50)
    a = make_tagging_task(f"conll:{path}", seed=3)
    b = make_tagging_task(f"conll:{path}", seed=3)
    c = make_tagging_task(f"conll:{path}", seed=4)
    assert a.splits == b.splits and a.sha256 == b.sha256
    assert a.splits != c.splits and a.sha256 != c.sha256
    assert [len(a.splits[s]) for s in ("train", "val", "test")] == [44, 3, 3]  # 90/5/5
    everything = sorted(w[0] for s in a.splits.values() for w, _ in s)
    assert everything == sorted(ws[0] for ws, _ in read_conll(path))
    assert len(set(everything)) == 50  # disjoint splits
    assert a.scheme == "bio" and a.default_tag == "O" and a.tags == ["B-X", "I-X", "O"]
    assert a.describe()["spec"]["sources"][str(path)]  # the file's sha256 is recorded
    capped = make_tagging_task(f"conll:{path}", seed=3, max_sentences=10, split_ratio="60/20/20")
    assert [len(capped.splits[s]) for s in ("train", "val", "test")] == [6, 2, 2]
    assert all(int(w[0][1:-1]) < 10 for s in capped.splits.values() for w, _ in s)


def test_conll_task_with_three_files_and_unseen_tags(tmp_path):
    train = _write(tmp_path, "train.txt", "a NOUN\nb VERB\n\nc NOUN\n")
    val = _write(tmp_path, "val.txt", "d ADJ\ne NOUN\n")
    test = _write(tmp_path, "test.txt", "f NOUN\n")
    data = make_tagging_task(f"conll:{train},{val},{test}")
    assert [len(data.splits[s]) for s in ("train", "val", "test")] == [2, 1, 1]
    assert data.scheme == "plain" and data.default_tag is None
    assert data.tags == ["NOUN", "VERB"]
    assert data.unseen_tags == {"val": {"ADJ": 1}}
    assert any("ADJ (1)" in note for note in data.notes)
    assert data.describe()["sizes"]["train"] == {"sentences": 2, "tokens": 3}


def test_conllu_task_and_bad_specs(tmp_path):
    path = _write(tmp_path, "ud.conllu", CONLLU * 3)
    data = make_tagging_task(f"conllu:{path}", split_ratio="34/33/33")
    assert sum(len(s) for s in data.splits.values()) == 6
    assert data.scheme == "plain"
    with pytest.raises(DataError, match="unknown tagging task 'pos'"):
        make_tagging_task("pos")
    with pytest.raises(DataError, match="invalid split"):
        make_tagging_task(f"conllu:{path}", split_ratio="a/b")
    one = make_tagging_task(f"conll:{_write(tmp_path, 'one.txt', 'a O')}")
    assert len(one.splits["train"]) == 1 and "the val split is empty" in one.notes
    three = _write(tmp_path, "three.txt", "a O\n\nb O\n\nc O\n")
    squeezed = make_tagging_task(f"conll:{three}", split_ratio="2/96/2")
    assert [len(squeezed.splits[s]) for s in ("train", "val", "test")] == [1, 2, 0]
    assert "the test split is empty" in squeezed.notes  # train keeps one sentence
    with pytest.raises(DataError, match="same positive number"):
        TaggingData("x", {"train": [(["a", "b"], ["O"])]})


def test_restore_punct_tags_on_a_hand_made_sentence():
    words, tags = punct_tags('Hello, World! Is NASA\'s "iPhone" ready?  Yes: it is; e.g. 3D.')
    assert words == ["hello", "world", "is", "nasa's", "iphone", "ready", "yes", "it", "is",
                     "e", "g", "3d"]
    # NASA's: an upper-case word with a lower-case "s" is "mixed" by the documented rule.
    assert tags == ["Cap|,", "Cap|!", "Cap|", "mixed|", "mixed|", "lower|?", "Cap|:",
                    "lower|", "lower|;", "lower|.", "lower|.", "Cap|."]
    assert restore_text(words[:3], tags[:3]) == "Hello, World! Is"
    assert [case_class(w) for w in ("A", "ab", "AB", "aB", "Ab", "_x", "Élan")] == \
        ["Cap", "lower", "UPPER", "mixed", "Cap", "lower", "Cap"]
    # Other symbols vanish; a word keeps only the first mark after it.
    assert punct_tags("x -- (y)... z?!") == (["x", "y", "z"], ["lower|", "lower|.", "lower|?"])


def test_restore_punct_chunks_long_lines_and_skips_empty_ones():
    text = " ".join(f"w{i}" for i in range(10)) + ".\n\n  --  \nShort one.\n"
    sentences = restore_punct(text, max_len=4)
    assert [len(w) for w, _ in sentences] == [3, 3, 4, 2]
    assert sentences[2] == (["w6", "w7", "w8", "w9"], ["lower|"] * 3 + ["lower|."])
    assert sentences[3] == (["short", "one"], ["Cap|", "lower|."])
    with pytest.raises(DataError, match="max_len=0"):
        restore_punct(text, max_len=0)


def test_restore_punct_task_uses_contiguous_corpus_splits():
    ratio = TagConfig().split_ratio  # train tag's 80/10/10
    data = make_tagging_task("restore-punct", max_len=30, split_ratio=ratio)
    corpus = load_corpus("python-docs", split="80/10/10")
    for split in ("train", "val", "test"):
        assert data.splits[split] == restore_punct(corpus.text(split), max_len=30)
    assert data.default_tag == "lower|" and data.scheme == "plain"
    assert "lower|" in data.tags and "Cap|" in data.tags and "lower|." in data.tags
    words = [w for s in data.splits.values() for ws, _ in s for w in ws]
    assert all(w == w.lower() and not set(w) & set(".,?!:;") for w in words)
    assert max(len(ws) for s in data.splits.values() for ws, _ in s) <= 30
    assert data.spec["corpus_sha256"] == corpus.sha256
    small = make_tagging_task("restore-punct:python-docs", max_sentences=20, split_ratio=ratio)
    assert [len(small.splits[s]) for s in ("train", "val", "test")] == [16, 2, 2]
    assert small.splits["val"] == restore_punct(corpus.text("val"), max_len=40)[:2]


def test_scheme_detection():
    assert detect_scheme(["O", "B-PER", "I-PER"]) == "bio"
    assert detect_scheme(["O", "I-LOC"]) == "bio"  # IOB1
    assert detect_scheme(["O"]) == "plain"
    assert detect_scheme(["B-X", "S-X", "O"]) == "plain"
    assert detect_scheme(["NOUN", "B-X"]) == "plain"


def test_data_module_does_not_import_tensorflow():
    code = ("import sys, keras_seq.tasks.tag.data, keras_seq.tasks.tag.metrics; "
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
