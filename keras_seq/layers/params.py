"""Parameter counts of the recurrent cells, without building any layer.

Every count reads the cell's row of :data:`keras_seq.cells.CELLS`: its number
of gate blocks and whether it projects. A SimpleRNN step (``"rnn"``) has one block of
weights (``W_xh``, ``W_hh``, ``b``); a GRU has three (z, r, h), an LSTM four (i, f, c, o)
and a CIFG LSTM (``"cifg"``) three (f, c, o). So the recurrent weights of an LSTM are
exactly 4× and a GRU's 3× a SimpleRNN's of the same width. The projected LSTMs
(``"lstmp"``, ``"cifg_lstmp"``: LSTMP, Sak et al. 2014) also take ``proj_units``: their
recurrent kernel is ``(P, G·U)`` and they add a ``(U, P)`` projection. The benchmarks'
name ``"simple_rnn"`` is read as ``"rnn"``.
"""

from __future__ import annotations

from keras_seq.cells import cell_spec, cells_for


def counted_cells() -> tuple[str, ...]:
    """The cells :func:`param_table` counts: every keras-seq row of ``CELLS`` without a
    projection (it has no ``proj_units``), in table order.

    >>> counted_cells()
    ('rnn', 'gru', 'lstm', 'cifg')
    """
    return cells_for(comparisons=False, projects=False)


def weight_shapes(cell_type, input_dim, units, use_bias=True, reset_after=True,
                  proj_units=None):
    """Shapes of ``kernel``, ``recurrent_kernel`` and ``bias`` as Keras lays them out.

    Args:
        cell_type: a cell of :data:`~keras_seq.cells.CELLS` (``"rnn"``,
            ``"gru"``, ``"lstm"``, ``"cifg"``…), or a projected LSTM ``"lstmp"`` /
            ``"cifg_lstmp"`` (needs ``proj_units``).
        input_dim: size of each input vector ``D``.
        units: size of the hidden state ``U`` (the cell state for a projected LSTM).
        use_bias: whether the cell has a bias.
        reset_after: GRU only; ``True`` gives a ``(2, 3U)`` bias.
        proj_units: projected LSTMs only: the projection size ``P ≤ U``.

    Returns:
        dict name -> shape tuple, e.g. ``{"kernel": (D, 4U), ...}`` for an LSTM; a
        projected LSTM adds ``"projection_kernel": (U, P)`` (last, as the layer
        creates it) and its ``recurrent_kernel`` is ``(P, G·U)``.

    Example:

    >>> weight_shapes("gru", 8, 4)
    {'kernel': (8, 12), 'recurrent_kernel': (4, 12), 'bias': (2, 12)}
    >>> weight_shapes("cifg_lstmp", 8, 4, proj_units=2)
    {'kernel': (8, 12), 'recurrent_kernel': (2, 12), 'bias': (12,), 'projection_kernel': (4, 2)}
    """
    spec = cell_spec(cell_type, owner="weight_shapes: cell_type")
    for name, value in (("input_dim", input_dim), ("units", units)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(
                f"weight_shapes: received {name}={value!r}; expected a positive integer."
            )
    cols = spec.gates * units
    if spec.projects:
        if not isinstance(proj_units, int) or not 0 < proj_units <= units:
            raise ValueError(
                f"weight_shapes: received proj_units={proj_units!r} for {cell_type!r}; "
                f"expected a positive integer ≤ units ({units})."
            )
        shapes = {"kernel": (input_dim, cols), "recurrent_kernel": (proj_units, cols)}
        if use_bias:
            shapes["bias"] = (cols,)
        shapes["projection_kernel"] = (units, proj_units)
        return shapes
    if proj_units is not None:
        raise ValueError(
            f"weight_shapes: received proj_units={proj_units!r} for {cell_type!r}, which "
            f"has no projection; use one of "
            f"{', '.join(cells_for(projects=True))} or drop proj_units."
        )
    shapes = {"kernel": (input_dim, cols), "recurrent_kernel": (units, cols)}
    if use_bias:
        shapes["bias"] = (2, cols) if "reset_after" in spec.options and reset_after else (cols,)
    return shapes


def count_params(cell_type, input_dim, units, use_bias=True, reset_after=True,
                 proj_units=None):
    """Number of trainable parameters of one cell.

    Args: as :func:`weight_shapes`.

    Returns:
        int, e.g. ``4 * (D·U + U·U + U)`` for an LSTM.

    Example:

    >>> count_params("lstm", 128, 256)
    394240
    >>> count_params("lstmp", 128, 256, proj_units=64)  # 4·(128·256 + 64·256 + 256) + 256·64
    214016
    """
    total = 0
    shapes = weight_shapes(cell_type, input_dim, units, use_bias, reset_after, proj_units)
    for shape in shapes.values():
        size = 1
        for dim in shape:
            size *= dim
        total += size
    return total


def param_table(sizes=((128, 256),), use_bias=True, reset_after=True):
    """Parameter counts of every cell type for each ``(input_dim, units)``.

    Args:
        sizes: iterable of ``(input_dim, units)`` pairs.
        use_bias, reset_after: as :func:`weight_shapes`.

    Returns:
        list of dicts, one per size, with keys ``input_dim``, ``units``, one
        count per cell type, and ``recurrent_ratio`` (each type's
        ``recurrent_kernel`` size over a SimpleRNN's: 1, 3, 4, 3).

    Example:

    >>> param_table([(10, 20)])[0]["recurrent_ratio"]["lstm"]
    4.0
    """
    rows = []
    for input_dim, units in sizes:
        row = {"input_dim": input_dim, "units": units}
        base = units * units
        ratios = {}
        for cell_type in counted_cells():
            row[cell_type] = count_params(cell_type, input_dim, units, use_bias, reset_after)
            rec = weight_shapes(cell_type, input_dim, units)["recurrent_kernel"]
            ratios[cell_type] = rec[0] * rec[1] / base
        row["recurrent_ratio"] = ratios
        rows.append(row)
    return rows


def format_param_table(rows):
    """Plain-text table of :func:`param_table` rows."""
    cells = [c for c in counted_cells() if not rows or c in rows[0]]
    header = f"{'input':>6} {'units':>6} " + " ".join(f"{c:>11}" for c in cells)
    lines = [header]
    for row in rows:
        counts = " ".join(f"{row[c]:>11,}" for c in cells)
        lines.append(f"{row['input_dim']:>6} {row['units']:>6} {counts}")
    ratios = rows[0]["recurrent_ratio"] if rows else {}
    lines.append(
        "recurrent weights vs rnn: "
        + ", ".join(f"{c} {ratios[c]:g}x" for c in cells if c in ratios)
    )
    return "\n".join(lines)
