"""On-device demo on LiteRT, no TensorFlow (thin wrapper).

    python export/demo.py --model demo/step_dynamic.tflite
"""

import sys

from keras_seq.cli import main

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
