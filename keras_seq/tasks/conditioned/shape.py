"""The ``conditioned`` shape's protocol record (light: no TensorFlow): ``train
conditioned``, ``eval conditioned`` and ``generate`` (no export yet)."""

from __future__ import annotations

from keras_seq.tasks.conditioned.config import ConditionedConfig
from keras_seq.tasks.protocol import TaskShape
from keras_seq.tasks.use import GENERATE

SHAPE = TaskShape(
    name="conditioned", config_cls=ConditionedConfig,
    train_help="1→N: an LM conditioned on a label (python-docs-topics, tsv:PATH); "
               "--unconditioned trains the baseline",
    eval_help="perplexity on a split and a sample per condition",
    task="keras_seq.tasks.conditioned.task", use=GENERATE,
    data_names=("python-docs-topics", "shapes"), data_prefixes=("tsv:",),
)
