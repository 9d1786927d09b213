import numpy as np
import pytest

from keras_seq.errors import DataError
from keras_seq.tables import print_table
from keras_seq.tasks.classify.metrics import (
    accuracy_by_group,
    classification_report,
    confusion_table,
    plot_confusion,
)

LABELS = ["cat", "dog", "fox"]
# 10 examples; confusion (rows true, cols predicted), counted by hand:
#         cat dog fox
#   cat  [ 3,  1,  0]
#   dog  [ 1,  2,  1]
#   fox  [ 0,  2,  0]
Y_TRUE = ["cat"] * 4 + ["dog"] * 4 + ["fox"] * 2
Y_PRED = ["cat", "cat", "cat", "dog", "cat", "dog", "dog", "fox", "dog", "dog"]


def test_hand_computed_example():
    report = classification_report(Y_TRUE, Y_PRED, LABELS)
    assert report["confusion"] == [[3, 1, 0], [1, 2, 1], [0, 2, 0]]
    assert report["accuracy"] == pytest.approx(5 / 10)
    # cat: P = 3/4, R = 3/4, F1 = 3/4
    # dog: P = 2/5, R = 2/4, F1 = 2·(0.4·0.5)/(0.9) = 4/9
    # fox: predicted once, never right: P = 0, R = 0, F1 = 0
    per = report["per_class"]
    assert per["cat"] == pytest.approx({"precision": 0.75, "recall": 0.75, "f1": 0.75,
                                        "support": 4})
    assert per["dog"] == pytest.approx({"precision": 0.4, "recall": 0.5, "f1": 4 / 9,
                                        "support": 4})
    assert per["fox"] == pytest.approx({"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                        "support": 2})
    assert report["macro_f1"] == pytest.approx((0.75 + 4 / 9 + 0) / 3)  # 0.39815
    assert report["macro_f1"] == pytest.approx(0.398148, abs=1e-6)
    assert report["support"] == 10 and report["labels"] == LABELS


def test_class_ids_equal_names_and_zero_division_is_zero():
    ids = {name: i for i, name in enumerate(LABELS)}
    by_id = classification_report(np.array([ids[y] for y in Y_TRUE]),
                                   np.array([ids[y] for y in Y_PRED]), LABELS)
    assert by_id == classification_report(Y_TRUE, Y_PRED, LABELS)
    # "fox" never occurs and is never predicted: all zeros, not NaN.
    report = classification_report(["cat", "dog"], ["cat", "dog"], LABELS)
    assert report["per_class"]["fox"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0,
                                          "support": 0}
    assert report["macro_f1"] == pytest.approx(2 / 3)
    assert report["accuracy"] == 1.0


def test_macro_f1_is_not_micro_or_weighted():
    # Majority-class predictor on 9:1 data: accuracy 0.9, but macro-F1 = (18/19 + 0) / 2.
    report = classification_report(["a"] * 9 + ["b"], ["a"] * 10, ["a", "b"])
    assert report["accuracy"] == pytest.approx(0.9)
    assert report["macro_f1"] == pytest.approx((2 * 0.9 / 1.9) / 2)


def test_bad_inputs():
    with pytest.raises(DataError, match="'owl' is not one of the labels"):
        classification_report(["cat"], ["owl"], LABELS)
    with pytest.raises(DataError, match="one prediction per example"):
        classification_report(["cat", "dog"], ["cat"], LABELS)
    with pytest.raises(DataError, match="no examples"):
        classification_report([], [], LABELS)


def test_accuracy_by_group():
    groups = [10, 70, 10, 35, 70, 70]
    result = accuracy_by_group([1, 0, 1, 1, 0, 1], [1, 1, 0, 1, 0, 1], np.array(groups))
    assert list(result) == [10, 35, 70]
    assert result[10] == {"n": 2, "accuracy": 0.5}
    assert result[35] == {"n": 1, "accuracy": 1.0}
    assert result[70] == {"n": 3, "accuracy": pytest.approx(2 / 3)}
    assert all(type(k) is int for k in result)
    with pytest.raises(DataError, match="same number"):
        accuracy_by_group([1], [1, 0], [1])


def test_confusion_table_rows(capsys):
    rows = confusion_table(classification_report(Y_TRUE, Y_PRED, LABELS))
    assert [r["true"] for r in rows] == LABELS
    assert rows[1] == {"true": "dog", "pred cat": 1, "pred dog": 2, "pred fox": 1,
                       "support": 4, "precision": 0.4, "recall": 0.5, "f1": 0.4444}
    print_table(rows)
    assert "pred fox" in capsys.readouterr().out


def test_plot_confusion_writes_a_png(tmp_path):
    report = classification_report(Y_TRUE, Y_PRED, LABELS)
    path = plot_confusion(report, tmp_path / "plots" / "confusion.png", title="test")
    assert path.is_file() and path.stat().st_size > 1000
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
