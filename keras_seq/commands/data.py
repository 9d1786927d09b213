"""``keras-seq data stats``, ``keras-seq data tokenize`` and ``keras-seq data prepare``.

``stats`` and ``tokenize`` take a prepared directory as ``--data`` too
(:mod:`keras_seq.data.prepared`): its numbers come from its manifest, its tokens from
its ids.
"""

from __future__ import annotations

import argparse
import sys

from keras_seq.commands._common import (
    add_data_args,
    add_json_arg,
    add_tokenizer_args,
    fit_tokenizer,
    load_data,
    new_tokenizer,
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
    tokenize.add_argument("--keep-oov", action=argparse.BooleanOptionalAction, default=False,
                          help="write out-of-vocabulary tokens as they are instead of <unk>")
    tokenize.set_defaults(func=run_tokenize)

    prepare = sub.add_parser(
        "prepare",
        help="tokenize a corpus once into DIR (token ids as flat uint16/uint32, the "
        "tokenizer, the splits), in bounded memory; every command that reads a corpus "
        "then takes --data DIR",
    )
    add_data_args(prepare, default=None)
    add_tokenizer_args(prepare)
    prepare.add_argument("--out", required=True, metavar="DIR",
                         help="the directory to write (new, empty, or an earlier prepare)")
    prepare.add_argument("--quiet", action=argparse.BooleanOptionalAction, default=False,
                         help="no progress bars")
    add_json_arg(prepare)
    prepare.set_defaults(func=run_prepare)


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


def prepared_stats(corpus) -> dict:
    """:func:`collect_stats` of a prepared corpus, from its manifest (after reading its
    ids once to check them: :meth:`~keras_seq.data.prepared.PreparedCorpus.verify`)."""
    corpus.verify()
    splits = {}
    for name, values in corpus.manifest["stats"].items():
        n = values["tokens"]
        splits[name] = {"chars": values["chars"], "lines": values["lines"], "tokens": n,
                        "oov_tokens": values["oov_tokens"],
                        "oov_rate": values["oov_tokens"] / n if n else 0.0}
    return {"corpus": corpus.describe(), "tokenizer": corpus.tokenizer.describe(),
            "splits": splits}


def run_stats(args) -> int:
    corpus = load_data(args)
    if getattr(corpus, "manifest", None) is not None:  # a prepared corpus
        stats = prepared_stats(corpus)
    else:
        stats = collect_stats(corpus, fit_tokenizer(args, corpus))
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
    if getattr(corpus, "manifest", None) is not None:  # a prepared corpus: its ids
        if args.keep_oov:
            # lazy: keeps `keras-seq --help` fast
            from keras_seq.errors import DataError

            raise DataError(f"{args.data} holds ids, in which unknown words are already <unk>; "
                            "--keep-oov needs the text: pass the source corpus as --data")
        tokenizer, lines = corpus.tokenizer, corpus.token_lines(args.split)
    else:
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


def run_prepare(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    import time

    from keras_seq.data.prepared import prepare_corpus

    new_tokenizer(args)  # refuses options that do not apply before any text is read
    start = time.perf_counter()
    corpus = prepare_corpus(args.data, args.out, tokenizer=args.tokenizer,
                            max_vocab=args.max_vocab, min_count=args.min_count,
                            lower=args.lower, split=args.split_ratio, data_dir=args.data_dir,
                            quiet=args.quiet or args.json)
    seconds = time.perf_counter() - start
    info = corpus.describe()
    info.update(tokenizer=corpus.tokenizer.describe(), seconds=round(seconds, 2))
    if args.json:
        print_json(info)
        return 0
    sizes = ", ".join(f"{s} {n:,}" for s, n in info["tokens"].items())
    size = corpus.manifest["source"]["bytes"]
    print(f"prepared {info['name']} into {args.out}: {len(corpus):,} {corpus.dtype} ids "
          f"({sizes}), vocabulary {corpus.tokenizer.vocab_size:,} "
          f"({corpus.tokenizer.fingerprint}); {size / 1e6:.1f} MB in {seconds:.1f}s "
          f"({size / 1e6 / max(seconds, 1e-9):.1f} MB/s)")
    for note in info["notes"]:
        print(f"note: {note}")
    return 0
