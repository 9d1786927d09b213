"""Language-model training configuration: plain typed values, presets, JSON round trip.

No TensorFlow import here, so the CLI can parse and print configs quickly.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from keras_seq.cells import CELLS, CellChoices, cells_for
from keras_seq.data.splits import DEFAULT_SPLIT, split_problems
from keras_seq.options import declared_range, option
from keras_seq.ranges import AT_LEAST_1, FRACTION, NON_NEGATIVE, POSITIVE, SHARE
from keras_seq.training.config import TrainConfig


@dataclass
class LMConfig(TrainConfig):
    """Everything that decides a language-model run. Saved as ``config.json`` in the run dir."""

    kind = "lm"

    # data
    data: str = option("python-docs", "corpus: a registry name (python-docs, tinyshakespeare, "
                       "ptb, wikitext-2), a .txt file or a folder of .txt files",
                       metavar="NAME|PATH")
    split_ratio: str = option(DEFAULT_SPLIT, "train/val/test shares for a corpus without its own "
                              "split files (percentages or fractions; '90/10': no test part)",
                              metavar="TRAIN/VAL[/TEST]")
    data_dir: str | None = option(None, "folder searched for registry files before "
                                  "downloading", metavar="DIR",
                                  default_help="$KERAS_SEQ_DATA_DIR")
    tokenizer: str = option("word", "how text becomes tokens", choices=("char", "word", "subword"))
    max_vocab: int | None = option(None, "largest vocabulary, special tokens included "
                                   "(char/word)", default_help="no limit", range=AT_LEAST_1)
    min_count: int | None = option(None, "keep tokens seen at least this often in train "
                                   "(char/word)", default_help="1, every token", range=AT_LEAST_1)
    vocab_size: int | None = option(None, "target WordPiece vocabulary size (subword)",
                                    default_help="8000", range=AT_LEAST_1)
    lower: bool | None = option(None, "lower-case the text first (word/subword)",
                                default_help="on")
    # model
    model: str = option("rnn", "rnn: a recurrent LM (--cell); nplm: Bengio et al.'s "
                        "feed-forward LM over a window of --context tokens",
                        choices=("rnn", "nplm"))
    context: int = option(4, "nplm: previous tokens read (the n-gram order minus one)",
                          range=AT_LEAST_1)
    nplm_direct: bool = option(False, "nplm: direct connections from the embeddings to the "
                               "output (W)")
    cell: str = option("lstm", "recurrent layer: keras-seq rnn/gru/lstm/lstmp (lstmp: an LSTM "
                       "with a recurrent projection, needs --proj-units) or Keras' built-ins",
                       choices=CellChoices("lm"))
    proj_units: int | None = option(None, "lstmp: projection size P ≤ units (the layer's "
                                    "output and h)", default_help="none, lstmp needs one",
                                    range=AT_LEAST_1)
    cifg: bool = option(False, "coupled input-forget gate, i = 1 − f (lstm, lstmp)")
    embed_dim: int = option(128, "token embedding size", range=AT_LEAST_1)
    units: int = option(256, "hidden units per recurrent layer (nplm: hidden tanh units)",
                        range=AT_LEAST_1)
    num_layers: int = option(1, "stacked recurrent layers", range=AT_LEAST_1)
    dropout: float = option(0.0, "dropout between layers (1 − keep_prob of the PTB tutorial)",
                            range=FRACTION)
    tie_weights: bool = option(False, "share the embedding matrix with the output layer")
    variational_dropout: bool = option(False, "one --dropout mask per sequence (locked "
                                       "dropout), not one per step")
    embed_dropout: float = option(0.0, "drop whole word types from the input embedding",
                                  range=FRACTION)
    weight_dropout: float = option(0.0, "DropConnect on the recurrent kernels (weight drop)",
                                   range=FRACTION)
    init_scale: float | None = option(None, "initialise every weight uniform(−s, s) (PTB "
                                      "recipe)", default_help="Keras' initialisers", range=POSITIVE)
    # wave 3 (issue 27): older runs read with these at their defaults
    added: ClassVar[tuple[str, ...]] = ("softmax", "cutoffs", "div_value", "steps_per_epoch",
                                        "eval_tokens")
    softmax: str = option("full", "output layer: full, or adaptive (Grave et al. 2017: a "
                          "frequent-word head and projected tail clusters; needs --cutoffs)",
                          choices=("full", "adaptive"))
    cutoffs: str | None = option(None, "adaptive: cluster boundaries over the frequency-ranked "
                                 "ids, e.g. 2000,10000", metavar="C1,C2",
                                 default_help="none, adaptive needs them")
    div_value: float = option(4.0, "adaptive: tail cluster i projects the features to "
                              "features // div_value^(i+1)", range=POSITIVE)
    # optimisation
    bptt: int = option(35, "truncation length τ: steps back-propagated through",
                       range=AT_LEAST_1)
    bptt_mode: str = option("truncated", "truncated: stateful TBPTT on the token stream; full: "
                            "whole lines, stateless", choices=("truncated", "full"))
    batch_size: int = option(20, "token streams per batch (with --strategy: the global batch)",
                             range=AT_LEAST_1)
    state_reset_prob: float = option(0.0, "truncated: chance that a stream's state is zeroed "
                                     "before a batch, so the model keeps meeting the zero "
                                     "state it starts from at inference", range=SHARE)
    epochs: int = 5
    optimizer: str = option("adam", "optimizer", choices=("sgd", "adam"))
    lr: float = 2e-3
    lr_decay: float = option(1.0, "per-epoch learning-rate factor once decay starts (PTB)",
                             range=POSITIVE)
    decay_start: int = option(1, "epochs at the full learning rate before decaying (PTB "
                              "max_epoch)", range=NON_NEGATIVE)
    decay_epochs: int = option(0, "instead of --decay-start: × --lr-decay an epoch over the "
                               "last N epochs that --epochs and --max-minutes leave room "
                               "for, judged as training goes from the epochs' times (0: off)",
                               range=NON_NEGATIVE)
    clip_norm: float | None = 5.0  # global-norm clipping threshold θ; None = off
    max_steps_per_epoch: int | None = option(None, "cap on the batches of an epoch, every "
                                             "epoch the same first batches (smoke tests); "
                                             "--steps-per-epoch goes on through the data",
                                             default_help="no cap", range=AT_LEAST_1)
    steps_per_epoch: int | None = option(None, "batches per epoch; the next epoch goes on "
                                         "where this one stopped in the stream (TBPTT state "
                                         "carried), for corpora where one pass takes hours",
                                         default_help="one pass", range=AT_LEAST_1)
    eval_tokens: int | None = option(None, "validate each epoch on the first N tokens of the "
                                     "val split (the same sample every epoch, PPL with a 95% "
                                     "confidence interval); the whole split is evaluated when "
                                     "training ends", default_help="the whole val split",
                                     range=AT_LEAST_1)
    max_minutes: float | None = option(None, "stop once past this many minutes, mid-epoch if "
                                       "need be (committed there: --resume goes on from the "
                                       "next batch)", default_help="no limit", range=POSITIVE)
    seed: int = 1234
    # logging
    log_every: int = option(50, "steps between gradient-norm and learning-rate scalars",
                            range=AT_LEAST_1)
    histogram_freq: int = option(1, "epochs between weight/activation histograms (0: off)",
                                 range=NON_NEGATIVE)
    sample_tokens: int = option(40, "tokens sampled into TensorBoard each epoch",
                                range=NON_NEGATIVE)
    # wave 5 (issue 54): older runs read with these at their defaults (see migrate)
    added_qat: ClassVar[tuple[str, ...]] = ("qat", "init_from")
    qat: str | None = option(None, "quantization-aware training: round the weights in every "
                             "step to the per-channel int8 or int4 grid the TFLite export "
                             "stores (usually a fine-tune: --init-from a float run)",
                             choices=("int8", "int4"), default_help="off (float)")
    init_from: str | None = option(None, "start from the best checkpoint and tokenizer of "
                                   "this lm run; its config is the base, the flags given "
                                   "override it (the shape must match)", metavar="RUN_DIR",
                                   default_help="fresh weights")

    # issue 55: a field added alone; a config without it is older and reads it at its
    # default (off), so a missing one cannot be told from an old config
    added_alone: ClassVar[tuple[str, ...]] = ("decay_epochs",)

    @classmethod
    def migrate(cls, data: dict) -> dict:
        """Older configs: the wave-3 fields (:attr:`added`, by the base class), then the
        wave-5 ones (:attr:`added_qat`) at their defaults when none is present, then each
        of :attr:`added_alone` at its default when missing."""
        data = super().migrate(data)
        if not set(cls.added_qat) & set(data):
            data.update(qat=None, init_from=None)
        defaults = {f.name: f.default for f in dataclasses.fields(cls)}
        for name in cls.added_alone:  # older configs lack it: read at its default
            data.setdefault(name, defaults[name])
        return data

    def problems(self) -> list[str]:
        problems = super().problems()
        if self.steps_per_epoch is not None and self.max_steps_per_epoch is not None:
            problems.append("steps_per_epoch and max_steps_per_epoch both set: "
                            "--steps-per-epoch N goes on through the stream epoch after epoch, "
                            "--max-steps-per-epoch N repeats its first N batches; use one")
        if self.steps_per_epoch is not None and self.strategy != "one":
            problems.append(f"steps_per_epoch is for one device (got strategy "
                            f"{self.strategy}): replicas reset their stream rows at each "
                            "epoch start; bound a distributed epoch with --max-steps-per-epoch")
        problems += self._projection_problems()
        problems += self._softmax_problems()
        problems += self._qat_problems()
        problems += split_problems(self.split_ratio)
        return problems

    def _projection_problems(self) -> list[str]:
        """``proj_units`` / ``cifg``: the LSTMP options (Sak et al. 2014; CIFG as in Gboard)."""
        problems = []
        if self.model != "rnn":
            if self.proj_units is not None or self.cifg:
                problems.append(f"proj_units and cifg are for model 'rnn' (got model "
                                f"{self.model!r})")
            return problems
        spec = CELLS.get(self.cell)  # an unknown cell is refused by its choices
        projects = spec is not None and spec.projects
        if self.proj_units is None:
            if projects:
                problems.append(f"cell {self.cell!r} needs proj_units (the projection size, "
                                f"≤ units={self.units}), e.g. proj_units={max(1, self.units // 4)}")
        elif not projects:
            projected = cells_for("lm", projects=True)
            problems.append(f"proj_units is for cell {' or '.join(map(repr, projected))} only "
                            f"(got cell {self.cell!r} with proj_units={self.proj_units}); use "
                            f"--cell {projected[0]} or drop --proj-units")
        elif self.proj_units in declared_range(LMConfig, "proj_units") and \
                self.proj_units > self.units:
            problems.append(f"proj_units must be ≤ units (got proj_units={self.proj_units}, "
                            f"units={self.units}); the projection maps the units down")
        with_cifg = cells_for("lm", option="coupled_input_forget")
        if self.cifg and self.cell not in with_cifg:
            problems.append(f"cifg needs cell {' or '.join(map(repr, with_cifg))} "
                            f"(got {self.cell!r})")
        return problems

    def _qat_problems(self) -> list[str]:
        """``qat``: the recurrent model's keras-seq cells and full softmax, in float32."""
        if self.qat is None:
            return []
        problems = []
        if self.model != "rnn" or self.cell not in cells_for("lm", comparisons=False):
            problems.append(f"qat rounds keras-seq's recurrent cells (got model {self.model!r}, "
                            f"cell {self.cell!r}); use --model rnn with --cell "
                            + "/".join(cells_for("lm", comparisons=False)))
        if self.softmax != "full":
            problems.append("qat exports the full softmax's output layer: drop --softmax "
                            "adaptive")
        if self.mixed_precision != "off":
            problems.append(f"qat rounds float32 weights: turn mixed precision off (got "
                            f"{self.mixed_precision!r})")
        return problems

    def _softmax_problems(self) -> list[str]:
        """``softmax`` / ``cutoffs`` / ``div_value`` (the vocabulary size is checked when the
        model is built, once the tokenizer knows it)."""
        if self.softmax == "full":
            return ([] if self.cutoffs is None else
                    [f"cutoffs {self.cutoffs!r} are for softmax 'adaptive'; add --softmax "
                     "adaptive or drop --cutoffs"])
        problems = []
        if self.model != "rnn":
            problems.append(f"softmax 'adaptive' is for model 'rnn' (got {self.model!r})")
        if self.tie_weights:
            problems.append("softmax 'adaptive' has its own output weights: drop "
                            "--tie-weights")
        try:
            cuts = [int(c) for c in str(self.cutoffs or "").split(",") if c.strip()]
        except ValueError:
            cuts = None
        if not cuts or cuts[0] < 1 or any(b <= a for a, b in zip(cuts, cuts[1:])):
            problems.append(f"softmax 'adaptive' needs --cutoffs: increasing positive token "
                            f"ids such as 2000,10000 (got {self.cutoffs!r})")
        return problems


