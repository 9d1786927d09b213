"""``keras-seq bench lm``: RNN vs GRU vs LSTM language models (equal parameters and time) vs KN;
with ``--speed``, the training speed of that workload, keras-seq's layers vs Keras's."""

from __future__ import annotations

import argparse
import sys

from keras_seq.commands._common import (
    add_config_args,
    add_json_arg,
    add_keyboard_args,
    comma_list,
    number,
    print_json,
)
from keras_seq.commands.bench_cells import add_backend_args
from keras_seq.errors import KerasSeqError
from keras_seq.ranges import AT_LEAST_1, FRACTION, NGRAM_ORDER, NON_NEGATIVE, POSITIVE, SEED, SHARE
from keras_seq.tasks.lm.config import LMConfig

# LMConfig fields the shared flags set; unset ones keep LMConfig's defaults.
LM_OPTIONS = ("variational_dropout", "embed_dropout", "weight_dropout", "lr_decay", "decay_start",
              "state_reset_prob")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "lm", help="RNN/GRU/LSTM LMs at equal parameter budget and wall time, vs Kneser-Ney")
    p.add_argument("--out", default="runs/bench-lm", help="folder for the run directories")
    p.add_argument("--data", default="tinyshakespeare",
                   help="corpus: a registry name or a .txt file or folder")
    p.add_argument("--split-ratio", default="90/10",
                   help="train/val/test shares of the corpus (90/10: nanoGPT's)")
    p.add_argument("--tokenizer", default="word", choices=("word", "char", "subword"),
                   help="tokenizer of every model")
    p.add_argument("--min-count", type=number(int, AT_LEAST_1), default=2,
                   help="word vocabulary cut-off; 2 puts <unk> in training (1 leaves it unseen)")
    p.add_argument("--cells", default="nplm,rnn,gru,lstm",
                   type=comma_list(("nplm", "rnn", "gru", "lstm")),
                   help="comma-separated: nplm (feed-forward), rnn, gru, lstm")
    p.add_argument("--nplm-context", type=number(int, AT_LEAST_1),
                   default=4, help="tokens the nplm row reads")
    p.add_argument("--nplm-orders", default="",
                   help="also sweep the NPLM order against KN's, e.g. 2,3,4,5,6,7,8")
    p.add_argument("--minutes", type=number(float, POSITIVE),
                   default=60.0, help="training budget per model")
    p.add_argument("--budget", type=number(int, AT_LEAST_1), default=None,
                   help="parameter budget (default: the LSTM with units = embed dim)")
    p.add_argument("--embed-dim", type=number(int, AT_LEAST_1), default=256, help="embedding size")
    p.add_argument("--num-layers", type=number(int, AT_LEAST_1),
                   default=2, help="stacked recurrent layers")
    p.add_argument("--dropout", type=number(float, FRACTION), default=0.5)
    p.add_argument("--bptt", type=number(int, AT_LEAST_1), default=35, help="truncation length τ")
    p.add_argument("--batch-size", type=number(int, AT_LEAST_1),
                   default=20, help="token streams per batch")
    p.add_argument("--lr", type=number(float, POSITIVE), default=2e-3, help="Adam learning rate")
    p.add_argument("--tie-weights", action=argparse.BooleanOptionalAction, default=False,
                   help="share the embedding with the output layer")
    add_config_args(p, LMConfig, only=LM_OPTIONS[:-1])  # the AWD-LSTM and PTB-decay fields
    p.add_argument("--state-reset-prob", type=number(float, SHARE), default=0.02,
                   help="chance that a stream row's state is zeroed before a batch, so each "
                        "model keeps meeting the zero state validation starts from "
                        "(default 0.02; 0 turns it off)")
    p.add_argument("--kn-order", type=number(int, NGRAM_ORDER),
                   default=5, help="order of the Kneser-Ney baseline")
    add_keyboard_args(p)
    p.add_argument("--max-steps-per-epoch", type=number(int, AT_LEAST_1),
                   default=None, help="for smoke tests")
    p.add_argument("--seed", type=number(int, SEED), default=1234, help="seed of every model's run")
    add_backend_args(p)
    speed = p.add_argument_group(
        "speed", "--speed: keras-seq's layers vs Keras's built-ins on this workload (same "
        "models, data, backend, device, precision and XLA; no training runs, no KN)")
    speed.add_argument("--speed", action=argparse.BooleanOptionalAction, default=False,
                       help="measure training tokens/s of keras-seq vs the built-in for "
                            "each of --cells (rnn, gru, lstm; all three unless --cells names some)")
    speed.add_argument("--steps", type=number(int, AT_LEAST_1),
                       default=20, help="timed train steps per run")
    speed.add_argument("--repeats", type=number(int, AT_LEAST_1),
                       default=5, help="runs (alternating turns)")
    speed.add_argument("--warmup", type=number(int, NON_NEGATIVE),
                       default=2, help="untimed steps per model")
    speed.add_argument("--chunk", type=number(int, AT_LEAST_1), default=5, help="steps per turn")
    speed.add_argument("--quick", action=argparse.BooleanOptionalAction, default=False,
                       help="smoke test of --speed (implies it): 2 steps, 1 run, a tiny one-layer "
                            "model")
    scaling = p.add_argument_group(
        "scaling", "--strategy: tokens/s of `train lm` on tf.distribute (TensorFlow)")
    scaling.add_argument("--strategy", default=None, metavar="LIST",
                         type=comma_list(("one", "mirrored", "multi-worker")),
                         help="comma list of one, mirrored, multi-worker: time `train lm` "
                              "on one device, 2 replicas, 1 and 2 localhost workers")
    scaling.add_argument("--rounds", type=number(int, AT_LEAST_1), default=2,
                         help="--strategy: alternated runs per setting (default 2)")
    add_json_arg(p)
    p.set_defaults(func=run_lm)


