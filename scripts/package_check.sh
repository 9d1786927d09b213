#!/usr/bin/env bash
# The package as a user gets it (make package-check; .ci/run): build the sdist and the
# wheel, check the wheel's metadata and package data, then install the wheel (not editable,
# the checkout not on sys.path) into two clean venvs and, from a folder outside the
# checkout:
#   1. the wheel with its plain dependencies, no extra (at the versions constraints.txt
#      locks): none of the extras' packages (matplotlib, sacrebleu, conllu, tensorboard,
#      tensorflow-text) came with it; keras-seq --help, then a tiny train lm -> eval lm ->
#      export tflite -> demo --lines;
#   2. the wheel with --no-deps plus only its `litert` extra: keras-seq demo --lines on the
#      model from 1, with TensorFlow not importable.
#   scripts/package_check.sh [PYTHON]     (PYTHON builds the venvs; default python3)
set -euo pipefail
python=${1:-python3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/keras-seq-package.XXXXXX")
trap 'rm -rf "$work"' EXIT
say() { printf '\n== %s\n' "$*"; }

say "build: sdist and wheel"
"$python" -m venv "$work/build-env"
"$work/build-env/bin/python" -m pip install --quiet -c "$root/constraints.txt" build
"$work/build-env/bin/python" -m build --outdir "$work/dist" "$root" >"$work/build.log" 2>&1 \
  || { tail -n 30 "$work/build.log"; exit 1; }
wheel=$(ls "$work"/dist/keras_seq-*.whl)
ls -l "$work/dist"
"$work/build-env/bin/python" "$root/scripts/wheel_contents.py" "$wheel"

cd "$work"  # outside the checkout from here on: nothing imports from it
say "venv 1: the wheel with its dependencies (no extra)"
"$python" -m venv "$work/full"
"$work/full/bin/python" -m pip install --quiet -c "$root/constraints.txt" "$wheel"
"$work/full/bin/python" -c "import importlib.util as u; \
found = [m for m in ('matplotlib', 'sacrebleu', 'conllu', 'tensorboard', 'tensorflow_text') \
         if u.find_spec(m)]; assert not found, f'installed without an extra: {found}'; \
print('the extras\' packages: none installed')"
"$work/full/bin/python" -c "import keras_seq, sys; \
assert '$root' not in keras_seq.__file__, keras_seq.__file__; print('keras_seq from', keras_seq.__file__)"
ks="$work/full/bin/keras-seq"
"$ks" --help >/dev/null && echo "keras-seq --help: ok"
"$ks" data stats --data tinyshakespeare --tokenizer word --min-count 2 | tail -n 3
"$ks" train lm --run-dir "$work/run" --data tinyshakespeare --tokenizer word --min-count 2 \
  --units 32 --embed-dim 16 --batch-size 8 --bptt 10 --epochs 1 --max-steps-per-epoch 20 \
  --eval-tokens 2000 --sample-tokens 0 --quiet
"$ks" eval lm --run-dir "$work/run" --split val | tail -n 4
"$ks" export tflite --run-dir "$work/run" --out "$work/tflite" --variants dynamic \
  --graphs step | tail -n 3
model="$work/tflite/step_dynamic.tflite"
printf 'the king is\n/gen 5\n' | "$ks" demo --model "$model" --lines

say "venv 2: the wheel (--no-deps) and its litert extra only, no TensorFlow"
"$python" -m venv "$work/litert"
"$work/litert/bin/python" -m pip install --quiet --no-deps "$wheel"
extra=$("$work/litert/bin/python" "$root/scripts/wheel_contents.py" --extra litert "$wheel")
echo "litert extra: $extra"
# pip then says the core dependencies (TensorFlow…) are missing: that is this venv's point
# shellcheck disable=SC2086  # one requirement per word
"$work/litert/bin/python" -m pip install --quiet -c "$root/constraints.txt" $extra 2>&1 |
  grep -v "which is not installed\|dependency resolver does not" || true
if "$work/litert/bin/python" -c "import tensorflow" 2>/dev/null; then
  echo "error: TensorFlow is importable in the litert-only venv"; exit 1
fi
echo "TensorFlow: not installed"
printf 'the king is\n/gen 5\n' | "$work/litert/bin/keras-seq" demo --model "$model" --lines
say "package check: ok"
