"""``keras-seq bench ngram``: Kneser-Ney estimation speed/memory and PPL by order."""

from __future__ import annotations

import json
import math

from keras_seq.commands._common import add_json_arg, number
from keras_seq.ranges import AT_LEAST_1, NGRAM_ORDER


def register(subparsers) -> None:
    p = subparsers.add_parser("ngram", help="KN5 estimation time/memory, MLE/add-1/KN PPL")
    p.add_argument("--data", default="tinyshakespeare",
                   help="corpus: a registry name or a .txt file or folder")
    p.add_argument("--data-dir", default=None,
                   help="folder searched for registry files before downloading")
    p.add_argument("--split-ratio", default="90/10/0", help="train/val/test shares of the corpus")
    p.add_argument("--repeat", type=number(int, AT_LEAST_1), default=3,
                   help="copies of the train split to estimate on (default 3 ≈ 770k words)")
    p.add_argument("--order", type=number(int, NGRAM_ORDER),
                   default=5, help="n-gram order of the estimated models")
    p.add_argument("--lmplz", default=None, help="path to KenLM's lmplz to compare with")
    add_json_arg(p)
    p.set_defaults(func=run_ngram)


def run_ngram(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.ngram import format_bench, run_bench
    from keras_seq.ngram.counts import check_order

    out = run_bench(args.data, repeat=args.repeat, split=args.split_ratio,
                    max_order=check_order(args.order), lmplz=args.lmplz,
                    data_dir=args.data_dir)
    if args.json:
        print(json.dumps(out, indent=2,
                         default=str, allow_nan=True).replace("Infinity", '"inf"'))
    else:
        print(format_bench(out))
    return 0 if not any(math.isnan(r["ppl_kn"]) for r in out["ppl"]) else 1
