"""``keras-seq bench lm``: RNN vs GRU vs LSTM language models (equal parameters and time) vs KN;
with ``--speed``, the training speed of that workload, keras-seq's layers vs Keras's."""

from __future__ import annotations

import sys

from keras_seq.cells import mirrored_cells
from keras_seq.commands._bench import BenchCommand, Group, Option
from keras_seq.commands._common import (
    add_config_args,
    add_keyboard_args,
    comma_list,
    number,
)
from keras_seq.commands.bench_cells import backend_options
from keras_seq.errors import KerasSeqError
from keras_seq.ranges import AT_LEAST_1, FRACTION, NGRAM_ORDER, NON_NEGATIVE, POSITIVE, SEED, SHARE
from keras_seq.tasks.lm.config import LMConfig

# LMConfig fields the shared flags set; unset ones keep LMConfig's defaults.
LM_OPTIONS = ("variational_dropout", "embed_dropout", "weight_dropout", "lr_decay", "decay_start",
              "state_reset_prob")

#: what --cells offers and compares by default: the feed-forward NPLM and every cell with a
#: Keras built-in (keras_seq.benchmarks.lm.LM_MODELS, which loads Keras, says the same)
LM_MODELS = ("nplm", *mirrored_cells())


def options() -> list:
    return [
        Option("--out", None, "runs/bench-lm", "folder for the run directories"),
        Option("--data", None, "tinyshakespeare",
               "corpus: a registry name or a .txt file or folder"),
        Option("--split-ratio", None, "90/10",
               "train/val/test shares of the corpus (90/10: nanoGPT's)"),
        Option("--tokenizer", None, "word", "tokenizer of every model",
               choices=("word", "char", "subword")),
        Option("--min-count", number(int, AT_LEAST_1), 2,
               "word vocabulary cut-off; 2 puts <unk> in training (1 leaves it unseen)"),
        Option("--cells", comma_list(LM_MODELS), ",".join(LM_MODELS),
               "comma-separated: nplm (feed-forward), rnn, gru, lstm"),
        Option("--nplm-context", number(int, AT_LEAST_1), 4, "tokens the nplm row reads"),
        Option("--nplm-orders", None, "",
               "also sweep the NPLM order against KN's, e.g. 2,3,4,5,6,7,8"),
        Option("--minutes", number(float, POSITIVE), 60.0, "training budget per model"),
        Option("--budget", number(int, AT_LEAST_1), None,
               "parameter budget (default: the LSTM with units = embed dim)"),
        Option("--embed-dim", number(int, AT_LEAST_1), 256, "embedding size"),
        Option("--num-layers", number(int, AT_LEAST_1), 2, "stacked recurrent layers"),
        Option("--dropout", number(float, FRACTION), 0.5),
        Option("--bptt", number(int, AT_LEAST_1), 35, "truncation length τ"),
        Option("--batch-size", number(int, AT_LEAST_1), 20, "token streams per batch"),
        Option("--lr", number(float, POSITIVE), 2e-3, "Adam learning rate"),
        Option("--tie-weights", None, False, "share the embedding with the output layer"),
        # the AWD-LSTM and PTB-decay fields
        lambda p: add_config_args(p, LMConfig, only=LM_OPTIONS[:-1]),
        Option("--state-reset-prob", number(float, SHARE), 0.02,
               "chance that a stream row's state is zeroed before a batch, so each model "
               "keeps meeting the zero state validation starts from (default 0.02; 0 turns "
               "it off)"),
        Option("--kn-order", number(int, NGRAM_ORDER), 5, "order of the Kneser-Ney baseline"),
        add_keyboard_args,
        Option("--max-steps-per-epoch", number(int, AT_LEAST_1), None, "for smoke tests"),
        Option("--seed", number(int, SEED), 1234, "seed of every model's run"),
        *backend_options(),
        Group("speed", "--speed: keras-seq's layers vs Keras's built-ins on this workload "
              "(same models, data, backend, device, precision and XLA; no training runs, no "
              "KN)",
              Option("--speed", None, False,
                     "measure training tokens/s of keras-seq vs the built-in for each of "
                     "--cells (rnn, gru, lstm; all three unless --cells names some)"),
              Option("--steps", number(int, AT_LEAST_1), 20, "timed train steps per run"),
              Option("--repeats", number(int, AT_LEAST_1), 5, "runs (alternating turns)"),
              Option("--warmup", number(int, NON_NEGATIVE), 2, "untimed steps per model"),
              Option("--chunk", number(int, AT_LEAST_1), 5, "steps per turn")),
        Group("scaling", "--strategy: tokens/s of `train lm` on tf.distribute (TensorFlow)",
              Option("--strategy", comma_list(("one", "mirrored", "multi-worker")),
                     metavar="LIST",
                     help="comma list of one, mirrored, multi-worker: time `train lm` on one "
                          "device, 2 replicas, 1 and 2 localhost workers"),
              Option("--rounds", number(int, AT_LEAST_1), 2,
                     "--strategy: alternated runs per setting (default 2)")),
    ]


def check_keyboard(args) -> None:
    if args.keyboard and args.tokenizer != "word" and not (
            args.strategy or args.speed or args.quick):
        raise KerasSeqError(f"--keyboard rates next words; --tokenizer {args.tokenizer} has "
                            "none: use --tokenizer word or --no-keyboard")


def run_lm(args):
    if args.strategy:
        return run_lm_scaling(args)
    if args.speed or args.quick:
        return run_lm_speed(args)
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.benchmarks.lm import format_bench, run_bench

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
    return out, format_bench


def run_lm_speed(args):
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.benchmarks.lm import SPEED_CELLS, format_speed, run_speed

    cells = tuple(c.strip() for c in args.cells.split(",") if c.strip())
    if args.cells == ",".join(LM_MODELS):  # the default: every cell with a built-in
        cells = SPEED_CELLS
    sizes = dict(embed_dim=args.embed_dim, num_layers=args.num_layers, bptt=args.bptt,
                 batch_size=args.batch_size, budget=args.budget)
    counts = dict(steps=args.steps, repeats=args.repeats, warmup=args.warmup, chunk=args.chunk)
    if args.quick:
        sizes = dict(embed_dim=8, num_layers=1, bptt=5, batch_size=4, budget=None)
        counts = dict(steps=2, repeats=1, warmup=1, chunk=1)
    options = {name: getattr(args, name) for name in LM_OPTIONS
               if name != "state_reset_prob" and getattr(args, name) is not None}
    out = run_speed(
        data=args.data, split_ratio=args.split_ratio, tokenizer=args.tokenizer,
        min_count=args.min_count, cells=cells, dropout=args.dropout, lr=args.lr,
        tie_weights=args.tie_weights, backend=args.backend, device=args.device,
        mixed_precision=args.mixed_precision, jit_compile=args.jit_compile,
        **sizes, **counts, **options,
    )
    return out, format_speed


def run_lm_scaling(args):
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.benchmarks.scaling import format_scaling, run_scaling

    strategies = [x.strip() for x in args.strategy.split(",") if x.strip()]
    recurrent = [c.strip() for c in args.cells.split(",") if c.strip() in mirrored_cells()]
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
    return out, format_scaling


register = BenchCommand(
    "lm", "RNN/GRU/LSTM LMs at equal parameter budget and wall time, vs Kneser-Ney", run_lm,
    options, check=check_keyboard,
    quick="smoke test of --speed (implies it): 2 steps, 1 run, a tiny one-layer model").register