def run_lm(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.benchmarks.lm import format_bench, run_bench

    if args.strategy:
        return run_lm_scaling(args)
    if args.speed or args.quick:
        return run_lm_speed(args)
    if args.keyboard and args.tokenizer != "word":
        raise KerasSeqError(f"--keyboard rates next words; --tokenizer {args.tokenizer} has "
                            "none: use --tokenizer word or --no-keyboard")
    out = run_bench(
        args.out, data=args.data, split_ratio=args.split_ratio, tokenizer=args.tokenizer,
        min_count=args.min_count,
        cells=tuple(c.strip() for c in args.cells.split(",") if c.strip()),
        minutes=args.minutes, budget=args.budget, embed_dim=args.embed_dim,
        num_layers=args.num_layers, dropout=args.dropout, bptt=args.bptt,
        batch_size=args.batch_size, lr=args.lr, tie_weights=args.tie_weights,
        **{name: getattr(args, name) for name in LM_OPTIONS if getattr(args, name) is not None},
        kn_order=args.kn_order, max_steps_per_epoch=args.max_steps_per_epoch, seed=args.seed,
        suggestions=None if args.keyboard is False else args.suggestions,
        nplm_context=args.nplm_context,
        nplm_orders=tuple(int(n) for n in args.nplm_orders.split(",") if n.strip()),
        verbose=0 if args.json else 2,
        backend=args.backend, device=args.device, mixed_precision=args.mixed_precision,
        jit_compile=args.jit_compile,
    )
    if args.json:
        print_json(out)
    else:
        print(format_bench(out))
    return 0


def run_lm_speed(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    import contextlib
    import sys

    from keras_seq.benchmarks.lm import SPEED_CELLS, format_speed, run_speed

    cells = tuple(c.strip() for c in args.cells.split(",") if c.strip())
    if args.cells == "nplm,rnn,gru,lstm":  # the default: every cell with a built-in
        cells = SPEED_CELLS
    sizes = dict(embed_dim=args.embed_dim, num_layers=args.num_layers, bptt=args.bptt,
                 batch_size=args.batch_size, budget=args.budget)
    counts = dict(steps=args.steps, repeats=args.repeats, warmup=args.warmup, chunk=args.chunk)
    if args.quick:
        sizes = dict(embed_dim=8, num_layers=1, bptt=5, batch_size=4, budget=None)
        counts = dict(steps=2, repeats=1, warmup=1, chunk=1)
    options = {name: getattr(args, name) for name in LM_OPTIONS
               if name != "state_reset_prob" and getattr(args, name) is not None}
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        out = run_speed(
            data=args.data, split_ratio=args.split_ratio, tokenizer=args.tokenizer,
            min_count=args.min_count, cells=cells, dropout=args.dropout, lr=args.lr,
            tie_weights=args.tie_weights, backend=args.backend, device=args.device,
            mixed_precision=args.mixed_precision, jit_compile=args.jit_compile,
            **sizes, **counts, **options,
        )
    if args.json:
        print_json(out)
    else:
        print(format_speed(out))
    return 0


def run_lm_scaling(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.benchmarks.scaling import format_scaling, run_scaling

    strategies = [x.strip() for x in args.strategy.split(",") if x.strip()]
    recurrent = [c.strip() for c in args.cells.split(",") if c.strip() in ("rnn", "gru", "lstm")]
    cell = "lstm" if "lstm" in recurrent or not recurrent else recurrent[0]
    train_args = ["--data", args.data, "--split-ratio", args.split_ratio, "--tokenizer",
                  args.tokenizer, "--min-count", str(args.min_count), "--cell", cell,
                  "--embed-dim", str(args.embed_dim), "--units", str(args.embed_dim),
                  "--num-layers", str(args.num_layers), "--bptt", str(args.bptt),
                  "--batch-size", str(args.batch_size), "--dropout", str(args.dropout),
                  "--epochs", "1",
                  "--max-steps-per-epoch", str(args.max_steps_per_epoch or 100)]
    out = run_scaling(strategies, train_args, rounds=args.rounds,
                      progress=lambda line: print(line, file=sys.stderr))
    if args.json:
        print_json(out)
    else:
        print(format_scaling(out))
    return 0
