"""``keras-seq bench softmax``: training tokens/s and exact perplexity of the same LSTM LM
with a full softmax and with an adaptive softmax (Grave et al. 2017), same data and steps."""

from __future__ import annotations

from keras_seq.commands._bench import BenchCommand, Option
from keras_seq.commands._common import comma_list, number
from keras_seq.ranges import AT_LEAST_1, NON_NEGATIVE, POSITIVE

VARIANTS = ("full", "adaptive", "adaptive-gather")

OPTIONS = (
    Option("--data", None, "tinyshakespeare", "corpus: a registry name or a .txt file or folder"),
    Option("--max-vocab", number(int, AT_LEAST_1), 10_000,
           "largest word vocabulary, specials included (V)"),
    Option("--min-count", number(int, AT_LEAST_1), 1,
           "keep words seen at least this often in train"),
    Option("--cutoffs", None, "2000,6000",
           "adaptive cluster boundaries (below V), e.g. 2000,10000 for V = 50k"),
    Option("--div-value", number(float, POSITIVE), 4.0,
           "tail cluster i projects to units // div_value^(i+1)"),
    Option("--variants", comma_list(VARIANTS), ",".join(VARIANTS),
           "comma list of full, adaptive (static-shape loss), adaptive-gather (dynamic-shape "
           "loss; not on JAX)"),
    Option("--steps", number(int, AT_LEAST_1), 100, "timed train steps per variant"),
    Option("--chunk", number(int, AT_LEAST_1), 10,
           "steps per turn; variants take turns, the order reversed each round"),
    Option("--warmup", number(int, NON_NEGATIVE), 2, "untimed first steps per variant"),
    Option("--units", number(int, AT_LEAST_1), 256, "LSTM units"),
    Option("--embed-dim", number(int, AT_LEAST_1), 256, "embedding size"),
    Option("--batch-size", number(int, AT_LEAST_1), 20, "token streams per batch"),
    Option("--bptt", number(int, AT_LEAST_1), 35, "truncation length τ"),
    Option("--eval-tokens", number(int, AT_LEAST_1), 20_000,
           "val tokens scored exactly (full log-probs) after training"),
)


def cutoffs(args) -> list[int]:
    try:
        return [int(c) for c in args.cutoffs.split(",") if c.strip()]
    except ValueError:
        raise ValueError(f"--cutoffs must be comma-separated integers such as 2000,10000, "
                         f"got {args.cutoffs!r}") from None


def run_softmax(args):
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.benchmarks.softmax import format_table, plot, run_softmax_bench

    variants = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    result = run_softmax_bench(
        args.data, max_vocab=args.max_vocab, cutoffs=cutoffs(args), div_value=args.div_value,
        variants=variants, steps=args.steps, chunk=args.chunk, warmup=args.warmup,
        units=args.units, embed_dim=args.embed_dim, batch_size=args.batch_size,
        bptt=args.bptt, eval_tokens=args.eval_tokens, min_count=args.min_count)
    if args.plot:
        plot(result, args.plot)
    return result, format_table


register = BenchCommand(
    "softmax", "full vs adaptive softmax: train tokens/s (alternated turns, median and range) "
    "and exact val PPL after the same steps", run_softmax, OPTIONS, check=cutoffs,
    plot=True).register
