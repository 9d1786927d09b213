"""``keras-seq bench ngram``: Kneser-Ney estimation speed/memory and PPL by order."""

from __future__ import annotations

import json
import math

from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import number
from keras_seq.ranges import AT_LEAST_1, NGRAM_ORDER

OPTIONS = (
    Option("--data", None, "tinyshakespeare", "corpus: a registry name or a .txt file or folder"),
    Option("--data-dir", help="folder searched for registry files before downloading"),
    Option("--split-ratio", None, "90/10/0", "train/val/test shares of the corpus"),
    Option("--repeat", number(int, AT_LEAST_1), 3,
           "copies of the train split to estimate on (default 3 ≈ 770k words)"),
    Option("--order", number(int, NGRAM_ORDER), 5, "n-gram order of the estimated models"),
    Option("--lmplz", help="path to KenLM's lmplz to compare with"),
)


def run_ngram(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.ngram import format_bench, run_bench

    out = run_bench(args.data, repeat=args.repeat, split=args.split_ratio,
                    max_order=args.order, lmplz=args.lmplz, data_dir=args.data_dir)
    return out, format_bench


def infinity_as_text(report: dict) -> dict:
    """The report with infinite perplexities as ``"inf"`` (JSON has no infinity)."""
    text = json.dumps(report, default=str).replace("-Infinity", '"-inf"')
    return json.loads(text.replace("Infinity", '"inf"'))


register = BenchCommand(
    "ngram", "KN5 estimation time/memory, MLE/add-1/KN PPL", run_ngram, OPTIONS,
    to_json=infinity_as_text,
    ok=lambda out: not any(math.isnan(r["ppl_kn"]) for r in out["ppl"])).register
