"""``keras-seq demo --model M.tflite``: next-word suggestions and streaming generation on
LiteRT. This command path never imports TensorFlow."""

from __future__ import annotations


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo", help="on-device demo: top-3 next words as you type, streaming generation "
        "with per-token latency (LiteRT only, no TensorFlow)")
    p.add_argument("--model", required=True, help="an exported step_*.tflite (its .json and "
                   "tokenizer.json next to it)")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json (default: next to model)")
    p.add_argument("--threads", type=int, default=1, help="interpreter threads")
    p.add_argument("--top", type=int, default=3, help="suggestions shown (default 3)")
    p.add_argument("--max-tokens", type=int, default=20,
                   help="tokens /gen writes when the request does not say")
    p.add_argument("--top-k", type=int, default=10,
                   help="generation samples among the k likeliest tokens")
    p.add_argument("--temperature", type=float, default=1.0,
                   help="divide the logits by this before sampling")
    p.add_argument("--seed", type=int, default=0, help="random seed of the sampler")
    p.add_argument("--lines", action="store_true",
                   help="read whole lines even in a terminal (default there: one key at a time)")
    p.set_defaults(func=run_demo)


def run_demo(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.runtime.demo import run_demo

    return run_demo(args.model, tokenizer=args.tokenizer, threads=args.threads, top=args.top,
                    max_tokens=args.max_tokens, top_k=args.top_k,
                    temperature=args.temperature, seed=args.seed,
                    keys=False if args.lines else None)
