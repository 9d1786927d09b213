"""The ARPA line writers (keras_seq/ngram/arpa_lines.py: numpy, and the compiled one in
keras_seq/ngram/_ngram_c.c) give the bytes of Python's own ``"%.7g"`` formatting, for random
values and for the values where rounding to 7 digits is hardest (ties, carries into a new
power of ten, the %f/%e switch)."""

import io

import numpy as np
import pytest

import keras_seq.ngram.arpa_lines as arpa_lines
from keras_seq.ngram.arpa_lines import WordBytes, format_g7, write_arpa_lines

needs_c = pytest.mark.skipif(arpa_lines._ngram_c is None,
                             reason="the C kernel was not built (no compiler at install)")
KERNELS = ["numpy", pytest.param("c", marks=needs_c)]


def _hard_values():
    rng = np.random.default_rng(0)
    edges = [0.0, -0.0, 1.0, -1.0, 99.0, -99.0, 1e-4, 9.9999995e-5, 9.99999949e-5, 1e-5,
             0.99999995, 0.999999949, 9999999.5, 9999998.5, 999999.95, 1234567.5, 2.5e-7,
             1e15, 1e-15, 9.999999e14, 5e-324, 1.7976931348623157e308, 0.30103, 0.125,
             np.inf, -np.inf, np.nan]
    values = np.concatenate([
        np.array(edges),
        rng.standard_normal(20_000) * 10.0 ** rng.integers(-20, 20, 20_000),
        -rng.random(20_000) * 6,  # log10 probabilities
        np.round(rng.random(20_000), 7) + 5e-8,  # exactly at the rounding digit's half
        np.round(rng.random(10_000) * 1e4, 3) + 5e-4,
    ])
    with np.errstate(over="ignore"):
        return np.concatenate([values, np.nextafter(values, np.inf),
                               np.nextafter(values, -np.inf)])


def test_format_g7_equals_printf_on_random_and_hard_values():
    values = _hard_values()
    expected = ["%.7g" % v for v in values.tolist()]  # noqa: UP031 (the old writer's printf)
    got = format_g7(values)
    wrong = [(v, g, e) for v, g, e in zip(values.tolist(), got, expected) if g != e]
    assert not wrong, wrong[:10]


def _reference(words, cols, lp, bo):
    def g(x):
        return "%.7g" % max(x if np.isfinite(x) else -99.0, -99.0)  # noqa: UP031

    lines = []
    for i, row in enumerate(cols.tolist()):
        line = g(lp[i]) + "\t" + " ".join(words[w] for w in row)
        lines.append(line + ("\t" + g(bo[i]) if bo is not None else "") + "\n")
    return "".join(lines)


@needs_c
def test_the_c_formatter_equals_printf_on_random_and_hard_values():
    values = _hard_values()
    with np.errstate(invalid="ignore"):
        values = values[np.isfinite(values)]  # the writer gets clipped, finite values
    expected = ["%.7g" % v for v in values.tolist()]  # noqa: UP031
    got = [arpa_lines._ngram_c.g7(v) for v in values.tolist()]
    wrong = [(v, g, e) for v, g, e in zip(values.tolist(), got, expected) if g != e]
    assert not wrong, wrong[:10]


@needs_c
@pytest.mark.parametrize("with_backoff", [True, False])
def test_the_c_and_numpy_writers_give_the_same_bytes(with_backoff):
    rng = np.random.default_rng(7)
    words = WordBytes(["<unk>", "<s>", "</s>"] + [f"w{i}ü" for i in range(3000)])
    rows = 50_000
    cols = rng.integers(0, 3003, (rows, 4))
    lp = -rng.random(rows) * 7
    lp[:5] = [-np.inf, 0.0, -0.0, -150.0, np.nan]
    bo = np.where(rng.random(rows) < 0.3, 0.0, 0.5 - rng.random(rows)) if with_backoff else None
    c = arpa_lines.arpa_lines(words, cols, lp, bo, kernel="c")
    assert c == arpa_lines.arpa_lines(words, cols, lp, bo, kernel="numpy")
    assert c.count(b"\n") == rows


def test_an_unknown_kernel_says_which_exist(monkeypatch):
    with pytest.raises(ValueError, match="kernel 'fortran' is not available; expected one of"):
        arpa_lines.arpa_lines(WordBytes(["a"]), np.zeros((1, 1), np.int64), [0.0],
                              kernel="fortran")
    monkeypatch.setattr(arpa_lines, "_ngram_c", None)
    with pytest.raises(ValueError, match=r"expected one of \['numpy'\]"):
        arpa_lines.arpa_lines(WordBytes(["a"]), np.zeros((1, 1), np.int64), [0.0], kernel="c")


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n,with_backoff", [(1, True), (3, True), (5, False)])
def test_lines_equal_formatting_each_row(n, with_backoff, kernel, monkeypatch):
    monkeypatch.setattr(arpa_lines, "KERNEL", kernel)
    rng = np.random.default_rng(n)
    words = ["<unk>", "<s>", "</s>", "a", "ü", "日本語", "x" * 40, "'s"]
    rows = 2_000
    cols = rng.integers(0, len(words), (rows, n))
    lp = -rng.random(rows) * 4
    lp[:5] = [-np.inf, 0.0, -0.0, -150.0, np.nan]
    bo = (0.5 - rng.random(rows)) if with_backoff else None
    buf = io.StringIO()
    write_arpa_lines(buf, WordBytes(words), cols, lp, bo)
    assert buf.getvalue() == _reference(words, cols, lp, bo)


def test_no_rows_writes_nothing():
    buf = io.StringIO()
    write_arpa_lines(buf, WordBytes(["a"]), np.zeros((0, 2), np.int64), [], [])
    assert buf.getvalue() == ""


def test_a_utf8_file_gets_the_same_bytes_through_its_buffer(tmp_path):
    words, cols = WordBytes(["a", "ü", "日本語"]), np.array([[0, 1], [2, 0]])
    text = io.StringIO()
    write_arpa_lines(text, words, cols, [-1.0, -2.0], [0.5, -0.25])
    path = tmp_path / "lines.txt"
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("head\n")  # text written before and after must stay in order
        write_arpa_lines(f, words, cols, [-1.0, -2.0], [0.5, -0.25])
        f.write("tail\n")
    assert path.read_bytes().decode("utf-8") == "head\n" + text.getvalue() + "tail\n"
