"""``keras-seq train lm``, ``eval lm``, ``generate`` and ``compare``."""

from __future__ import annotations

import sys

from keras_seq.commands._common import (
    add_eval_command,
    add_json_arg,
    add_keyboard_args,
    add_option_flags,
    add_train_command,
    check_run_arg,
    check_tokenizer_options,
    check_train_dir,
    config_overrides,
    keyboard_or_note,
    print_json,
    print_keyboard,
    print_train_results,
    train_printer,
    use_backend,
)
from keras_seq.data.splits import SPLITS
from keras_seq.sampling import SamplingOptions
from keras_seq.tasks.lm.config import PRESETS, LMConfig, preset


def config_from_args(args) -> LMConfig:
    base = preset(args.preset).to_dict() if getattr(args, "preset", None) else LMConfig().to_dict()
    return LMConfig.from_dict(config_overrides(args, LMConfig, base))


def register(subparsers) -> None:
    p = add_train_command(subparsers, "lm", "recurrent language model with stateful "
                          "truncated BPTT", LMConfig, run_train, presets=PRESETS)
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="start from a TensorFlow PTB tutorial configuration (flags override "
                        "it; default: none, LMConfig's values)")
    p = add_eval_command(subparsers, "lm", "cross-entropy, perplexity and keyboard metrics, "
                         "state carried over the whole split", run_eval, split="val")
    add_keyboard_args(p)

    p = subparsers.add_parser("generate", help="sample text from a trained language model "
                                               "(lm or conditioned run)")
    p.add_argument("--run-dir", required=True, help="the lm or conditioned run to sample from")
    p.add_argument("--condition", default=None,
                   help="conditioned runs: the label to generate for (default: each label)")
    p.add_argument("--prompt", default="", help="text to continue (default: a new line)")
    p.add_argument("--sampler", default="top-k", choices=("greedy", "temperature", "top-k",
                                                            "top-p"),
                   help="how the next token is picked from the model's distribution")
    add_option_flags(p, SamplingOptions)
    p.set_defaults(func=run_generate)

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


def check_config(config: LMConfig) -> LMConfig:
    """Refuse a bad config before any work: the config's own checks, then the tokenizer
    options (the corpus is read only after both pass)."""
    config.validate()
    check_tokenizer_options(config.tokenizer, max_vocab=config.max_vocab,
                            min_count=config.min_count, vocab_size=config.vocab_size,
                            lower=config.lower)
    return config


def run_train(args) -> int:
    check_train_dir(args.run_dir)
    check_config(config_from_args(args))
    use_backend(args)
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.tasks.lm.task import format_results, train_lm

    config = config_from_args(args)
    results = train_lm(config, args.run_dir, resume=args.resume,
                       verbose=2 if args.quiet else 1, printer=train_printer(args))
    print_train_results(args, results, format_results)
    return 0


def run_eval(args) -> int:
    check_run_arg(args.run_dir, "lm")
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.tasks.lm.evaluation import evaluate_run, keyboard_outcomes

    result = evaluate_run(args.run_dir, args.split)
    outcomes = keyboard_or_note(args, lambda: keyboard_outcomes(args.run_dir, args.split,
                                                                args.suggestions))
    keyboard = outcomes.metrics() if outcomes else None
    if args.json:
        print_json({**result.to_dict(), "keyboard": keyboard})
    else:
        print(f"{args.split}: cross-entropy {result.nats:.4f} nats ({result.bits:.3f} bits), "
              f"PPL {result.ppl:.2f} over {result.tokens:,} tokens ({result.oov:,} <unk>)")
        print_keyboard(keyboard)
        print(f"fingerprint {result.fingerprint['tokenizer']}, corpus "
              f"{result.fingerprint['corpus']} ({result.fingerprint['corpus_sha256'][:12]}…)")
    return 0


def run_generate(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.sampling import make_sampler

    kind = check_run_arg(args.run_dir, "lm", "conditioned", command="generate",
                         hint=" (use translate for seq2seq runs, predict for classify and tag "
                         "runs)")
    if kind == "conditioned":
        return _generate_conditioned(args, make_sampler(args.sampler, args.temperature,
                                                        args.top_k, args.top_p))
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.tasks.lm.evaluation import generate_tokens, load_run, stream_to_stdout

    _, tokenizer, model = load_run(args.run_dir)
    sampler = make_sampler(args.sampler, args.temperature, args.top_k, args.top_p)
    sys.stdout.write(args.prompt)
    generate_tokens(model, tokenizer, args.prompt, args.max_tokens, sampler, args.seed,
                    on_token=stream_to_stdout(tokenizer))
    sys.stdout.write("\n")
    return 0


def _generate_conditioned(args, sampler) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.errors import KerasSeqError
    from keras_seq.tasks.conditioned.task import generate_text, load_run

    config, tokenizer, conditions, model = load_run(args.run_dir)
    if args.prompt:
        raise KerasSeqError("--prompt is not supported for conditioned runs; pass --condition")
    if args.condition is not None and args.condition not in conditions.index:
        raise KerasSeqError(f"unknown condition {args.condition!r}; this run knows "
                            f"{', '.join(conditions.list)}")
    names = [args.condition] if args.condition is not None else conditions.list
    for name in names:
        cid = 0 if config.unconditioned else conditions.index[name]
        text = generate_text(model, tokenizer, cid, args.max_tokens, args.seed, sampler)
        print(f"[{name}] {text}")
    return 0


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
    from keras_seq.tasks.lm.evaluation import evaluate_run, keyboard_outcomes

    results = [evaluate_run(run, args.split) for run in args.runs]
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
