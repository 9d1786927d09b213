#!/usr/bin/env bash
# Download into .whl/ (git-ignored) the wheels scripts/bench_gpu.sh installs on a GPU machine
# without Keras: keras 3.15.1 and the two of its requirements that machine lacks (namex,
# optree), for CPython 3.12 on manylinux x86-64. Its image already has absl-py, h5py,
# ml-dtypes, numpy, packaging, rich and typing-extensions (/work/.library/device/KINDS.md).
set -eu
cd "$(dirname "$0")/.."
# This machine's .venv when there is one (pip download needs a network), else python3.
if [ -x .venv/bin/python ]; then PY="${PYTHON:-.venv/bin/python}"; else PY="${PYTHON:-python3}"; fi
"$PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  --platform manylinux1_x86_64 -d .whl keras==3.15.1 namex==0.1.0 optree==0.20.0
ls -l .whl
