"""``keras-seq export saved-model|tflite|seq2seq|classifier|tagger|web``: SavedModel
signatures, TFLite variants (``classifier --tflite``: the streaming step model) and the
browser site (``web``: LiteRT.js, no TensorFlow needed)."""

from __future__ import annotations

import argparse
import functools

from keras_seq.commands._common import add_json_arg, check_run_arg, number, print_json
from keras_seq.ranges import AT_LEAST_1

_VARIANTS = ("float32", "float16", "dynamic", "int8", "int16x8")
# step graphs only: 4- and 8-bit weights with the tied table stored once (ai-edge-quantizer)
_SHARED_TABLE_VARIANTS = ("int4", "dynamic_shared")
_GRAPHS = ("step", "step_fused", "sequence", "sequence_fused")
_STEP_VARIANTS = ("float32", "float16", "dynamic")


def _needs_tensorflow(command, kind: str):
    """``command`` after checking that ``--run-dir`` holds a ``kind`` run and that
    TensorFlow is installed and is Keras's backend (export traces TensorFlow graphs; a run
    trained under any backend loads there)."""
    @functools.wraps(command)
    def run(args):
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.backend import require_tensorflow_backend

        check_run_arg(args.run_dir, kind)
        require_tensorflow_backend("export")
        return command(args)
    return run


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "export", help="export a trained model: SavedModel, TFLite, seq2seq, classifier, "
        "tagger")
    sub = parser.add_subparsers(dest="export_command", metavar="FORMAT")
    parser.set_defaults(func=lambda args: parser.print_help() or 2)

    p = sub.add_parser("saved-model", help="SavedModel with score / next_tokens / generate / "
                       "step serving signatures (raw text in)")
    p.add_argument("--run-dir", required=True, help="a `keras-seq train lm` run directory")
    p.add_argument("--out", required=True, help="SavedModel folder to write")
    p.set_defaults(func=_needs_tensorflow(run_saved_model, "lm"))

    p = sub.add_parser("tflite", help="streaming step models (+ fused LSTM) and scoring "
                       "models in float32/float16/dynamic/int8/int16x8, with parity checks")
    p.add_argument("--run-dir", required=True, help="the lm run to export")
    p.add_argument("--out", required=True, help="folder for the .tflite files")
    p.add_argument("--variants", nargs="+", default=list(_VARIANTS),
                   choices=_VARIANTS + _SHARED_TABLE_VARIANTS,
                   help="TFLite weight/activation types written (int4 and dynamic_shared: "
                   "step graphs, the tied table stored once)")
    p.add_argument("--graphs", nargs="+", default=list(_GRAPHS), choices=_GRAPHS,
                   help="which graphs (fused ones only for plain LSTMs)")
    p.add_argument("--seq-length", type=number(int, AT_LEAST_1),
                   default=32, help="window of the sequence models")
    p.add_argument("--calib-tokens", type=number(int, AT_LEAST_1), default=200,
                   help="training tokens that calibrate int8/int16x8")
    p.add_argument("--parity", action=argparse.BooleanOptionalAction, default=True,
                   help="compare every variant with Keras (--no-parity skips it)")
    add_json_arg(p)
    p.set_defaults(func=_needs_tensorflow(run_tflite, "lm"))

    p = sub.add_parser("seq2seq", help="a seq2seq run as a SavedModel whose serving_default "
                       "signature maps strings to strings (greedy)")
    p.add_argument("--run-dir", required=True, help="a `keras-seq train seq2seq` run directory")
    p.add_argument("--out", required=True, help="SavedModel folder to write")
    p.set_defaults(func=_needs_tensorflow(run_seq2seq, "seq2seq"))

    p = sub.add_parser("classifier", help="a classify run as a SavedModel whose classify / "
                       "serving_default signature maps texts to labels sorted by score "
                       "(TF Serving's Classify shape); --tflite adds the streaming step model")
    p.add_argument("--run-dir", required=True, help="a `keras-seq train classify` run "
                   "directory")
    p.add_argument("--out", required=True, help="SavedModel folder to write")
    p.add_argument("--tflite", nargs="?", const="", default=None, metavar="DIR",
                   help="also export the streaming TFLite step model (token + state in, "
                   "label scores + state out) to DIR (default OUT/tflite); needs a "
                   "unidirectional pooling=last classifier")
    p.add_argument("--variants", nargs="+", default=["float32", "dynamic"],
                   choices=_STEP_VARIANTS, help="TFLite variants (with --tflite)")
    p.add_argument("--parity", action=argparse.BooleanOptionalAction, default=True,
                   help="compare TFLite with Keras (--no-parity skips it)")
    add_json_arg(p)
    p.set_defaults(func=_needs_tensorflow(run_classifier, "classify"))

    p = sub.add_parser("tagger", help="a tag run as a SavedModel whose tag / serving_default "
                       "signature maps whitespace-separated words to one tag each")
    p.add_argument("--run-dir", required=True, help="a `keras-seq train tag` run directory")
    p.add_argument("--out", required=True, help="SavedModel folder to write")
    p.set_defaults(func=_needs_tensorflow(run_tagger, "tag"))

    p = sub.add_parser("web", help="a static site that runs step models in a browser on "
                       "LiteRT.js: suggestions as you type, generation, per-token latency")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--tflite-dir", default=None, help="an export folder: every "
                        "step_*.tflite in it goes on the page")
    source.add_argument("--model", nargs="+", default=None, metavar="M.tflite",
                        help="these step models (their .json and tokenizer.json next to them)")
    p.add_argument("--out", required=True, help="folder for the site")
    p.add_argument("--default", default=None, metavar="NAME",
                   help="the model the page opens with (a file stem such as step_dynamic; "
                   "default: step_dynamic when present, else the first)")
    p.add_argument("--litert-js", default=None, metavar="DIR",
                   help="a node_modules/@litertjs folder (default: the one `make web-deps` "
                   "installs in keras_seq/web)")
    p.add_argument("--top", type=number(int, AT_LEAST_1),
                   default=3, help="suggestions shown (1-10, default 3)")
    add_json_arg(p)
    p.set_defaults(func=run_web)


