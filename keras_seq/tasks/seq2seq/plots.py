"""Plots (matplotlib, Agg backend): attention heatmaps and accuracy-vs-length curves.

Each function writes a PNG and returns its path; :func:`figure_png` gives the PNG bytes
for TensorBoard images (:class:`~keras_seq.tasks.seq2seq.task.Seq2SeqMonitor`).
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from keras_seq.extras import pyplot

# matplotlib (the `plot` extra); every importer of this module imports it lazily
plt = pyplot("drawing attention heatmaps and length curves")


def _label(tok: str) -> str:
    return {" ": "␣", "\n": "⏎"}.get(tok, tok)


def heatmap_figure(weights, source_tokens, output_tokens, title: str = ""):
    """Figure of ``weights (T, S)``: source tokens on x, output tokens on y."""
    T, S = len(output_tokens), len(source_tokens)
    fig, ax = plt.subplots(figsize=(max(3.0, 0.28 * S + 1.5), max(2.5, 0.28 * T + 1.2)),
                           dpi=100)
    image = ax.imshow(weights[:T, :S], cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(S))
    ax.set_xticklabels([_label(t) for t in source_tokens], fontsize=7, rotation=90)
    ax.set_yticks(range(T))
    ax.set_yticklabels([_label(t) for t in output_tokens], fontsize=7)
    ax.set_xlabel("source")
    ax.set_ylabel("output")
    if title:
        ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax, fraction=0.04)
    fig.tight_layout()
    return fig


def figure_png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def attention_heatmap(weights, source_tokens, output_tokens, path, title: str = "") -> Path:
    """Write the heatmap PNG to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(figure_png(heatmap_figure(weights, source_tokens, output_tokens, title)))
    return path


def length_curve(curves: dict, path, metric: str = "exact_match",
                 title: str = "accuracy vs source length") -> Path:
    """Plot ``{model name: by_length rows}`` (see
    :func:`~keras_seq.tasks.seq2seq.metrics.by_length`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for name, rows in curves.items():
        pts = [((r["lo"] + r["hi"]) / 2, 100 * r[metric]) for r in rows
               if r["n"] and not math.isnan(r[metric])]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xlabel("source length (bucket midpoint, tokens)")
    ax.set_ylabel(f"{metric.replace('_', ' ')} (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend()
    fig.tight_layout()
    path.write_bytes(figure_png(fig))
    return path
