"""The parity shape's protocol record (light: no Keras)."""

from keras_seq.tasks.protocol import Command, TaskShape
from keras_seq.tasks.use import PREDICT
from parity_shape.config import ParityConfig


def add_export_args(p):
    p.add_argument("--run-dir", required=True, help="a `keras-seq train parity` run")
    p.add_argument("--out", required=True, help="folder for weights.npz")


SHAPE = TaskShape(
    name="parity", config_cls=ParityConfig, train_help="parity of a bit string (a toy)",
    eval_help="accuracy on a split", task="parity_shape.task", use=PREDICT,
    exports=(Command("parity", "a parity run's weights as .npz", add_export_args,
                     run="parity_shape.export:run_export"),),
    tokenizer=None,
)
