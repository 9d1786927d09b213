"""``keras-seq demo --model M.tflite``: next-word suggestions and streaming generation on
LiteRT in the terminal; ``keras-seq demo --web --site SITE``: the same in a browser, on
LiteRT.js, served on 127.0.0.1. This command path never imports TensorFlow."""

from __future__ import annotations

import argparse

from keras_seq.commands._common import number
from keras_seq.ranges import AT_LEAST_1, PORT, POSITIVE, SEED


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo", help="on-device demo: top-3 next words as you type, streaming generation "
        "with per-token latency (LiteRT only, no TensorFlow)")
    p.add_argument("--model", default=None, help="an exported step_*.tflite (its .json and "
                   "tokenizer.json next to it); with --web, the site is made from it")
    p.add_argument("--web", action=argparse.BooleanOptionalAction, default=False,
                   help="serve the browser demo (a `keras-seq export web` site) and print its "
                   "URL instead of running in the terminal")
    p.add_argument("--site", default=None, help="with --web: the site folder to serve")
    p.add_argument("--host", default="127.0.0.1", help="with --web: address to listen on")
    p.add_argument("--port", type=number(int, PORT),
                   default=8000, help="with --web: TCP port (0: any free)")
    p.add_argument("--mix", default=None, metavar="MIX.json",
                   help="mix the model with an n-gram and a cache of what you type (the "
                   "pipeline's demo/mix.json, its n-gram beside it)")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json (default: next to model)")
    p.add_argument("--threads", type=number(int, AT_LEAST_1), default=1, help="interpreter threads")
    p.add_argument("--top", type=number(int, AT_LEAST_1),
                   default=3, help="suggestions shown (default 3)")
    p.add_argument("--max-tokens", type=number(int, AT_LEAST_1), default=20,
                   help="tokens /gen writes when the request does not say")
    p.add_argument("--top-k", type=number(int, AT_LEAST_1), default=10,
                   help="generation samples among the k likeliest tokens")
    p.add_argument("--temperature", type=number(float, POSITIVE), default=1.0,
                   help="divide the logits by this before sampling")
    p.add_argument("--seed", type=number(int, SEED), default=0, help="random seed of the sampler")
    p.add_argument("--lines", action=argparse.BooleanOptionalAction, default=False,
                   help="read whole lines even in a terminal (else there: one key at a time)")
    p.set_defaults(func=run_demo)


def run_demo(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.errors import KerasSeqError
    from keras_seq.runtime.demo import run_demo

    if args.web:
        return run_web_demo(args)
    if args.site is not None:
        raise KerasSeqError("--site is the folder `demo --web` serves; add --web, or pass "
                            "--model M.tflite for the terminal demo")
    if args.model is None:
        raise KerasSeqError("pass --model M.tflite (the terminal demo) or --web --site SITE "
                            "(the browser demo)")

    return run_demo(args.model, tokenizer=args.tokenizer, threads=args.threads, top=args.top,
                    mix=args.mix,
                    max_tokens=args.max_tokens, top_k=args.top_k,
                    temperature=args.temperature, seed=args.seed,
                    keys=False if args.lines else None)


def run_web_demo(args) -> int:
    """Serve the site until Ctrl-C (made first from --model into a temporary folder)."""
    # lazy: keeps `keras-seq --help` fast
    import tempfile
    from pathlib import Path

    from keras_seq.errors import KerasSeqError
    from keras_seq.export.web import export_web
    from keras_seq.runtime.web_server import SiteServer

    if (args.site is None) == (args.model is None):
        raise KerasSeqError("--web needs exactly one of --site SITE (a `keras-seq export web` "
                            "folder) or --model M.tflite (a site is made from it)")
    if args.site is not None and args.mix is not None:
        raise KerasSeqError("--mix goes with --web --model M.tflite (the site is made with "
                            "it); a --site made by `keras-seq export web --mix` mixes already")
    with tempfile.TemporaryDirectory(prefix="keras-seq-web-") as scratch:
        site = args.site
        if site is None:
            site = Path(scratch) / "site"
            export_web([args.model], site, top=args.top, mix=args.mix)
        server = SiteServer(site, host=args.host, port=args.port)
        print(f"keras-seq browser demo: open {server.url} (serving {site}; Ctrl-C stops)",
              flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped")
        finally:
            server.close()
    return 0
