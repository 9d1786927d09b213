"""Train a recurrent language model (thin wrapper: same flags as `keras-seq train lm`).

Examples (CPU)::

    # 0.691 x KN5 on tinyshakespeare words in 60 CPU minutes (README, "Measured")
    python train/lm.py --run-dir runs/lstm --data tinyshakespeare --split-ratio 90/10 \\
        --min-count 2 --cell lstm --num-layers 2 --units 512 --embed-dim 512 --tie-weights \\
        --dropout 0.5 --variational-dropout --embed-dropout 0.1 --weight-dropout 0.5 \\
        --lr 2e-3 --lr-decay 0.85 --decay-start 6 --epochs 1000 --max-minutes 57
    python train/lm.py --run-dir runs/ptb-small --preset ptb-small   # needs PTB (ptb.*.txt)
    python train/lm.py --run-dir runs/lstm --resume
"""

import sys

from keras_seq.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", "lm", *sys.argv[1:]]))
