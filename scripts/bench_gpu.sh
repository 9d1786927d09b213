#!/usr/bin/env bash
# The GPU check in one command: the gpu-marked tests (tests/test_gpu.py), then keras-seq vs
# Keras's built-in LSTM/GRU on the GPU in fp32 and mixed_float16, as ONE markdown table in
# $OUT/bench_gpu.md (also printed). Each step's failure is a row of the table; the run stays
# inside ~7 minutes (scripts/bench_gpu.py --budget).
#
#   make bench-gpu BACKEND=jax          # or torch, tensorflow; = bash scripts/bench_gpu.sh jax
#
# On a machine without Keras (the workplace's GPU machine has JAX, PyTorch and cuDNN but no
# TensorFlow or Keras), wheels carried in .whl/ are installed into /tmp/site first:
#   keras 3.15.1, namex, optree for CPython 3.12 (scripts/gpu_wheels.sh downloads them).
# Environment: PYTHON (default python3), OUT (default runs/bench-gpu), BENCH_GPU_ARGS (more
# arguments for scripts/bench_gpu.py, e.g. "--precisions off,mixed_bfloat16 --quick").
set -u
cd "$(dirname "$0")/.."
BACKEND="${1:-${BACKEND:-jax}}"
PY="${PYTHON:-python3}"
export OUT="${OUT:-runs/bench-gpu}"
export KERAS_BACKEND="$BACKEND" PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"

if ! "$PY" -c "import keras" >/dev/null 2>&1; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    echo "bench-gpu: installing $(ls .whl/*.whl | xargs -n1 basename | tr '\n' ' ')into /tmp/site" >&2
    if "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl; then
      export PYTHONPATH="$PWD:/tmp/site${PYTHONPATH#"$PWD"}"
    else
      echo "bench-gpu: the wheel install failed; going on (the table will say what broke)" >&2
    fi
  else
    echo "bench-gpu: '$PY' cannot import keras with KERAS_BACKEND=$BACKEND and .whl/ has no" \
         "wheels (scripts/gpu_wheels.sh); going on (the table will say what broke)" >&2
  fi
fi

# shellcheck disable=SC2086  # BENCH_GPU_ARGS is a list of words
exec "$PY" scripts/bench_gpu.py --backend "$BACKEND" --out "$OUT" ${BENCH_GPU_ARGS:-}