def run_web(args) -> int:
    # lazy: keeps `keras-seq --help` fast
    from pathlib import Path

    from keras_seq.export.web import export_web, step_models

    models = step_models(args.tflite_dir) if args.tflite_dir else [Path(m) for m in args.model]
    default = args.default
    if default is None and any(m.stem == "step_dynamic" for m in models):
        default = "step_dynamic"
    site = export_web(models, args.out, default=default, litert_js=args.litert_js,
                      top=args.top)
    if args.json:
        print_json(site)
    else:
        print(f"wrote the site to {args.out}: {len(site['models'])} model(s), opens with "
              f"{site['default']}. Serve it: keras-seq demo --web --site {args.out}")
    return 0


def run_classifier(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras, TensorFlow)
    import sys
    from pathlib import Path

    from keras_seq.export.classifier_tagger import (
        check_streamable,
        export_classifier,
        export_classifier_tflite,
    )
    from keras_seq.tasks.classify.task import load_run

    printer = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    config, tokenizer, labels, model = load_run(args.run_dir)
    if args.tflite is not None:
        check_streamable(model)  # refuse before writing anything
    out = export_classifier(args.run_dir, args.out, printer=printer, model=model,
                            tokenizer=tokenizer, labels=labels, max_len=config.max_len)
    result = {"saved_model": str(out)}
    if args.tflite is not None:
        tflite_dir = Path(args.tflite) if args.tflite else Path(out) / "tflite"
        result["tflite"] = export_classifier_tflite(
            args.run_dir, tflite_dir, variants=args.variants, check_parity=args.parity,
            printer=printer, model=model, tokenizer=tokenizer, labels=labels, config=config)
        result["tflite_dir"] = str(tflite_dir)
        printer(f"wrote the streaming step model(s) to {tflite_dir} (manifest.json lists "
                "sizes, ops and parity)")
    if args.json:
        print_json(result)
    return 0


def run_tagger(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras, TensorFlow)
    from keras_seq.export.classifier_tagger import export_tagger

    export_tagger(args.run_dir, args.out)
    return 0


def run_seq2seq(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads TensorFlow)
    from keras_seq.tasks.seq2seq.export import export_run

    path = export_run(args.run_dir, args.out)
    print(f"wrote SavedModel {path}")
    return 0


def run_saved_model(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras, TensorFlow)
    from keras_seq.export.saved_model import export_saved_model

    export_saved_model(args.run_dir, args.out)
    return 0


def run_tflite(args) -> int:
    # lazy: keeps `keras-seq --help` fast (loads Keras, TensorFlow)
    import sys

    from keras_seq.export.tflite import export_tflite

    printer = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    manifest = export_tflite(args.run_dir, args.out, variants=args.variants,
                             graphs=args.graphs, seq_length=args.seq_length,
                             calib_tokens=args.calib_tokens, check_parity=args.parity,
                             printer=printer)
    if args.json:
        print_json(manifest)
    else:
        print(f"wrote {len([m for m in manifest['models'] if 'error' not in m])} model(s) to "
              f"{args.out} (manifest.json lists sizes, ops and parity)")
    return 0
