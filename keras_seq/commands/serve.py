"""``keras-seq serve``: a TF-Serving-compatible REST server for exported SavedModels.

    keras-seq export saved-model --run-dir runs/lstm --out exports/lstm
    keras-seq serve --model-base models --model-name lstm --publish exports/lstm  # → models/lstm/1
    keras-seq serve --model-base models            # serves every model under models/
    keras-seq export classifier --run-dir runs/clf --out exports/clf   # then :classify

The model base has TF Serving's layout (``MODEL_BASE/NAME/VERSION/saved_model.pb``); the
highest version of each model is served and new versions are picked up while running.
``POST …:predict`` runs any signature; ``POST …:classify`` (TF Serving's Classify API:
``{"examples": [{"inputs": "text"}]}`` → ``{"results": [[["label", score], …]]}``) answers
for classifier SavedModels.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from keras_seq.commands._common import number
from keras_seq.ranges import NON_NEGATIVE, PORT, POSITIVE


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="REST server with TF Serving's API (predict/classify/status/metadata), "
        "dynamic "
        "batching and limits")
    p.add_argument("--model-base", required=True, metavar="DIR",
                   help="TF Serving model base: DIR/NAME/VERSION/saved_model.pb")
    p.add_argument("--model-name", action="append", default=None, metavar="NAME",
                   help="serve this model (repeatable; default: every model folder in DIR)")
    p.add_argument("--publish", default=None, metavar="SAVED_MODEL",
                   help="copy this SavedModel into DIR/NAME/VERSION (one --model-name) and "
                   "exit; a running server picks it up")
    p.add_argument("--version", type=number(int, NON_NEGATIVE), default=None,
                   help="version number for --publish (default: the next one)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=number(int, PORT), default=8501, help="REST port (default 8501)")
    p.add_argument("--poll-interval", type=number(float, NON_NEGATIVE), default=1.0, metavar="S",
                   help="seconds between scans for new versions (0: never; default 1)")
    p.add_argument("--max-batch-size", type=number(int, POSITIVE), default=32,
                   help="most rows merged into one signature call (default 32)")
    p.add_argument("--batch-timeout-ms", type=number(float, NON_NEGATIVE), default=2.0,
                   help="how long a batch waits for more calls (default 2 ms; 0: no waiting)")
    p.add_argument("--num-batch-threads", type=number(int, POSITIVE), default=2,
                   help="worker threads running batches (default 2)")
    p.add_argument("--eager-batching", action=argparse.BooleanOptionalAction, default=False,
                   help="start a batch at once when no signature call is running (lower "
                   "latency for a lone client; measured to cost throughput under load). "
                   "Off: wait --batch-timeout-ms, as TF Serving does")
    p.add_argument("--batch-signatures", default="score,next_tokens,serving_default,classify,tag",
                   help="signatures whose calls are batched, comma-separated (not generate: "
                   "its samples depend on a row's place in the batch)")
    p.add_argument("--max-body-bytes", type=number(int, POSITIVE), default=1 << 20,
                   help="largest request body in bytes (1 MiB); larger → 413")
    p.add_argument("--max-instances", type=number(int, POSITIVE), default=64,
                   help="most rows per request (default 64)")
    p.add_argument("--max-text-length", type=number(int, POSITIVE), default=2000,
                   help="most characters per input text (default 2000)")
    p.add_argument("--max-generated-tokens", type=number(int, POSITIVE), default=256,
                   help="largest max_tokens of generate (default 256)")
    p.add_argument("--request-timeout", type=number(float, POSITIVE), default=30.0, metavar="S",
                   help="per-request deadline; over it → 504 (default 30 s)")
    p.add_argument("--token", default=None,
                   help="require 'Authorization: Bearer TOKEN' on /v1 (also "
                   "$KERAS_SEQ_SERVE_TOKEN)")
    p.add_argument("--graceful-timeout", type=number(float, NON_NEGATIVE), default=30.0,
                   metavar="S",
                   help="on SIGTERM/SIGINT, wait this long for in-flight requests (default 30)")
    p.add_argument("--read-timeout", type=number(float, POSITIVE), default=10.0, metavar="S",
                   help="a request's line, headers and body must arrive within S seconds, "
                   "else the connection is closed (default 10; guards against slow clients)")
    p.add_argument("--max-connections", type=number(int, POSITIVE), default=1000, metavar="N",
                   help="most open connections; past it the one waiting longest for its "
                   "request is closed (default 1000)")
    p.set_defaults(func=run_serve)


def run_serve(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.backend import require_tensorflow

    require_tensorflow("serving (SavedModels are loaded with TensorFlow)")
    if args.publish:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.serving.layout import publish_saved_model

        if not args.model_name or len(args.model_name) != 1:
            raise ValueError(f"--publish needs exactly one --model-name, got "
                             f"{len(args.model_name or [])}: the name to publish the "
                             "SavedModel under, e.g. --model-name lm")
        target = publish_saved_model(args.publish, args.model_base, args.model_name[0],
                                     args.version)
        print(f"published {args.publish} as {target}")
        return 0
    if args.version is not None:
        raise ValueError("--version only applies to --publish")
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.serving.layout import check_model_name

    for name in args.model_name or []:
        check_model_name(name)
    _check_model_base(args)
    # lazy: keeps `keras-seq --help` fast (loads FastAPI)
    from keras_seq.serving.app import ServeConfig, run_server
    from keras_seq.serving.codec import Limits

    config = ServeConfig(
        model_base=args.model_base, model_names=args.model_name, host=args.host,
        port=args.port, poll_interval=args.poll_interval, max_batch_size=args.max_batch_size,
        batch_timeout_ms=args.batch_timeout_ms, num_batch_threads=args.num_batch_threads,
        eager_batching=args.eager_batching,
        batch_signatures=tuple(s.strip() for s in args.batch_signatures.split(",") if s.strip()),
        max_body_bytes=args.max_body_bytes,
        limits=Limits(max_instances=args.max_instances, max_text_length=args.max_text_length,
                      max_generated_tokens=args.max_generated_tokens),
        request_timeout_s=args.request_timeout, token=args.token,
        graceful_timeout_s=args.graceful_timeout, read_timeout_s=args.read_timeout,
        max_connections=args.max_connections)
    run_server(config, printer=lambda msg: print(msg, flush=True))
    return 0


def _check_model_base(args) -> None:
    """Refuse a model base that is not a folder; warn, as TF Serving's log does, about each
    model that has no servable version yet (the server picks versions up as they appear)."""
    # lazy: keeps `keras-seq --help` fast
    from keras_seq.errors import KerasSeqError
    from keras_seq.serving.layout import discover_models, list_versions

    base = Path(args.model_base)
    if not base.is_dir():
        what, fix = ("is a file, not a folder", "pass the folder that holds the models") \
            if base.exists() else ("does not exist", "create it by publishing a model: keras-seq "
                                   f"serve --model-base {base} --model-name NAME --publish "
                                   "EXPORTED_SAVED_MODEL")
        raise KerasSeqError(f"--model-base {base} {what}; expected a folder laid out as TF "
                            f"Serving's DIR/NAME/VERSION/saved_model.pb; {fix}")
    names = args.model_name or discover_models(base)
    empty = [name for name in names if not list_versions(base / name)]
    if names and not empty:
        return
    if not args.poll_interval and len(empty) == len(names):
        raise KerasSeqError(f"nothing to serve under {base} (no NAME/VERSION/saved_model.pb) "
                            "and --poll-interval 0 never looks again; publish a model first "
                            "or drop --poll-interval 0")
    for name in empty:
        print(f"warning: no versions of servable {name} found under base path {base / name}; "
              "it is served once a version is published there", file=sys.stderr, flush=True)
    if not names:
        print(f"warning: no servable model found under base path {base} (expected "
              "NAME/VERSION/saved_model.pb); serving nothing until one is published "
              f"(`keras-seq serve --model-base {base} --model-name NAME --publish DIR`)",
              file=sys.stderr, flush=True)
