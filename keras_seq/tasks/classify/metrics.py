"""Classification metrics (NumPy): accuracy, per-class and macro F1, confusion matrix.

Precision, recall and F1 that divide by zero (a class never predicted, or absent) are 0.
Macro-F1 is the unweighted mean of the per-class F1 over ``labels``. The confusion matrix
has one row per *true* label and one column per *predicted* label, in the order of
``labels``. :func:`plot_confusion` draws it with matplotlib (imported only there).

Example:

>>> report = classification_report(["pos", "pos", "neg", "neg"], ["pos", "neg", "neg", "neg"],
...                                labels=["neg", "pos"])
>>> report["accuracy"], round(report["macro_f1"], 4), report["confusion"]
(0.75, 0.7333, [[2, 0], [1, 1]])
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from keras_seq.errors import DataError
from keras_seq.extras import pyplot


def _indices(values, labels: list, name: str) -> np.ndarray:
    """Label names or integer class ids → int array of positions in ``labels``."""
    values = list(np.asarray(values).ravel()) if not isinstance(values, list) else values
    index = {label: i for i, label in enumerate(labels)}
    out = np.empty(len(values), np.int64)
    for i, v in enumerate(values):
        key = v.item() if isinstance(v, np.generic) else v
        if key in index:
            out[i] = index[key]
        elif isinstance(key, (int, np.integer)) and not isinstance(key, bool) \
                and 0 <= key < len(labels) and not all(isinstance(x, int) for x in labels):
            out[i] = int(key)  # an integer class id into a list of label names
        else:
            raise DataError(f"{name}[{i}] = {key!r} is not one of the labels {labels!r}; "
                            "expected label names or class ids 0..num_labels-1")
    return out


def classification_report(y_true, y_pred, labels) -> dict:
    """Accuracy, macro-F1, per-class precision/recall/F1/support and the confusion matrix.

    Args:
        y_true, y_pred: sequences of label names, or of integer class ids indexing ``labels``.
        labels: the label vocabulary, in the order used by the report.

    Returns:
        ``{"accuracy", "macro_f1", "macro_precision", "macro_recall", "support" (total
        examples), "labels", "per_class": {label: {"precision", "recall", "f1",
        "support"}}, "confusion": [[count]] (rows true, columns predicted)}``.
    """
    labels = list(labels)
    if not labels:
        raise DataError("received labels=[]; expected the label vocabulary, e.g. ['neg', 'pos']")
    true, pred = _indices(y_true, labels, "y_true"), _indices(y_pred, labels, "y_pred")
    if len(true) != len(pred):
        raise DataError(f"y_true has {len(true)} entries but y_pred has {len(pred)}; expected "
                        "one prediction per example")
    if len(true) == 0:
        raise DataError("received no examples; expected at least one (y_true is empty)")
    k = len(labels)
    confusion = np.zeros((k, k), np.int64)
    np.add.at(confusion, (true, pred), 1)
    tp = np.diag(confusion).astype(float)
    predicted, support = confusion.sum(axis=0), confusion.sum(axis=1)
    precision = np.divide(tp, predicted, out=np.zeros(k), where=predicted > 0)
    recall = np.divide(tp, support, out=np.zeros(k), where=support > 0)
    denom = precision + recall
    f1 = np.divide(2 * precision * recall, denom, out=np.zeros(k), where=denom > 0)
    per_class = {label: {"precision": float(precision[i]), "recall": float(recall[i]),
                         "f1": float(f1[i]), "support": int(support[i])}
                 for i, label in enumerate(labels)}
    return {"accuracy": float(tp.sum() / len(true)), "macro_f1": float(f1.mean()),
            "macro_precision": float(precision.mean()), "macro_recall": float(recall.mean()),
            "support": int(len(true)), "labels": labels, "per_class": per_class,
            "confusion": confusion.tolist()}


def accuracy_by_group(y_true, y_pred, groups) -> dict:
    """``{group: {"n", "accuracy"}}`` for each group key (sorted), e.g. per negation distance.

    Labels may be names or ids; only equality matters.
    """
    y_true, y_pred, groups = list(y_true), list(y_pred), list(groups)
    if not len(y_true) == len(y_pred) == len(groups):
        raise DataError(f"received {len(y_true)} labels, {len(y_pred)} predictions and "
                        f"{len(groups)} group keys; expected the same number of each")
    totals: dict = {}
    for t, p, g in zip(y_true, y_pred, groups):
        g = g.item() if isinstance(g, np.generic) else g
        n, right = totals.get(g, (0, 0))
        totals[g] = (n + 1, right + int(t == p))
    try:
        keys = sorted(totals)
    except TypeError:  # mixed key types: keep first-seen order
        keys = list(totals)
    return {g: {"n": totals[g][0], "accuracy": totals[g][1] / totals[g][0]} for g in keys}


def confusion_table(report: dict) -> list[dict]:
    """One row per true label: counts per predicted label, support, precision, recall, F1.

    The rows suit :func:`keras_seq.tables.print_table`; columns ``true``, ``pred <label>``
    …, ``support``, ``precision``, ``recall``, ``f1``.
    """
    labels = report["labels"]
    rows = []
    for i, label in enumerate(labels):
        stats = report["per_class"][label]
        rows.append({"true": str(label),
                     **{f"pred {p}": int(report["confusion"][i][j])
                        for j, p in enumerate(labels)},
                     "support": stats["support"], "precision": round(stats["precision"], 4),
                     "recall": round(stats["recall"], 4), "f1": round(stats["f1"], 4)})
    return rows


def plot_confusion(report: dict, path, title: str | None = None) -> Path:
    """Write the confusion matrix of ``report`` as a PNG (counts in the cells) to ``path``."""
    plt = pyplot("the confusion-matrix plot")
    # lazy: matplotlib is there once pyplot() returned
    import matplotlib.ticker

    labels = [str(label) for label in report["labels"]]
    matrix = np.asarray(report["confusion"])
    k = len(labels)
    size = max(3.0, 0.6 * k + 2.0)
    fig, ax = plt.subplots(figsize=(size, size * 0.85), dpi=100)
    image = ax.imshow(matrix, cmap="Blues", vmin=0)
    ax.set_xticks(range(k))
    ax.set_xticklabels(labels, rotation=45 if k > 4 else 0, ha="right" if k > 4 else "center")
    ax.set_yticks(range(k))
    ax.set_yticklabels(labels)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    threshold = matrix.max() / 2 if matrix.size and matrix.max() > 0 else 0
    for i in range(k):
        for j in range(k):
            ax.text(j, i, str(int(matrix[i, j])), ha="center", va="center", fontsize=9,
                    color="white" if matrix[i, j] > threshold else "black")
    ax.set_title(title or f"accuracy {report['accuracy']:.3f}, macro-F1 {report['macro_f1']:.3f}",
                 fontsize=9)
    bar = fig.colorbar(image, ax=ax, fraction=0.046)
    bar.locator = matplotlib.ticker.MaxNLocator(integer=True)
    bar.update_ticks()
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    plt.close(fig)
    return path
