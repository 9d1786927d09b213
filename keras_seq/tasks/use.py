"""The use commands several shapes share (light: argparse only).

``keras-seq predict`` serves classify and tag runs, ``keras-seq generate`` lm and
conditioned runs: the shapes name the same :class:`~keras_seq.tasks.protocol.Command`
record, so its flags are added once, and the run's kind picks the shape whose
``task.predict`` / ``task.generate`` runs.

>>> PREDICT.name, GENERATE.name
('predict', 'generate')
"""

from __future__ import annotations

from keras_seq.options import add_option_flags
from keras_seq.ranges import AT_LEAST_1, number
from keras_seq.sampling import SAMPLERS, SamplingOptions
from keras_seq.tables import add_json_arg
from keras_seq.tasks.protocol import Command


def add_predict_args(p) -> None:
    p.add_argument("--run-dir", required=True, help="the classify or tag run that predicts")
    p.add_argument("--top", type=number(int, AT_LEAST_1), default=1,
                   help="classify: labels shown per text")
    add_json_arg(p)
    p.add_argument("text", nargs="*", help="texts (none: one per line on stdin)")


def add_generate_args(p) -> None:
    p.add_argument("--run-dir", required=True, help="the lm or conditioned run to sample from")
    p.add_argument("--condition", default=None,
                   help="conditioned runs: the label to generate for (default: each label)")
    p.add_argument("--prompt", default="", help="text to continue (default: a new line)")
    p.add_argument("--sampler", default="top-k", choices=SAMPLERS,
                   help="how the next token is picked from the model's distribution")
    add_option_flags(p, SamplingOptions)


PREDICT = Command("predict", "labels (classify runs) or tags (tag runs) of texts given as "
                  "arguments or one per stdin line", add_predict_args)
GENERATE = Command("generate", "sample text from a trained language model (lm or "
                   "conditioned run)", add_generate_args)
