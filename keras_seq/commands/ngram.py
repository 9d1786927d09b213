"""``keras-seq ngram train|eval|sparsity|generate|next``: n-gram language models.

Never imports TensorFlow (start-up time counts): everything here is numpy.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from keras_seq.atomic import write_json_atomic
from keras_seq.commands._common import (
    add_data_args,
    add_json_arg,
    add_keyboard_args,
    check_tokenizer_options,
    keyboard_or_note,
    number,
    print_keyboard,
)
from keras_seq.data.splits import SPLITS
from keras_seq.errors import DataError
from keras_seq.progress import progress_bar
from keras_seq.ranges import AT_LEAST_1, NGRAM_ORDER, SEED

# A raw text smaller than this is tokenized in this process (tinyshakespeare: ~0.03 s saved
# of ~0.5 s); a larger one in a child process, whose memory goes back before estimation.
IN_PROCESS_PREPARE_BYTES = 16 << 20


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "ngram", help="n-gram language models (MLE, add-k, Kneser-Ney; ARPA in and out)"
    )
    sub = parser.add_subparsers(dest="ngram_command", metavar="ACTION")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)

    def data_args(p):
        add_data_args(p, default=None)

    def vocab_args(p):
        p.add_argument("--tokenizer", default="word", choices=("word",),
                       help="only 'word' for n-grams")
        p.add_argument("--max-vocab", type=number(int, AT_LEAST_1), default=None,
                       help="largest vocabulary, special tokens included (default: no limit)")
        p.add_argument("--min-count", type=number(int, AT_LEAST_1), default=1,
                       help="keep words seen at least this often in train")

    p = sub.add_parser("train", help="count a corpus, estimate a model, write ARPA")
    data_args(p)
    vocab_args(p)
    p.add_argument("--order", type=number(int, NGRAM_ORDER),
                   default=5, help="n-gram order (5: a 5-gram model)")
    p.add_argument("--smoothing", choices=("kn", "addk", "mle"), default="kn",
                   help="kn: modified Kneser-Ney; addk: add-k; mle: none")
    p.add_argument("--k", type=number(float, AT_LEAST_1), default=1.0, help="pseudo-count for addk")
    p.add_argument("--discount-fallback", action=argparse.BooleanOptionalAction, default=True,
                   help="where Kneser-Ney discounts cannot be estimated, use fixed ones, as "
                   "lmplz --discount_fallback does (--no-discount-fallback fails, like lmplz)")
    p.add_argument("--out", required=True, help="ARPA file to write")
    p.add_argument("--memory", default="1G", metavar="SIZE",
                   help="RAM for Kneser-Ney estimation (K/M/G suffix, like lmplz -S): counts "
                        "are sorted in blocks of this size, spilled to disk and merged; 0 "
                        "holds every n-gram in RAM instead")
    p.add_argument("--temp-dir", default=None, metavar="DIR",
                   help="where --memory spills its sorted runs (default: the system's "
                        "temporary directory; removed afterwards)")
    p.add_argument("--workers", type=number(int, AT_LEAST_1), default=None, metavar="N",
                   help="with --memory: threads that count and merge, and processes that "
                        "format the ARPA text (default: one per core, at most 8 and one per "
                        "128M of --memory; 1: all in this thread). The file is the same byte "
                        "for byte")
    p.add_argument("--profile", default=None, metavar="FILE.json",
                   help="with --memory: write the wall seconds of each step (reading the "
                        "data, tokens, count, merge, discounts, probabilities, arpa) to this "
                        "JSON file and print them")
    p.set_defaults(func=run_train)

    p = sub.add_parser("eval", help="perplexity of an ARPA model on a split")
    p.add_argument("--model", required=True, help="the ARPA model file")
    data_args(p)
    p.add_argument("--split", default="val", choices=SPLITS, help="split scored")
    add_json_arg(p)
    add_keyboard_args(p)
    p.set_defaults(func=run_eval)

    p = sub.add_parser("sparsity", help="unseen n-grams and MLE/add-k/KN perplexity by order")
    data_args(p)
    vocab_args(p)
    p.add_argument("--max-order", type=number(int, NGRAM_ORDER),
                   default=5, help="largest n-gram order measured")
    p.add_argument("--k", type=number(float, AT_LEAST_1), default=1.0, help="pseudo-count of add-k")
    p.add_argument("--split", default="val", choices=SPLITS[1:], help="split scored")
    add_json_arg(p)
    p.add_argument("--plot", default=None, help="save a PNG here")
    p.set_defaults(func=run_sparsity)

    p = sub.add_parser("generate", help="sample text from an ARPA model")
    p.add_argument("--model", required=True, help="the ARPA model file")
    p.add_argument("--max-tokens", type=number(int, AT_LEAST_1), default=50, help="words generated")
    p.add_argument("--seed", type=number(int, SEED), default=0, help="random seed of the sampler")
    p.add_argument("--prompt", default="", help="words to continue (space separated)")
    p.set_defaults(func=run_generate)

    p = sub.add_parser("next", help="the top-k next tokens after a context")
    p.add_argument("--model", required=True, help="the ARPA model file")
    p.add_argument("--context", default="", help="space-separated words; '<s>' = line start")
    p.add_argument("--top-k", type=number(int, AT_LEAST_1), default=10, help="next tokens shown")
    add_json_arg(p)
    p.set_defaults(func=run_next)


def _progress(total: int, desc: str):
    return progress_bar(total=total, desc=desc, unit="lines",
                        disable=None if total > 200_000 else True)


def run_train(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.ngram.external import parse_memory

    order = args.order
    check_tokenizer_options("word", max_vocab=args.max_vocab, min_count=args.min_count)
    memory = 0 if str(args.memory).strip() == "0" else parse_memory(args.memory)
    start = time.perf_counter()
    if args.smoothing == "kn" and memory:
        return _train_kn_bounded(args, order, memory, start)
    if args.profile:
        raise DataError(f"--profile times the steps of Kneser-Ney in bounded memory; got "
                        f"--smoothing {args.smoothing} --memory {args.memory}. Use "
                        "--smoothing kn with a --memory budget (e.g. 1G), or drop --profile")
    return _train_in_memory(args, order, start)


def _train_kn_bounded(args, order: int, memory: int, start: float) -> int:
    """Kneser-Ney in ``memory`` bytes. A raw text is first tokenized as ``data prepare``
    does it (streamed, into a prepared folder under ``--temp-dir``, removed afterwards), so
    the text is never held in RAM; the ARPA file is the same as from the lines."""
    # lazy: keeps `keras-seq --help` fast
    import tempfile

    from keras_seq.data.prepared import is_prepared
    from keras_seq.ngram.data import load_tokenized
    from keras_seq.ngram.external import one_malloc_arena, train_kn_bounded

    # before any thread starts (the child process below starts two here): an arena that a
    # thread made earlier is reused by the counting threads, and keeps their freed blocks
    # (raw text, 17.5 M tokens of source code, --memory 1G: 369 → 283 MB peak, the rest
    # of the estimate now below the child's 280 MB)
    one_malloc_arena()
    if args.temp_dir:  # a folder that is not there yet is made, as --out's parents are
        os.makedirs(args.temp_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="keras-seq-ngram-", dir=args.temp_dir) as tmp:
        source = args.data
        if not is_prepared(source):
            source = f"{tmp}/prepared"
            _prepare_apart(args.data, source, tokenizer="word", max_vocab=args.max_vocab,
                           min_count=args.min_count, split=args.split_ratio,
                           data_dir=args.data_dir, quiet=not sys.stderr.isatty())
        data = load_tokenized(source, tokenizer=args.tokenizer, max_vocab=args.max_vocab,
                              min_count=args.min_count, split=args.split_ratio)
        vocab, n_predicted = data.vocabulary(), data.n_predicted("train")
        read_s = time.perf_counter() - start
        result = train_kn_bounded(data.id_chunks(vocab), vocab, order, memory, args.out,
                                  temp_dir=args.temp_dir,
                                  discount_fallback=args.discount_fallback,
                                  metadata=_metadata(args, data, n_predicted), progress=_bar,
                                  workers=args.workers)
    _report(args, order, n_predicted, len(vocab), result.counts, start)
    if args.profile:
        _write_profile(args.profile, {"read": read_s, **result.seconds}, start)
    return 0


def _prepare_apart(data, out, **options) -> None:
    """``prepare_corpus`` in a child process: the memory its vocabulary count took goes
    back to the system before estimation starts (in this process the allocator would keep
    it, and the two peaks would add up)."""
    # lazy: keeps `keras-seq --help` fast
    from concurrent.futures import ProcessPoolExecutor

    from keras_seq.ngram.external import worker_context

    if os.path.isfile(data) and os.path.getsize(data) < IN_PROCESS_PREPARE_BYTES:
        _prepare(data, out, options)  # small: a process would cost more than it frees
        return
    with ProcessPoolExecutor(1, mp_context=worker_context()) as pool:
        pool.submit(_prepare, data, out, options).result()


def _prepare(data, out, options) -> None:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.data.prepared import prepare_corpus

    prepare_corpus(data, out, **options)  # its return value (an open corpus) stays here


def _train_in_memory(args, order: int, start: float) -> int:
    """Every n-gram counted in RAM (``--memory 0``, or add-k and MLE)."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.ngram.arpa import write_arpa
    from keras_seq.ngram.counts import NgramCounts, Vocabulary
    from keras_seq.ngram.data import load_tokenized
    from keras_seq.ngram.estimators import CountModel
    from keras_seq.ngram.kneser_ney import kneser_ney

    data = load_tokenized(args.data, tokenizer=args.tokenizer, max_vocab=args.max_vocab,
                          min_count=args.min_count, split=args.split_ratio,
                          data_dir=args.data_dir)
    vocab = Vocabulary.from_lines(data.train)
    n_predicted = sum(len(line) + 1 for line in data.train if len(line))
    meta = _metadata(args, data, n_predicted)
    counts = NgramCounts.from_stream(vocab.encode(data.train), order, len(vocab))
    if args.smoothing == "kn":
        model = kneser_ney(counts, vocab, args.discount_fallback, meta)
    else:
        model = CountModel(counts, vocab, args.smoothing, args.k).to_backoff(meta)
    bar = _progress(sum(model.counts), "writing ARPA")
    write_arpa(model, args.out, progress=bar.update)
    bar.close()
    _report(args, order, n_predicted, len(vocab), model.counts, start)
    return 0


