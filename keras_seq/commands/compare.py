"""``keras-seq compare``: one perplexity table for several lm runs (and an n-gram model).

(``train lm``, ``eval lm`` and ``generate`` come from the lm shape's row in
:mod:`keras_seq.commands.tasks`.)"""

from __future__ import annotations

from keras_seq.commands._common import (
    add_json_arg,
    add_keyboard_args,
    check_run_arg,
    keyboard_or_note,
    print_json,
)
from keras_seq.data.splits import SPLITS
from keras_seq.tasks.lm.config import LMConfig


def register(subparsers) -> None:
    p = subparsers.add_parser("compare", help="one perplexity table for several runs "
                                              "(and an n-gram ARPA model)")
    p.add_argument("--runs", nargs="+", required=True, metavar="RUN_DIR",
                   help="lm runs to score (same corpus and tokenizer)")
    p.add_argument("--ngram", default=None, metavar="MODEL.arpa",
                   help="also score this n-gram model on the first run's data")
    p.add_argument("--split", default="val", choices=SPLITS[1:], help="split scored")
    p.add_argument("--plot", default=None, metavar="PNG",
                   help="also draw each run's train/val perplexity per epoch")
    add_json_arg(p)
    add_keyboard_args(p)
    p.set_defaults(func=run_compare)


def _evaluate_ngram_like(arpa_path: str, run_dir: str, split: str):
    """Score an ARPA model on the corpus and split of ``run_dir``, tokenized as it was
    trained: ``(PerplexityResult, keyboard(k) -> KeyboardOutcomes)``."""
    # lazy: keeps `keras-seq --help` fast
    from pathlib import Path

    from keras_seq.ngram.arpa import read_arpa
    from keras_seq.ngram.data import load_tokenized
    from keras_seq.ngram.scorer import evaluate, keyboard_outcomes

    config = LMConfig.load(Path(run_dir) / "config.json")
    model = read_arpa(arpa_path)
    meta = model.metadata
    opts = meta.get("tokenizer_options") or {}
    data = load_tokenized(config.data, max_vocab=opts.get("max_vocab"),
                          min_count=opts.get("min_count") or 1, split=config.split_ratio,
                          data_dir=config.data_dir)
    name = f"{meta.get('smoothing', 'n-gram')} {model.order}-gram ({Path(arpa_path).name})"
    result = evaluate(model, data.lines(split), fingerprint=data.fingerprint(split), name=name)
    return result, lambda k: keyboard_outcomes(model, data.raw_lines(split), k)


def run_compare(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.commands._common import print_table
    from keras_seq.metrics import check_comparable
    for run in args.runs:
        check_run_arg(run, "lm")
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.keyboard import LABELS, METRICS, format_difference, paired_bootstrap
    from keras_seq.tasks.lm.evaluation import keyboard_outcomes, perplexity_of_run

    results = [perplexity_of_run(run, args.split) for run in args.runs]
    keyboards = [lambda k, run=run: keyboard_outcomes(run, args.split, k) for run in args.runs]
    if args.ngram:
        result, keyboard = _evaluate_ngram_like(args.ngram, args.runs[0], args.split)
        results.append(result)
        keyboards.append(keyboard)
    check_comparable(*results)
    rows = [{"model": r.model, "tokens": r.tokens, "nats": r.nats, "ppl": r.ppl}
            for r in results]
    outcomes = keyboard_or_note(args, lambda: [kb(args.suggestions) for kb in keyboards])
    differences = []
    if outcomes:
        for row, outcome in zip(rows, outcomes):
            row.update({LABELS[m]: 100 * v for m, v in outcome.metrics().items()
                        if m in METRICS})
        differences = [{"model": f"{rows[0]['model']} − {row['model']}",
                        **{LABELS[m]: format_difference(d)
                           for m, d in paired_bootstrap(outcomes[0], other).items()}}
                       for row, other in zip(rows[1:], outcomes[1:])]
    if args.plot:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.analysis.curves import plot_learning_curves

        reference = {results[-1].model: results[-1].ppl} if args.ngram else None
        plot_learning_curves(args.runs, args.plot, reference=reference,
                             title="validation (solid) and training (dashed) perplexity "
                                   "per epoch")
    if args.json:
        print_json({"split": args.split, "fingerprint": results[0].fingerprint, "rows": rows,
                    "keyboard_differences": differences, "plot": args.plot})
    else:
        print_table(rows)
        if differences:
            print("keyboard differences in points, paired block bootstrap 95% interval:")
            print_table(differences)
        if args.plot:
            print(f"curves: {args.plot}")
    return 0
