"""``keras-seq bench serve``: loopback load test of the REST server (1 vs 16 clients on
next_tokens): requests/s, p50/p99 latency, mean batch size, server RSS."""

from __future__ import annotations

import argparse

from keras_seq.commands._common import add_json_arg, number
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE, Range


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="load test `keras-seq serve` on 127.0.0.1: 1 vs 16 clients, req/s, "
        "p50/p99, batching, RSS")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--saved-model", help="an exported SavedModel (keras-seq export "
                     "saved-model)")
    src.add_argument("--run-dir", help="a `keras-seq train lm` run (exported first)")
    p.add_argument("--seconds", type=number(float, Range(0, 3600, low_open=True)), default=60.0,
                   help="measured time, split evenly over the client levels (default 60)")
    p.add_argument("--clients", type=number(int, Range(1, 256)), nargs="+", default=[1, 16],
                   help="concurrent clients per level (default 1 16)")
    p.add_argument("--k", type=number(int, AT_LEAST_1),
                   default=5, help="k of next_tokens (default 5)")
    p.add_argument("--max-batch-size", type=number(int, AT_LEAST_1),
                   default=32, help="the server's largest batch")
    p.add_argument("--batch-timeout-ms", type=number(float, NON_NEGATIVE), default=2.0,
                   help="the server waits this long to fill a batch")
    p.add_argument("--num-batch-threads", type=number(int, AT_LEAST_1),
                   default=2, help="the server's batch threads")
    p.add_argument("--eager-batching", action=argparse.BooleanOptionalAction, default=False,
                   help="serve with --eager-batching")
    p.add_argument("--warmup", type=number(float, NON_NEGATIVE),
                   default=2.0, help="untimed seconds first")
    add_json_arg(p)
    p.set_defaults(func=run_serve)


def run_serve(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    import json
    import sys

    from keras_seq.commands._common import check_run_arg

    if args.run_dir:
        check_run_arg(args.run_dir, "lm")
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.serve import format_report, run_serve_benchmark

    if not 0 < args.seconds <= 3600:
        raise ValueError(f"--seconds must be in (0, 3600], got {args.seconds}")
    if min(args.clients) < 1 or max(args.clients) > 256:
        raise ValueError(f"--clients must be between 1 and 256, got {args.clients}")
    printer = lambda msg: print(msg, file=sys.stderr, flush=True)
    report = run_serve_benchmark(
        saved_model=args.saved_model, run_dir=args.run_dir, seconds=args.seconds,
        clients=tuple(args.clients), k=args.k, max_batch_size=args.max_batch_size,
        batch_timeout_ms=args.batch_timeout_ms, num_batch_threads=args.num_batch_threads,
        warmup_s=args.warmup, eager_batching=args.eager_batching, printer=printer)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(format_report(report))
    return 0