def _metadata(args, data, n_predicted: int) -> dict:
    """The ``# keras-seq`` line's keys: how the text was tokenized and which corpus."""
    return {
        "tokenizer": "word",
        "tokenizer_options": data.tokenizer.options,
        "tokenizer_fingerprint": data.tokenizer.fingerprint,
        "corpus": data.corpus.name,
        "corpus_sha256": data.corpus.sha256,
        "corpus_split": args.split_ratio,
        "train_tokens": n_predicted,
    }


def _bar(desc: str, total: int):
    return progress_bar(total=total, desc=desc, disable=None if total > 2_000_000 else True,
                        unit_scale=True)


def _write_profile(path, seconds: dict, start: float) -> None:
    """The step breakdown of a bounded Kneser-Ney run, printed and written as JSON."""
    total = time.perf_counter() - start
    steps = {name: round(s, 4) for name, s in seconds.items()}
    write_json_atomic(path, {"steps_s": steps, "total_s": round(total, 4)})
    print("steps: " + ", ".join(f"{name} {s:.2f}s ({s / total:.0%})"
                                for name, s in seconds.items()) + f"; total {total:.2f}s")


def _report(args, order, n_predicted, vocab_size, counts, start) -> None:
    grams = ", ".join(f"{n + 1}-grams {c:,}" for n, c in enumerate(counts))
    print(f"wrote {args.out}: order {order} {args.smoothing}, {n_predicted:,} training "
          f"tokens, vocabulary {vocab_size:,}; {grams} ({time.perf_counter() - start:.1f}s)")


