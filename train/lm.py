"""Train a recurrent language model (thin wrapper: same flags as `keras-seq train lm`).

Examples (CPU)::

    python train/lm.py --run-dir runs/lstm --data tinyshakespeare --split-ratio 90/10 \\
        --cell lstm --num-layers 2 --units 512 --embed-dim 512 --tie-weights --dropout 0.6 \\
        --lr 1e-3 --epochs 1000 --max-minutes 58
    python train/lm.py --run-dir runs/ptb-small --preset ptb-small   # needs PTB (ptb.*.txt)
    python train/lm.py --run-dir runs/lstm --resume
"""

import sys

from keras_seq.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", "lm", *sys.argv[1:]]))
