"""The cell registry: one row per recurrent cell, read by everything that names a cell.

:data:`CELLS` maps a cell's name (what a config's ``cell``, ``--cell`` and a saved
``config.json`` say) to its :class:`CellSpec`: the layer and cell classes, the number of
gate blocks in its kernels, its state names, whether it projects, the Keras built-in it
computes the same as, the task shapes that may use it, and the constructor arguments that
make a variant (CIFG). Models build their layers from it, configs take their ``choices``
from it, :mod:`keras_seq.layers.params` counts weights with it and the exporters name
states and pick the fused LSTM from it. Adding a cell is one file and one row
(docs/architecture.md, "How to add a cell").

Classes are written ``"module:Class"`` and imported on first use, so the configs and the
command line read the table without importing Keras.

Example:

>>> cells_for("seq2seq")
('gru', 'lstm')
>>> spec = cell_spec("lstm")
>>> spec.gates, spec.states, spec.layer_cls.__name__
(4, ('h', 'c'), 'LSTM')
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

#: the task shapes a cell may serve (keras_seq.commands.tasks.SHAPES' rows)
ALL_SHAPES = frozenset({"lm", "classify", "tag", "conditioned", "seq2seq"})


def _load(ref):
    """A class written ``"module:Class"`` (or the class itself), imported."""
    if not isinstance(ref, str):
        return ref
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class CellSpec:
    """One registered recurrent cell.

    Args:
        name: the cell's name in configs, ``--cell`` and saved runs (``"lstm"``).
        layer: the recurrent layer, a class or ``"module:Class"`` (a ``keras.layers.RNN``
            built as ``layer(units, **kwargs)``, ``layer(units, proj_units, ...)`` when
            ``projects``).
        cell: its cell (one step), a class or ``"module:Class"``.
        gates: gate blocks in ``kernel`` / ``recurrent_kernel`` (``(D, gates·U)``).
        states: the state names, in the cell's order: ``("h",)`` or ``("h", "c")``.
        shapes: the task shapes that offer it as a ``cell`` choice.
        builtin: the Keras layer computing the same (``"keras.layers:LSTM"``), or None.
        projects: whether it has a recurrent projection (needs ``proj_units``; its
            output and ``h`` are ``proj_units`` wide).
        kwargs: constructor arguments that make this variant (``coupled_input_forget``).
        options: optional constructor arguments only some cells take
            (``"unit_forget_bias"``, ``"coupled_input_forget"``; ``"reset_after"``: GRU's
            second bias row, ``(2, gates·U)``).
        twin: for Keras's own layers (side-by-side comparisons): the keras-seq cell that
            computes the same; exports and metadata name that one. None for keras-seq cells.
        recipe: config fields ``keras-seq pipeline`` sets for this cell unless given.

    Example:

    >>> spec = CellSpec("leaky", layer="keras_seq.layers:SimpleRNN",
    ...                 cell="keras_seq.layers:SimpleRNNCell", gates=1, shapes={"lm"})
    >>> spec.layer_cls.__name__, spec.keras_own, spec.shapes
    ('SimpleRNN', False, frozenset({'lm'}))
    """

    name: str
    layer: object
    cell: object
    gates: int
    states: tuple = ("h",)
    shapes: frozenset = frozenset()
    builtin: object = None
    projects: bool = False
    kwargs: Mapping = field(default_factory=dict)
    options: frozenset = frozenset()
    twin: str | None = None
    recipe: Mapping = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "states", tuple(self.states))
        object.__setattr__(self, "shapes", frozenset(self.shapes))
        object.__setattr__(self, "options", frozenset(self.options))
        object.__setattr__(self, "kwargs", MappingProxyType(dict(self.kwargs)))
        object.__setattr__(self, "recipe", MappingProxyType(dict(self.recipe)))

    @property
    def layer_cls(self):
        return _load(self.layer)

    @property
    def cell_cls(self):
        return _load(self.cell)

    @property
    def builtin_cls(self):
        return _load(self.builtin)

    @property
    def keras_own(self) -> bool:
        """Whether this row runs Keras's own layer (no QAT, weight drop or CIFG)."""
        return self.twin is not None

    def build(self, units, proj_units=None, **kwargs):
        """The layer: ``layer(units[, proj_units], **self.kwargs, **kwargs)``."""
        sizes = (units, proj_units) if self.projects else (units,)
        return self.layer_cls(*sizes, **self.kwargs, **kwargs)


