"""Effective memory length of each cell on synthetic tasks (same flags as `keras-seq memory`).

Examples (CPU)::

    python train/memory.py --tasks negation --cells rnn lstm --distances 5 10 20 40 \\
        --steps 300 --out runs/memory-negation
    python train/memory.py --out runs/memory   # the full sweep: every task, cell, distance
"""

import sys

from keras_seq.cli import main

if __name__ == "__main__":
    sys.exit(main(["memory", *sys.argv[1:]]))
