"""Small helpers shared by the analysis modules: cell names, progress."""

from __future__ import annotations

from keras_seq.cells import cell_spec, mirrored_cells
from keras_seq.errors import KerasSeqError

#: the keras-seq cells that mirror a Keras built-in (the analyses compare them)
CELLS = mirrored_cells()
LABELS = {"rnn": "SimpleRNN", "gru": "GRU", "lstm": "LSTM", "attn-gru": "GRU + attention",
          "nplm": "NPLM"}
COLORS = {"rnn": "tab:red", "gru": "tab:blue", "lstm": "tab:green", "attn-gru": "tab:purple"}


def check_cells(cells, allowed=CELLS) -> tuple[str, ...]:
    cells = tuple(cells)
    unknown = [c for c in cells if c not in allowed]
    if unknown or not cells:
        raise KerasSeqError(
            f"received cells {list(cells)}; expected one or more of {', '.join(allowed)} "
            f"(e.g. --cells {' '.join(allowed[:2])})"
        )
    return cells


def recurrent_layer(cell: str, units: int, **kwargs):
    """A keras-seq ``SimpleRNN`` / ``GRU`` / ``LSTM`` layer for a cell name."""
    return cell_spec(cell).build(units, **kwargs)


class Progress:
    """A Keras ``Progbar`` that can be switched off (``enabled=False``)."""

    def __init__(self, total: int, enabled: bool = True, unit: str = "step"):
        self.bar = None
        if enabled and total > 0:
            # lazy: Keras is imported once the backend is chosen
            import keras

            self.bar = keras.utils.Progbar(total, unit_name=unit)

    def add(self, n: int = 1, values=None) -> None:
        if self.bar is not None:
            self.bar.add(n, values=values)