_LSTM_OPTIONS = frozenset({"unit_forget_bias", "coupled_input_forget"})
_RECURRENT_SHAPES = frozenset({"lm", "classify", "tag", "conditioned"})

CELLS = {
    spec.name: spec for spec in (
        CellSpec("rnn", "keras_seq.layers.simple_rnn:SimpleRNN",
                 "keras_seq.layers.simple_rnn:SimpleRNNCell", gates=1,
                 shapes=_RECURRENT_SHAPES, builtin="keras.layers:SimpleRNN"),
        CellSpec("gru", "keras_seq.layers.gru:GRU", "keras_seq.layers.gru:GRUCell", gates=3,
                 shapes=ALL_SHAPES, builtin="keras.layers:GRU", options={"reset_after"}),
        CellSpec("lstm", "keras_seq.layers.lstm:LSTM", "keras_seq.layers.lstm:LSTMCell",
                 gates=4, states=("h", "c"), shapes=ALL_SHAPES, builtin="keras.layers:LSTM",
                 options=_LSTM_OPTIONS),
        # an LSTM with a recurrent projection (Sak et al. 2014); Gboard's on-device cell
        # is its CIFG form, 512 → 128
        CellSpec("lstmp", "keras_seq.layers.lstmp:LSTMP", "keras_seq.layers.lstmp:LSTMPCell",
                 gates=4, states=("h", "c"), shapes={"lm"}, projects=True,
                 options=_LSTM_OPTIONS,
                 recipe={"units": 512, "proj_units": 128, "cifg": True}),
        # CIFG variants (i = 1 − f): the lm's --cifg flag turns them on; no shape names them
        CellSpec("cifg", "keras_seq.layers.lstm:LSTM", "keras_seq.layers.lstm:LSTMCell",
                 gates=3, states=("h", "c"), kwargs={"coupled_input_forget": True},
                 options={"unit_forget_bias"}),
        CellSpec("cifg_lstmp", "keras_seq.layers.lstmp:LSTMP",
                 "keras_seq.layers.lstmp:LSTMPCell", gates=3, states=("h", "c"),
                 projects=True, kwargs={"coupled_input_forget": True},
                 options={"unit_forget_bias"}),
        # Keras's own layers, for side-by-side comparisons only
        CellSpec("keras-rnn", "keras.layers:SimpleRNN", "keras.layers:SimpleRNNCell",
                 gates=1, shapes={"lm"}, builtin="keras.layers:SimpleRNN", twin="rnn"),
        CellSpec("keras-gru", "keras.layers:GRU", "keras.layers:GRUCell", gates=3,
                 shapes={"lm"}, builtin="keras.layers:GRU", options={"reset_after"},
                 twin="gru"),
        CellSpec("keras-lstm", "keras.layers:LSTM", "keras.layers:LSTMCell", gates=4,
                 states=("h", "c"), shapes={"lm"}, builtin="keras.layers:LSTM",
                 options={"unit_forget_bias"}, twin="lstm"),
    )
}

#: other names read for a cell: the benchmarks' reports and ``bench cells --cells`` say
#: ``simple_rnn`` for ``rnn``
ALIASES = {"simple_rnn": "rnn"}


