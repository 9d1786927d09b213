"""``keras-seq train classify|tag|conditioned``, ``eval …`` and ``predict``.

Each task is one entry of ``TASKS``: its config (flags are made from its fields) and its
task module (``TASK``, ``evaluate_run``, ``load_run``), imported only when a command runs
so ``--help`` stays fast.
"""

from __future__ import annotations

import importlib
import sys

from keras_seq.atomic import json_safe
from keras_seq.commands._common import (
    add_eval_command,
    add_json_arg,
    add_train_command,
    check_run_arg,
    check_task_name,
    check_tokenizer_options,
    check_train_dir,
    config_overrides,
    number,
    print_json,
    print_table,
    print_train_results,
    train_printer,
    use_backend,
)
from keras_seq.ranges import AT_LEAST_1
from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.conditioned.config import ConditionedConfig
from keras_seq.tasks.tag.config import TagConfig

# kind: (config class, task module, train help, eval help)
TASKS = {
    "classify": (ClassifyConfig, "keras_seq.tasks.classify.task",
                 "N→1 sequence classifier (RNN/GRU/LSTM, uni/bi, last/mean/attention pooling)",
                 "accuracy, macro-F1, confusion matrix (table + PNG), accuracy per group"),
    "tag": (TagConfig, "keras_seq.tasks.tag.task",
            "aligned N→N tagger (bidirectional by default): CoNLL, CoNLL-U, restore-punct",
            "token accuracy, per-tag and micro/macro F1, span F1 for BIO tags"),
    "conditioned": (ConditionedConfig, "keras_seq.tasks.conditioned.task",
                    "1→N: an LM conditioned on a label (python-docs-topics, tsv:PATH); "
                    "--unconditioned trains the baseline",
                    "perplexity on a split and a sample per condition"),
}
PREDICTS = ("classify", "tag")


def _module(kind: str):
    return importlib.import_module(TASKS[kind][1])


def register(subparsers) -> None:
    for kind, (config_cls, _, train_help, eval_help) in TASKS.items():
        add_train_command(subparsers, kind, train_help, config_cls, run_train,
                          data_is_corpus=False)  # checked by check_config
        add_eval_command(subparsers, kind, eval_help, run_eval)

    p = subparsers.add_parser("predict", help="labels (classify runs) or tags (tag runs) of "
                                              "texts given as arguments or one per stdin line")
    p.add_argument("--run-dir", required=True, help="the classify or tag run that predicts")
    p.add_argument("--top", type=number(int, AT_LEAST_1),
                   default=1, help="classify: labels shown per text")
    add_json_arg(p)
    p.add_argument("text", nargs="*", help="texts (none: one per line on stdin)")
    p.set_defaults(func=run_predict)


# kind: (known --data names, --data prefixes): a near miss of one is refused before any work
TASK_NAMES = {
    "classify": (("reviews-negation",), ("tsv:",)),
    "tag": (("restore-punct",), ("restore-punct:", "conll:", "conllu:")),
    "conditioned": (("python-docs-topics", "shapes"), ("tsv:",)),
}


def check_config(config):
    """Refuse a bad config before any work: misspelt ``--data``, the config's own checks
    (the split ratio among them) and the word tokenizer's options."""
    names, prefixes = TASK_NAMES[config.kind]
    check_task_name(f"{config.kind} --data", config.data, names, prefixes)
    config.validate()
    check_tokenizer_options("word", max_vocab=config.max_vocab, min_count=config.min_count,
                            lower=getattr(config, "lower", None))
    return config


def run_train(args) -> int:
    check_train_dir(args.run_dir)
    config_cls = TASKS[args.kind][0]
    check_config(config_cls.from_dict(config_overrides(args, config_cls,
                                                       config_cls().to_dict())))
    use_backend(args)
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.training.trainer import format_results, train

    config = config_cls.from_dict(config_overrides(args, config_cls, config_cls().to_dict()))
    config.validate()
    task = _module(args.kind).TASK
    results = train(task, config, args.run_dir, resume=args.resume,
                    verbose=2 if args.quiet else 1, printer=train_printer(args))
    print_train_results(args, results, lambda r: format_results(r, task))
    return 0


def run_eval(args) -> int:
    check_run_arg(args.run_dir, args.kind)
    result = _module(args.kind).evaluate_run(args.run_dir, args.split)
    if args.json:
        print_json(json_safe(result))
        return 0
    if args.kind == "conditioned":
        print(f"{args.split}: PPL {result['ppl']:.2f} ({result['nats']:.4f} nats) over "
              f"{result['tokens']:,} tokens, "
              f"{'conditioned' if result['conditioned'] else 'unconditioned'}")
        print("by position in the paragraph: " + ", ".join(
            f"{b['positions']}: PPL {b['ppl']:.1f}" for b in result["by_position"]))
        for name, text in result["samples"].items():
            print(f"  [{name}] {text}")
        return 0
    report = result["report"]
    if args.kind == "classify":
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.tasks.classify.metrics import confusion_table

        print(f"{args.split} ({result['n']:,} examples): accuracy "
              f"{100 * result['accuracy']:.2f}%, macro-F1 {100 * result['macro_f1']:.2f}%")
        print_table(confusion_table(report))
        if result.get("by_group"):
            print_table([{"group": str(g), "n": v["n"], "accuracy %": 100 * v["accuracy"]}
                         for g, v in result["by_group"].items()])
        print(f"confusion matrix: {result['confusion_png']}")
    else:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.tasks.tag.metrics import format_report

        print(f"{args.split} ({result['n']:,} sentences)")
        print(format_report(report))
    return 0


def run_predict(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.errors import KerasSeqError

    kind = check_run_arg(args.run_dir, *PREDICTS, command="predict",
                         hint=" (use generate for lm and conditioned runs, translate for "
                         "seq2seq runs)")
    if args.top < 1:
        raise KerasSeqError(f"--top must be ≥ 1, got {args.top}")
    texts = args.text or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        raise KerasSeqError("nothing to predict; pass texts as arguments or on stdin")
    module = _module(kind)
    config, tokenizer, labels, model = module.load_run(args.run_dir)
    if kind == "classify":
        probs = module.predict_proba(model, tokenizer, texts, config.max_len)
        rows = []
        for text, p in zip(texts, probs):
            best = p.argsort()[::-1][: args.top]
            rows.append({"text": text, "labels": labels.names(best),
                         "scores": [round(float(p[i]), 4) for i in best]})
        if args.json:
            print_json(rows)
        else:
            for r in rows:
                shown = ", ".join(f"{name} {s:.3f}" for name, s in zip(r["labels"], r["scores"]))
                print(f"{shown}\t{r['text']}")
        return 0
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.tasks.tag.data import restore_punct

    sentences = [text.split() for text in texts]
    if config.data.startswith("restore-punct"):  # read raw text the way the task made it
        sentences = [[w for s in restore_punct(text, config.max_len) for w in s[0]]
                     for text in texts]
    tags = module.predict_tags(model, tokenizer, labels, sentences)
    rows = [{"tokens": words, "tags": t} for words, t in zip(sentences, tags)]
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            print(" ".join(f"{w}/{t}" for w, t in zip(r["tokens"], r["tags"])))
        if config.data.startswith("restore-punct"):
            # lazy: keeps `keras-seq --help` fast
            from keras_seq.tasks.tag.data import restore_text

            for r in rows:
                print(restore_text(r["tokens"], r["tags"]))
    return 0
