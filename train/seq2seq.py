"""Train a sequence-to-sequence model (thin script: parse arguments, call the library).

Same flags as ``keras-seq train seq2seq``. Examples (CPU)::

    python train/seq2seq.py --task dates --run-dir runs/dates --max-minutes 15 \\
        --target-exact-match 0.998
    python train/seq2seq.py --task reverse --max-len 64 --attention none --run-dir runs/rev-none
    python train/seq2seq.py --task tsv:spa.txt --tokenizer word --run-dir runs/spa
"""

from __future__ import annotations

import argparse
import sys

from keras_seq.commands.seq2seq import add_seq2seq_config_args, config_from_args


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--quiet", action="store_true")
    add_seq2seq_config_args(parser)
    args = parser.parse_args(argv)

    from keras_seq.seq2seq.training import format_results, train_seq2seq

    results = train_seq2seq(config_from_args(args), args.run_dir, resume=args.resume,
                            verbose=2 if args.quiet else 1)
    print(format_results(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