# The TensorFlow PTB tutorial (Zaremba et al. 2014) configurations. keep_prob → dropout,
# max_epoch → decay_start, max_max_epoch → epochs, num_steps → bptt, hidden → units = embed.
# Their test perplexities on PTB: small 115.91, medium 82.07, large 78.29.
PRESETS: dict[str, dict] = {
    "ptb-small": dict(data="ptb", tokenizer="word", cell="lstm", num_layers=2, units=200,
                      embed_dim=200, bptt=20, batch_size=20, dropout=0.0, init_scale=0.1,
                      clip_norm=5.0, epochs=13, decay_start=4, optimizer="sgd", lr=1.0,
                      lr_decay=0.5),
    "ptb-medium": dict(data="ptb", tokenizer="word", cell="lstm", num_layers=2, units=650,
                       embed_dim=650, bptt=35, batch_size=20, dropout=0.5, init_scale=0.05,
                       clip_norm=5.0, epochs=39, decay_start=6, optimizer="sgd", lr=1.0,
                       lr_decay=0.8),
    "ptb-large": dict(data="ptb", tokenizer="word", cell="lstm", num_layers=2, units=1500,
                      embed_dim=1500, bptt=35, batch_size=20, dropout=0.65, init_scale=0.04,
                      clip_norm=10.0, epochs=55, decay_start=14, optimizer="sgd", lr=1.0,
                      lr_decay=1 / 1.15),
}


def preset(name: str, **overrides) -> LMConfig:
    """A config from a named preset, with explicit overrides applied on top."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}")
    return LMConfig(**{**PRESETS[name], **overrides})
