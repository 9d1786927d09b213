"""The parity shape's export: its weights as one ``.npz`` file."""

from pathlib import Path

import numpy as np

from parity_shape.task import load_run


def run_export(args):
    """``keras-seq export parity``."""
    _, model = load_run(args.run_dir)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    np.savez(out / "weights.npz", *model.get_weights())
    print(f"wrote {out / 'weights.npz'}")
    return 0
