"""``keras-seq bench lm``: RNN vs GRU vs LSTM language models (equal parameters and time) vs KN."""

from __future__ import annotations

from keras_seq.commands._common import add_json_arg, print_json
from keras_seq.commands.lm import add_lr_decay_args, add_regularizer_args

# LMConfig fields the shared flags set; unset ones keep LMConfig's defaults.
LM_OPTIONS = ("variational_dropout", "embed_dropout", "weight_dropout", "lr_decay", "decay_start",
              "state_reset_prob")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "lm", help="RNN/GRU/LSTM LMs at equal parameter budget and wall time, vs Kneser-Ney")
    p.add_argument("--out", default="runs/bench-lm", help="folder for the run directories")
    p.add_argument("--data", default="tinyshakespeare")
    p.add_argument("--split-ratio", default="90/10", help="nanoGPT's 90/10 by default")
    p.add_argument("--tokenizer", default="word", choices=("word", "char", "subword"))
    p.add_argument("--min-count", type=int, default=2,
                   help="word vocabulary cut-off; 2 puts <unk> in training (1 leaves it unseen)")
    p.add_argument("--cells", default="nplm,rnn,gru,lstm",
                   help="comma-separated: nplm (feed-forward), rnn, gru, lstm")
    p.add_argument("--nplm-context", type=int, default=4, help="tokens the nplm row reads")
    p.add_argument("--nplm-orders", default="",
                   help="also sweep the NPLM order against KN's, e.g. 2,3,4,5,6,7,8")
    p.add_argument("--minutes", type=float, default=60.0, help="training budget per model")
    p.add_argument("--budget", type=int, default=None,
                   help="parameter budget (default: the LSTM with units = embed dim)")
    p.add_argument("--embed-dim", type=int, default=256)
    p.add_argument("--num-layers", type=int, default=2)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--bptt", type=int, default=35)
    p.add_argument("--batch-size", type=int, default=20)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--tie-weights", action="store_true")
    add_regularizer_args(p)
    add_lr_decay_args(p)
    p.add_argument("--state-reset-prob", type=float, default=0.02,
                   help="chance that a stream row's state is zeroed before a batch, so each "
                        "model keeps meeting the zero state validation starts from "
                        "(default 0.02; 0 turns it off)")
    p.add_argument("--kn-order", type=int, default=5)
    p.add_argument("--max-steps-per-epoch", type=int, default=None, help="for smoke tests")
    add_json_arg(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from keras_seq.benchmarks.lm import format_bench, run_bench

    out = run_bench(
        args.out, data=args.data, split_ratio=args.split_ratio, tokenizer=args.tokenizer,
        min_count=args.min_count,
        cells=tuple(c.strip() for c in args.cells.split(",") if c.strip()),
        minutes=args.minutes, budget=args.budget, embed_dim=args.embed_dim,
        num_layers=args.num_layers, dropout=args.dropout, bptt=args.bptt,
        batch_size=args.batch_size, lr=args.lr, tie_weights=args.tie_weights,
        **{name: getattr(args, name) for name in LM_OPTIONS if getattr(args, name) is not None},
        kn_order=args.kn_order, max_steps_per_epoch=args.max_steps_per_epoch,
        nplm_context=args.nplm_context,
        nplm_orders=tuple(int(n) for n in args.nplm_orders.split(",") if n.strip()),
        verbose=0 if args.json else 2,
    )
    if args.json:
        print_json(out)
    else:
        print(format_bench(out))
    return 0