def run_eval(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.ngram.arpa import read_arpa
    from keras_seq.ngram.data import load_tokenized
    from keras_seq.ngram.scorer import evaluate, keyboard_outcomes, zero_prob_tokens

    model = read_arpa(args.model)
    meta = model.metadata
    opts = meta.get("tokenizer_options") or {}
    split_spec = meta.get("corpus_split", args.split_ratio)
    data = load_tokenized(args.data, max_vocab=opts.get("max_vocab"),
                          min_count=opts.get("min_count", 1), split=split_spec,
                          data_dir=args.data_dir)
    lines = data.lines(args.split)
    if not lines:
        raise DataError(f"the {args.split} split of {data.corpus.name!r} has no tokens")
    fp = data.fingerprint(args.split)
    result = evaluate(model, lines, fingerprint=fp, name=args.model)
    checks = {
        "tokenizer_matches": meta.get("tokenizer_fingerprint") in (None, fp["tokenizer"]),
        "corpus_matches": meta.get("corpus_sha256") in (None, fp["corpus_sha256"]),
        "model_has_metadata": "tokenizer_fingerprint" in meta,
    }
    zeros = zero_prob_tokens(model, lines) if math.isinf(result.ppl) else 0
    out = result.to_dict()
    outcomes = keyboard_or_note(args, lambda: keyboard_outcomes(
        model, data.raw_lines(args.split), args.suggestions))
    out.update(smoothing=meta.get("smoothing", "unknown"), order=model.order,
               zero_probability_tokens=zeros, **checks,
               keyboard=outcomes.metrics() if outcomes else None)
    if args.json:
        print(json.dumps(out, indent=2, default=lambda v: str(v)))
    else:
        print(f"model       {args.model} ({out['smoothing']}, order {model.order})")
        print(f"split       {args.split} of {data.corpus.name} ({split_spec})")
        print(f"tokens      {result.tokens:,} (OOV <unk>: {result.oov:,})")
        print(f"cross-ent.  {result.nats:.4f} nats/token = {result.bits:.4f} bits/token")
        print(f"perplexity  {result.ppl:.3f}")
        print_keyboard(out["keyboard"])
        if zeros:
            print(f"            infinite: {zeros:,} tokens have probability 0 (n-grams never "
                  "seen in training; MLE has no smoothing)")
        print(f"fingerprint tokenizer {fp['tokenizer']}, corpus sha256 "
              f"{fp['corpus_sha256'][:16]}…, split {args.split}")
        for key, ok in checks.items():
            if not ok:
                print(f"warning: {key.replace('_', ' ')} is false: the model was trained on "
                      "other data or tokens, so this perplexity is not comparable",
                      file=sys.stderr)
    return 0


def run_sparsity(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.ngram import sparsity
    from keras_seq.ngram.data import load_tokenized

    check_tokenizer_options("word", max_vocab=args.max_vocab, min_count=args.min_count)
    data = load_tokenized(args.data, tokenizer=args.tokenizer, max_vocab=args.max_vocab,
                          min_count=args.min_count, split=args.split_ratio,
                          data_dir=args.data_dir)
    held = data.lines(args.split)
    if not held:
        # lazy: keeps `keras-seq --help` fast

        raise DataError(f"the {args.split} split of {data.corpus.name!r} has no tokens; "
                        "choose a --split-ratio that gives it text")
    rows = sparsity.sparsity_report(data.train, held, args.max_order, args.k,
                                    data.raw_lines(args.split))
    if args.plot:
        sparsity.plot(rows, args.plot, f"{data.corpus.name}: {args.split} vs train")
    if args.json:
        print(sparsity.to_json(rows, fingerprint=data.fingerprint(args.split), k=args.k,
                               plot=args.plot))
    else:
        print(sparsity.format_table(rows, args.k))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0


def run_generate(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.ngram.arpa import read_arpa

    model = read_arpa(args.model)
    for line in model.sample(args.max_tokens, args.seed, args.prompt.split() or None):
        print(" ".join(line))
    return 0


def run_next(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.ngram.arpa import read_arpa

    model = read_arpa(args.model)
    best = model.top_k(args.context.split(), args.top_k)
    if args.json:
        print(json.dumps([{"token": t, "p": p} for t, p in best], indent=2))
    else:
        for token, p in best:
            print(f"{p:.5f}  {token}")
    return 0
