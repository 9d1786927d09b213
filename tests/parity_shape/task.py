"""The parity shape's trainer plug-in and its commands' functions."""

from dataclasses import dataclass

import keras
import numpy as np

from keras_seq import layers, runs
from keras_seq.models import loading
from keras_seq.tables import print_json
from keras_seq.training.trainer import FitPlan, Prepared, Task
from parity_shape.config import ParityConfig
from parity_shape.data import task_data


@dataclass
class ParityState:  # the task's own typed state (Prepared.state)
    splits: dict  # {split: (bits, parity)}


class ParityTask(Task):
    name = "parity"
    config_cls = ParityConfig

    def prepare(self, config, run_dir, resume, printer):
        return Prepared(state=ParityState(task_data(config)), chance_loss=float(np.log(2)))

    def build_model(self, config, prepared):
        model = keras.Sequential([keras.Input((config.length, 1)),
                                  layers.GRU(config.units),  # (B, T, 1) → (B, U)
                                  keras.layers.Dense(2)])    # → (B, 2) logits
        model.compile(keras.optimizers.Adam(config.lr),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
        return model

    def fit_plan(self, config, prepared, initial_epoch, printer):
        x, y = prepared.state.splits["train"]
        return FitPlan(kwargs={"x": x, "y": y, "batch_size": config.batch_size,
                               "validation_data": prepared.state.splits["val"]},
                       steps=-(-len(x) // config.batch_size),
                       items_per_step=config.batch_size)

    def results(self, config, prepared, run_dir, model):
        return {"val": evaluate_run(run_dir, "val")}

    def result_lines(self, results):
        return [f"val          accuracy {100 * results['val']['accuracy']:.1f}%"]


TASK = ParityTask()


def load_run(run_dir, which="best"):
    """``(config, model)`` of a parity run."""
    run_dir = runs.check_run_dir(run_dir, "parity")
    return ParityConfig.load(run_dir / runs.CONFIG), loading.load_model(run_dir, which)


def evaluate_run(run_dir, split="test"):
    config, model = load_run(run_dir)
    x, y = task_data(config)[split]
    pred = keras.ops.convert_to_numpy(model(x)).argmax(-1)
    return {"split": split, "n": len(y), "accuracy": float((pred == y).mean())}


def eval_lines(result):
    return [f"{result['split']} ({result['n']} sequences): accuracy "
            f"{100 * result['accuracy']:.1f}%"]


def predict(args):
    """``keras-seq predict`` on a parity run: the parity of each bit string."""
    config, model = load_run(args.run_dir)
    bits = np.array([[float(b) for b in text] for text in args.text], "float32")[..., None]
    rows = [{"text": text, "parity": int(p)} for text, p in
            zip(args.text, keras.ops.convert_to_numpy(model(bits)).argmax(-1))]
    if args.json:
        print_json(rows)
    for row in rows if not args.json else []:
        print(f"{row['parity']}\t{row['text']}")
    return 0
