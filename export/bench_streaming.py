"""Streaming latency comparison across runtimes (thin wrapper).

    python export/bench_streaming.py --run-dir runs/lstm --tokens 1000 --plot streaming.png
"""

import sys

from keras_seq.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "streaming", *sys.argv[1:]]))
