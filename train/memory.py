"""Effective memory length of each cell on the synthetic tasks (thin script).

Same flags as ``keras-seq memory``. Examples (CPU)::

    python train/memory.py --tasks negation --cells rnn lstm --distances 5 10 20 40 \\
        --steps 300 --out runs/memory-negation
    python train/memory.py --out runs/memory   # the full sweep: every task, cell, distance
"""

from __future__ import annotations

import argparse
import sys

from keras_seq.commands.memory import add_memory_args, run_memory


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_memory_args(parser)
    return run_memory(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
