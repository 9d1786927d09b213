"""Train a sequence-to-sequence model (thin wrapper: same flags as `keras-seq train seq2seq`).

Examples (CPU)::

    python train/seq2seq.py --task dates --run-dir runs/dates --max-minutes 15 \\
        --target-exact-match 0.998
    python train/seq2seq.py --task reverse --max-len 64 --attention none --run-dir runs/rev-none
    python train/seq2seq.py --task tsv:spa.txt --tokenizer word --run-dir runs/spa
"""

import sys

from keras_seq.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", "seq2seq", *sys.argv[1:]]))
