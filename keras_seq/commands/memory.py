"""``keras-seq memory`` and ``keras-seq gradients``: the memory-length sweep and the
gradient diagnostics on their own (``keras-seq report`` runs them too)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from keras_seq.cells import mirrored_cells
from keras_seq.commands._common import add_json_arg, number
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE, POSITIVE, SEED


def add_memory_args(p) -> None:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.analysis.memory import DISTANCES, MEMORY_CELLS
    from keras_seq.data.probes import TASKS

    p.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS,
                   help="synthetic tasks run")
    p.add_argument("--cells", nargs="+", default=list(MEMORY_CELLS), choices=MEMORY_CELLS,
                   help="cells compared")
    p.add_argument("--distances", nargs="+", type=number(int, AT_LEAST_1),
                   default=list(DISTANCES), metavar="D",
                   help=f"distances to sweep (default {' '.join(map(str, DISTANCES))})")
    p.add_argument("--steps", type=number(int, AT_LEAST_1),
                   default=1000, help="training budget per run (steps)")
    p.add_argument("--batch", type=number(int, AT_LEAST_1),
                   default=64, help="sequences per training batch")
    p.add_argument("--units", type=number(int, AT_LEAST_1), default=64, help="recurrent units")
    p.add_argument("--lr", type=number(float, POSITIVE), default=1e-2, help="Adam learning rate")
    p.add_argument("--eval-every", type=number(int, NON_NEGATIVE), default=100,
                   help="validate every N steps and stop once solved (0: never)")
    p.add_argument("--num-eval", type=number(int, AT_LEAST_1),
                   default=1000, help="validation/test sequences")
    p.add_argument("--stop-after-failures", type=number(int, NON_NEGATIVE), default=2,
                   help="skip a cell's longer distances after N consecutive failures (0: never)")
    p.add_argument("--max-minutes", type=number(float, POSITIVE), default=None,
                   help="skip the runs not started within this wall time (lower bounds)")
    p.add_argument("--seed", type=number(int, SEED),
                   default=0, help="random seed of data and weights")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write memory.json and memory.png here")
    add_json_arg(p)
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="show a progress bar")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "memory",
        help="effective memory length of RNN/GRU/LSTM/attention-GRU on the adding, copy and "
        "distant-negation tasks",
    )
    add_memory_args(p)
    p.set_defaults(func=run_memory)

    g = subparsers.add_parser(
        "gradients",
        help="‖∂L_T/∂h_k‖ against distance T−k for each cell, W_hh spectra and bounds; "
        "optionally the exploding-gradient / clipping experiment",
    )
    g.add_argument("--cells", nargs="+", default=list(mirrored_cells()),
                   choices=mirrored_cells(), help="cells measured")
    g.add_argument("--data", default="python-docs", metavar="NAME|PATH",
                   help="corpus the sequences come from")
    g.add_argument("--tokenizer", default="word", choices=("char", "word"),
                   help="tokenizer of the corpus")
    g.add_argument("--seq-len", type=number(int, AT_LEAST_1), default=80,
                   help="tokens per sequence (the largest distance)")
    g.add_argument("--batch", type=number(int, AT_LEAST_1),
                   default=64, help="sequences averaged over")
    g.add_argument("--units", type=number(int, AT_LEAST_1), default=128, help="recurrent units")
    g.add_argument("--embed-dim", type=number(int, AT_LEAST_1), default=64, help="embedding size")
    g.add_argument("--train-steps", type=number(int, NON_NEGATIVE), default=300,
                   help="also measure after this many training steps (0: initialisation only)")
    g.add_argument("--clipping", action=argparse.BooleanOptionalAction, default=False,
                   help="run the exploding-gradient experiment instead")
    g.add_argument("--scale", type=number(float, POSITIVE), default=1.5,
                   help="clipping: recurrent init = scale × orthogonal")
    g.add_argument("--clip-norm", type=number(float, POSITIVE),
                   default=1.0, help="clipping: threshold θ")
    g.add_argument("--lr", type=number(float, POSITIVE),
                   default=2.0, help="clipping: SGD learning rate")
    g.add_argument("--steps", type=number(int, AT_LEAST_1),
                   default=300, help="clipping: training steps")
    g.add_argument("--seed", type=number(int, SEED),
                   default=0, help="random seed of data and weights")
    g.add_argument("--out", default=None, metavar="DIR", help="write JSON and PNG here")
    add_json_arg(g)
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="show a progress bar")
    g.set_defaults(func=run_gradients)


def _emit(args, payload, rows, name, plot_fn):
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.commands._common import print_json, print_table

    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{name}.json").write_text(json.dumps(payload, indent=1, default=str))
        plot_fn(payload, str(out / f"{name}.png"))
    if args.json:
        print_json(payload)
    else:
        print_table(rows)
        if args.out:
            print(f"wrote {Path(args.out) / (name + '.png')} and {name}.json")


def run_memory(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.analysis import memory as M

    printer = (lambda s: print(s, file=sys.stderr)) if args.json else print
    result = M.memory_sweep(tasks=args.tasks, cells=args.cells, distances=args.distances,
                            steps=args.steps, batch=args.batch, units=args.units, lr=args.lr,
                            eval_every=args.eval_every, num_eval=args.num_eval, seed=args.seed,
                            stop_after_failures=args.stop_after_failures or None,
                            max_minutes=args.max_minutes,
                            progress=args.progress and not args.json, printer=printer)
    _emit(args, result, M.memory_table(result), "memory", M.plot_memory)
    return 0


def run_gradients(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.analysis import gradients as G

    if args.clipping:
        result = G.clipping_experiment(scale=args.scale, clip_norm=args.clip_norm,
                                       steps=args.steps, data=args.data, lr=args.lr,
                                       seed=args.seed, progress=args.progress and not args.json)
        _emit(args, result, G.clipping_table(result), "clipping", G.plot_clipping)
        return 0
    result = G.measure_gradients(cells=args.cells, data=args.data, tokenizer=args.tokenizer,
                                 seq_len=args.seq_len, batch=args.batch, units=args.units,
                                 embed_dim=args.embed_dim, train_steps=args.train_steps,
                                 seed=args.seed, progress=args.progress and not args.json)
    _emit(args, result, G.decay_table(result), "gradient_decay", G.plot_gradient_decay)
    return 0
