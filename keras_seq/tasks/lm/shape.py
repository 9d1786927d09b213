"""The ``lm`` shape's protocol record (light: no TensorFlow): ``train lm``, ``eval lm``,
``generate`` and ``export saved-model|tflite|web``."""

from __future__ import annotations

import argparse

from keras_seq import runs
from keras_seq.keyboard import SUGGESTIONS, add_keyboard_args
from keras_seq.ranges import AT_LEAST_1, number
from keras_seq.tables import add_json_arg
from keras_seq.tasks.lm.config import PRESETS, LMConfig, preset
from keras_seq.tasks.protocol import Command, TaskShape
from keras_seq.tasks.use import GENERATE

# The TFLite export targets, listed once: `export tflite`'s flags, keras_seq.export.tflite
# and the pipeline read them here (this module loads no TensorFlow).
VARIANTS = ("float32", "float16", "dynamic", "int8", "int16x8")  # converter's, every graph
# step graphs only: 4- and 8-bit weights with the tied table stored once (ai-edge-quantizer
# from the float32 model): bits of weight per variant
SHARED_TABLE_VARIANTS = {"int4": 4, "dynamic_shared": 8}
ALL_VARIANTS = VARIANTS + tuple(SHARED_TABLE_VARIANTS)
GRAPHS = ("step", "step_fused", "sequence", "sequence_fused")


def add_train_args(p) -> None:
    p.add_argument("--preset", choices=sorted(PRESETS),
                   help="start from a TensorFlow PTB tutorial configuration (flags override "
                        "it; default: none, LMConfig's values)")


def base_config(args) -> dict:
    """``--init-from``'s run config (a fine-tune keeps its model and data), else
    ``--preset``'s values, else LMConfig's defaults; the flags given override them."""
    init_from = getattr(args, "init_from", None)
    if init_from:
        base = LMConfig.load(runs.check_run_dir(init_from, "lm") / runs.CONFIG).to_dict()
        base.pop("version")  # this keras-seq's
        # a fine-tune runs at the learning rate it is given: no decay tail of the base run's
        return {**base, "qat": None, "init_from": init_from, "max_minutes": None,
                "decay_epochs": 0}
    name = getattr(args, "preset", None)
    return preset(name).to_dict() if name else LMConfig().to_dict()


def tokenizer(config: LMConfig) -> tuple[str, dict]:
    return config.tokenizer, {"max_vocab": config.max_vocab, "min_count": config.min_count,
                              "vocab_size": config.vocab_size, "lower": config.lower}


def eval_options(args) -> dict:
    return {"keyboard": args.keyboard, "suggestions": args.suggestions}


def add_model_source_args(p, tokenizer_help: str) -> None:
    """``--run-dir`` or ``--model FILE.keras`` (with ``--tokenizer``): what is exported."""
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--run-dir", help="a `keras-seq train lm` run directory")
    source.add_argument("--model", metavar="FILE.keras",
                        help="your own Keras language model saved with model.save(): "
                        "embedding -> recurrent and per-token layers -> output layer "
                        "(docs/fit-script.md)")
    p.add_argument("--tokenizer", metavar="tokenizer.json", help=tokenizer_help)


def add_saved_model_args(p) -> None:
    add_model_source_args(p, "with --model: the keras-seq tokenizer the model was trained "
                          "with (the signatures take text; required)")
    p.add_argument("--out", required=True, help="SavedModel folder to write")


def add_tflite_args(p) -> None:
    add_model_source_args(p, "with --model: its keras-seq tokenizer, saved beside the "
                          "models for the runtime's text methods (without it they run on "
                          "token ids)")
    held_out = p.add_mutually_exclusive_group()
    held_out.add_argument("--data", metavar="TEXT_FILE",
                          help="with --model: held-out text (encoded with --tokenizer) for "
                          "calibration and the parity checks")
    held_out.add_argument("--ids", metavar="IDS.npy",
                          help="with --model: a held-out token-id stream (a 1-D .npy) for "
                          "calibration and the parity checks")
    p.add_argument("--out", required=True, help="folder for the .tflite files")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS),
                   choices=ALL_VARIANTS,
                   help="TFLite weight/activation types written (int4 and dynamic_shared: "
                   "step graphs, the tied table stored once)")
    p.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=GRAPHS,
                   help="which graphs (fused ones only for plain LSTMs)")
    p.add_argument("--seq-length", type=number(int, AT_LEAST_1), default=32,
                   help="window of the sequence models")
    p.add_argument("--calib-tokens", type=number(int, AT_LEAST_1), default=200,
                   help="training tokens that calibrate int8/int16x8")
    p.add_argument("--parity", action=argparse.BooleanOptionalAction, default=True,
                   help="compare every variant with Keras (--no-parity skips it)")
    add_json_arg(p)


def add_web_args(p) -> None:
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
    p.add_argument("--top", type=number(int, SUGGESTIONS), default=3,
                   help="suggestions shown")
    p.add_argument("--mix", default=None, metavar="MIX.json",
                   help="suggest from the mixture of the model, an n-gram and the words "
                   "typed (the pipeline's demo/mix.json, its n-gram beside it)")
    add_json_arg(p)


SHAPE = TaskShape(
    name="lm", config_cls=LMConfig,
    train_help="recurrent language model with stateful truncated BPTT",
    eval_help="cross-entropy, perplexity and keyboard metrics, state carried over the whole "
              "split",
    task="keras_seq.tasks.lm.task", use=GENERATE,
    exports=(
        Command("saved-model", "SavedModel with score / next_tokens / generate / step serving "
                "signatures (raw text in)", add_saved_model_args,
                run="keras_seq.export.saved_model:run_saved_model"),
        Command("tflite", "streaming step models (+ fused LSTM) and scoring models in "
                "float32/float16/dynamic/int8/int16x8, with parity checks", add_tflite_args,
                run="keras_seq.export.tflite:run_tflite"),
        Command("web", "a static site that runs step models in a browser on LiteRT.js: "
                "suggestions as you type, generation, per-token latency", add_web_args,
                run="keras_seq.export.web:run_web", needs_run=False),
    ),
    data_is_corpus=True, eval_split="val", tokenizer=tokenizer,
    add_train_args=add_train_args, add_eval_args=add_keyboard_args, eval_options=eval_options,
    base_config=base_config, presets=PRESETS,
)
