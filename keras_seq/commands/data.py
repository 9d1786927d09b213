"""``keras-seq data stats`` and ``keras-seq data tokenize``."""

from __future__ import annotations

import sys

from keras_seq.commands._common import (
    add_data_args,
    add_json_arg,
    add_tokenizer_args,
    fit_tokenizer,
    load_data,
    print_json,
    print_table,
)
from keras_seq.data.splits import SPLITS


def register(subparsers) -> None:
    data = subparsers.add_parser("data", help="inspect and tokenize corpora")
    sub = data.add_subparsers(dest="data_command", metavar="ACTION")
    data.set_defaults(func=lambda args: data.print_help() or 2)

    stats = sub.add_parser("stats", help="sizes per split, vocabulary, OOV rates, fingerprint")
    add_data_args(stats)
    add_tokenizer_args(stats)
    add_json_arg(stats)
    stats.set_defaults(func=run_stats)

    tokenize = sub.add_parser(
        "tokenize",
        help="write a split's tokens, space-separated, one line per corpus line "
        "(for KenLM/SRILM on identical tokens)",
    )
    add_data_args(tokenize)
    add_tokenizer_args(tokenize)
    tokenize.add_argument("--split", default="train",
                          choices=SPLITS, help="which split to write")
    tokenize.add_argument("--out", default=None, metavar="FILE",
                          help="output file (default stdout)")
    tokenize.add_argument("--keep-oov", action="store_true",
                          help="write out-of-vocabulary tokens as they are instead of <unk>")
    tokenize.set_defaults(func=run_tokenize)


def collect_stats(corpus, tokenizer) -> dict:
    """The numbers ``data stats`` prints, as a dict."""
    splits = {}
    for name, text in corpus.splits.items():
        tokens = tokenizer.tokens(text) if text else []
        unknown = sum(t not in tokenizer._index for t in tokens)
        splits[name] = {
            "chars": len(text),
            "lines": text.count("\n") + (1 if text and not text.endswith("\n") else 0),
            "tokens": len(tokens),
            "oov_tokens": unknown,
            "oov_rate": unknown / len(tokens) if tokens else 0.0,
        }
    return {
        "corpus": corpus.describe(),
        "tokenizer": tokenizer.describe(),
        "splits": splits,
    }


def run_stats(args) -> int:
    corpus = load_data(args)
    tokenizer = fit_tokenizer(args, corpus)
    stats = collect_stats(corpus, tokenizer)
    if args.json:
        print_json(stats)
        return 0
    c, t = stats["corpus"], stats["tokenizer"]
    print(f"corpus      {c['name']}  (sha256 {c['sha256'][:16]}…, split {c['split']})")
    for note in c["notes"]:
        print(f"            note: {note}")
    print(f"tokenizer   {t['kind']} {t['options']}")
    print(f"vocabulary  {t['vocab_size']:,} tokens   fingerprint {t['fingerprint']}")
    print()
    rows = [{"split": name, **values} for name, values in stats["splits"].items()]
    for row in rows:
        row["oov_rate"] = f"{100 * row['oov_rate']:.2f}%"
    print_table(rows, ["split", "chars", "lines", "tokens", "oov_tokens", "oov_rate"])
    return 0


def run_tokenize(args) -> int:
    corpus = load_data(args)
    tokenizer = fit_tokenizer(args, corpus)
    lines = tokenizer.tokenize_lines(corpus.text(args.split))
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    try:
        for line in lines:
            tokens = line if args.keep_oov else tokenizer.map_unknown(line)
            out.write(" ".join(tokens) + "\n")
    finally:
        if args.out:
            out.close()
    if args.out:
        n = sum(len(line) for line in lines)
        print(f"wrote {len(lines):,} lines, {n:,} tokens to {args.out} "
              f"(tokenizer {tokenizer.fingerprint})", file=sys.stderr)
    return 0
