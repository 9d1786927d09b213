"""Export a run as a SavedModel with serving signatures (thin wrapper).

    python export/saved_model.py --run-dir runs/lstm --out exports/lstm_saved_model
"""

import sys

from keras_seq.cli import main

if __name__ == "__main__":
    sys.exit(main(["export", "saved-model", *sys.argv[1:]]))
