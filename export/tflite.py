"""Export a run to TFLite step/sequence models in several variants (thin wrapper).

    python export/tflite.py --run-dir runs/lstm --out exports/lstm_tflite --variants float32 int8
"""

import sys

from keras_seq.cli import main

if __name__ == "__main__":
    sys.exit(main(["export", "tflite", *sys.argv[1:]]))
