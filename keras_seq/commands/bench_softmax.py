"""``keras-seq bench softmax``: training tokens/s and exact perplexity of the same LSTM LM
with a full softmax and with an adaptive softmax (Grave et al. 2017), same data and steps."""

from __future__ import annotations

from keras_seq.commands._common import add_json_arg, comma_list, number, print_json
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE, POSITIVE

VARIANTS = ("full", "adaptive", "adaptive-gather")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "softmax", help="full vs adaptive softmax: train tokens/s (alternated turns, median "
        "and range) and exact val PPL after the same steps")
    p.add_argument("--data", default="tinyshakespeare",
                   help="corpus: a registry name or a .txt file or folder")
    p.add_argument("--max-vocab", type=number(int, AT_LEAST_1), default=10_000,
                   help="largest word vocabulary, specials included (V)")
    p.add_argument("--min-count", type=number(int, AT_LEAST_1), default=1,
                   help="keep words seen at least this often in train")
    p.add_argument("--cutoffs", default="2000,6000",
                   help="adaptive cluster boundaries (below V), e.g. 2000,10000 for V = 50k")
    p.add_argument("--div-value", type=number(float, POSITIVE), default=4.0,
                   help="tail cluster i projects to units // div_value^(i+1)")
    p.add_argument("--variants", default=",".join(VARIANTS), type=comma_list(VARIANTS),
                   help="comma list of full, adaptive (static-shape loss), adaptive-gather "
                        "(dynamic-shape loss; not on JAX)")
    p.add_argument("--steps", type=number(int, AT_LEAST_1),
                   default=100, help="timed train steps per variant")
    p.add_argument("--chunk", type=number(int, AT_LEAST_1), default=10,
                   help="steps per turn; variants take turns, the order reversed each round")
    p.add_argument("--warmup", type=number(int, NON_NEGATIVE),
                   default=2, help="untimed first steps per variant")
    p.add_argument("--units", type=number(int, AT_LEAST_1), default=256, help="LSTM units")
    p.add_argument("--embed-dim", type=number(int, AT_LEAST_1), default=256, help="embedding size")
    p.add_argument("--batch-size", type=number(int, AT_LEAST_1),
                   default=20, help="token streams per batch")
    p.add_argument("--bptt", type=number(int, AT_LEAST_1), default=35, help="truncation length τ")
    p.add_argument("--eval-tokens", type=number(int, AT_LEAST_1), default=20_000,
                   help="val tokens scored exactly (full log-probs) after training")
    p.add_argument("--plot", default=None, help="write a PNG bar chart here")
    add_json_arg(p)
    p.set_defaults(func=run_softmax)


def run_softmax(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    import contextlib
    import sys

    from keras_seq.benchmarks.softmax import format_table, plot, run_softmax_bench

    try:
        cutoffs = [int(c) for c in args.cutoffs.split(",") if c.strip()]
    except ValueError:
        raise ValueError(f"--cutoffs must be comma-separated integers such as 2000,10000, "
                         f"got {args.cutoffs!r}") from None
    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        result = run_softmax_bench(
            args.data, max_vocab=args.max_vocab, cutoffs=cutoffs, div_value=args.div_value,
            variants=variants, steps=args.steps, chunk=args.chunk, warmup=args.warmup,
            units=args.units, embed_dim=args.embed_dim, batch_size=args.batch_size,
            bptt=args.bptt, eval_tokens=args.eval_tokens, min_count=args.min_count)
        if args.plot:
            result["plot"] = str(plot(result, args.plot))
    if args.json:
        print_json(result)
    else:
        print(format_table(result))
        if args.plot:
            print(f"plot: {args.plot}")
    return 0