def cells_for(shape: str | None = None, *, option: str | None = None,
              comparisons: bool = True, projects: bool | None = None) -> tuple[str, ...]:
    """The names of the cells ``shape`` offers (every row for None), in table order;
    ``option``: only those taking that constructor option; ``comparisons=False``: without
    Keras's own layers; ``projects``: only those with (True) or without (False) a
    recurrent projection.

    >>> cells_for("lm", option="coupled_input_forget")
    ('lstm', 'lstmp')
    >>> cells_for(projects=True)
    ('lstmp', 'cifg_lstmp')
    """
    return tuple(name for name, spec in CELLS.items()
                 if (shape is None or shape in spec.shapes)
                 and (option is None or option in spec.options)
                 and (comparisons or not spec.keras_own)
                 and (projects is None or spec.projects == projects))


def mirrored_cells() -> tuple[str, ...]:
    """The keras-seq cells that compute what a Keras built-in does (no variant), which the
    benchmarks and analyses compare with Keras's own.

    >>> mirrored_cells()
    ('rnn', 'gru', 'lstm')
    """
    return tuple(name for name, spec in CELLS.items()
                 if spec.builtin and not spec.keras_own and not spec.kwargs)


def keras_twins() -> dict[str, str]:
    """``{keras-seq cell: the row running Keras's own layer}``, e.g. ``"lstm": "keras-lstm"``."""
    return {spec.twin: name for name, spec in CELLS.items() if spec.keras_own}


class CellChoices(Sequence):
    """The cells ``shape`` offers, read from :data:`CELLS` each time (a config's
    ``choices``: a row added later, a test's toy cell, is a choice at once).

    >>> choices = CellChoices("classify")
    >>> list(choices), "gru" in choices, "lstmp" in choices
    (['rnn', 'gru', 'lstm'], True, False)
    """

    def __init__(self, shape: str):
        self.shape = shape

    def __getitem__(self, index):
        return cells_for(self.shape)[index]

    def __len__(self) -> int:
        return len(cells_for(self.shape))

    def __repr__(self) -> str:
        return repr(cells_for(self.shape))


def cell_spec(name: str, shape: str | None = None, owner: str | None = None) -> CellSpec:
    """The :class:`CellSpec` of ``name`` (or an alias); ``shape``: one that shape offers.

    Raises ``ValueError`` saying what was received, what is expected and how to fix it,
    after ``"{owner}: "`` when an owner (the model or function asking) is named.

    >>> cell_spec("simple_rnn").name
    'rnn'
    """
    spec = CELLS.get(ALIASES.get(name, name)) if isinstance(name, str) else None
    names = cells_for(shape)
    if spec is None or (shape is not None and spec.name not in names):
        where = f" for a {shape} model" if shape else ""
        example = "lstm" if "lstm" in names else names[0]
        prefix = f"{owner}: " if owner else ""
        raise ValueError(
            f"{prefix}received cell={name!r}, an unknown cell{where}; expected one of "
            f"{', '.join(names)} (keras_seq.cells.CELLS). Pass e.g. cell={example!r}, or "
            "register a new cell with one CELLS row.")
    return spec


def spec_of(cell) -> CellSpec | None:
    """The row of a cell instance: the first row without ``kwargs`` whose cell class is
    the instance's class or its nearest registered base (a subclass of ``LSTMCell`` is an
    ``lstm``); None for a cell no row names."""
    plain = [spec for spec in CELLS.values() if not spec.kwargs]
    for cls in type(cell).__mro__:
        for spec in plain:
            if spec.cell_cls is cls:
                return spec
    return None


@contextlib.contextmanager
def registered(spec: CellSpec):
    """Add ``spec`` as a row of :data:`CELLS` for the ``with`` block (a test's toy cell).

    >>> toy = CellSpec("toy", "keras_seq.layers:GRU", "keras_seq.layers:GRUCell", 3,
    ...                shapes={"lm"})
    >>> with registered(toy):
    ...     cells_for("lm")[-1]
    'toy'
    >>> "toy" in CELLS
    False
    """
    if spec.name in CELLS:
        raise ValueError(f"received a cell named {spec.name!r}, which CELLS already has; "
                         "expected a new name: rename the toy cell")
    CELLS[spec.name] = spec
    try:
        yield spec
    finally:
        del CELLS[spec.name]
