"""``keras-seq bench serve``: loopback load test of the REST server (1 vs 16 clients on
next_tokens): requests/s, p50/p99 latency, mean batch size, server RSS."""

from __future__ import annotations

import sys

from keras_seq.commands._bench import BenchCommand, Group, Option
from keras_seq.commands._common import check_run_arg, number
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE, Range

OPTIONS = (
    Group(None, None,
          Option("--saved-model", help="an exported SavedModel (keras-seq export saved-model)"),
          Option("--run-dir", help="a `keras-seq train lm` run (exported first)"),
          exclusive=True, required=True),
    Option("--seconds", number(float, Range(0, 3600, low_open=True)), 60.0,
           "measured time, split evenly over the client levels (default 60)"),
    Option("--clients", number(int, Range(1, 256)), [1, 16],
           "concurrent clients per level (default 1 16)", nargs="+"),
    Option("--k", number(int, AT_LEAST_1), 5, "k of next_tokens (default 5)"),
    Option("--max-batch-size", number(int, AT_LEAST_1), 32, "the server's largest batch"),
    Option("--batch-timeout-ms", number(float, NON_NEGATIVE), 2.0,
           "the server waits this long to fill a batch"),
    Option("--num-batch-threads", number(int, AT_LEAST_1), 2, "the server's batch threads"),
    Option("--eager-batching", None, False, "serve with --eager-batching"),
    Option("--warmup", number(float, NON_NEGATIVE), 2.0, "untimed seconds first"),
)


def run_serve(args):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.benchmarks.serve import format_report, run_serve_benchmark

    report = run_serve_benchmark(
        saved_model=args.saved_model, run_dir=args.run_dir, seconds=args.seconds,
        clients=tuple(args.clients), k=args.k, max_batch_size=args.max_batch_size,
        batch_timeout_ms=args.batch_timeout_ms, num_batch_threads=args.num_batch_threads,
        warmup_s=args.warmup, eager_batching=args.eager_batching,
        printer=lambda msg: print(msg, file=sys.stderr, flush=True))
    return report, format_report


register = BenchCommand(
    "serve", "load test `keras-seq serve` on 127.0.0.1: 1 vs 16 clients, req/s, p50/p99, "
    "batching, RSS", run_serve, OPTIONS,
    check=lambda args: args.run_dir and check_run_arg(args.run_dir, "lm")).register
