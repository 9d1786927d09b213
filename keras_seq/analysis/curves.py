"""Learning curves of LM run directories (``metrics.csv``) as one PNG.

From the command line::

    keras-seq compare --runs runs/rnn runs/lstm --ngram kn5.arpa --plot curves.png
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from keras_seq.errors import KerasSeqError
from keras_seq.extras import pyplot


def read_curves(run_dir: str | Path) -> dict[str, list[float]]:
    """Per-epoch ``loss``/``val_loss`` (nats) of a run, from its ``metrics.csv``."""
    path = Path(run_dir) / "metrics.csv"
    if not path.is_file():
        raise KerasSeqError(f"{run_dir} has no metrics.csv; expected a run directory written "
                            "by `keras-seq train lm`")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    curves = {"epoch": [], "loss": [], "val_loss": []}
    for row in rows:
        curves["epoch"].append(int(row["epoch"]) + 1)
        for key in ("loss", "val_loss"):
            value = row.get(key)
            curves[key].append(float(value) if value not in (None, "") else math.nan)
    return curves


def plot_learning_curves(run_dirs, path: str | Path, reference: dict[str, float] | None = None,
                         labels=None, title: str = "") -> str:
    """Validation (solid) and training (dashed) perplexity per epoch of each run.

    Args:
        run_dirs: run directories of ``keras-seq train lm``.
        path: the PNG to write.
        reference: optional ``{name: perplexity}`` drawn as horizontal lines (e.g. KN5).
        labels: legend names (default: the run directory names).
    """
    plt = pyplot("the learning-curve plot (--plot)")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    labels = labels or [Path(r).name for r in run_dirs]
    for run_dir, label in zip(run_dirs, labels):
        c = read_curves(run_dir)
        line, = ax.plot(c["epoch"], [math.exp(v) for v in c["val_loss"]], "-",
                        label=f"{label} (val)")
        ax.plot(c["epoch"], [math.exp(v) for v in c["loss"]], "--", color=line.get_color(),
                alpha=0.6, label=f"{label} (train)")
    for name, ppl in (reference or {}).items():
        ax.axhline(ppl, color="black", linestyle=":", label=f"{name} ({ppl:.1f})")
    # lazy: loads matplotlib only when this runs
    from matplotlib.ticker import MaxNLocator

    ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("perplexity (log scale)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    fig.savefig(str(path), dpi=100)
    plt.close(fig)
    return str(path)
