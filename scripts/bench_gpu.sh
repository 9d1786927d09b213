#!/usr/bin/env bash
# The GPU check in one command (python -m keras_seq.benchmarks.gpu): the environment, whether
# the cuDNN call is in the compiled train step, the gpu-marked tests (tests/test_gpu.py, with
# --durations=0), then keras-seq vs Keras's built-in LSTM/GRU on the GPU in fp32 and
# mixed_float16, as ONE markdown table in $OUT/bench_gpu.md (also printed), rewritten after
# every step. Each step has its own time limit; the whole run ends inside 8 minutes (wheel
# install 60 s, then --budget 450 s, hard-stopped at 470 s).
#
#   make bench-gpu BACKEND=jax          # or torch, tensorflow; = bash scripts/bench_gpu.sh jax
#
# On a machine without Keras (the workplace's GPU machine has JAX, PyTorch, pytest and cuDNN
# but no TensorFlow or Keras), wheels carried in .whl/ are installed into /tmp/site first:
#   keras 3.15.1, namex, optree for CPython 3.12 (scripts/gpu_wheels.sh downloads them).
# Environment: PYTHON (default python3: that machine has no .venv), OUT (default
# runs/bench-gpu), BENCH_GPU_ARGS (more arguments, e.g. "--device cpu --quick"),
# BLOCK_TENSORFLOW=1 (make tensorflow unimportable, as on the GPU machine: a sitecustomize,
# put first on PYTHONPATH, that sets sys.modules["tensorflow"] = None).
#
# Dry run here, without a GPU (the gpu tests then run on reference kernels on the CPU):
#   PYTHON=.venv/bin/python BLOCK_TENSORFLOW=1 BENCH_GPU_ARGS="--device cpu --quick" \
#     bash scripts/bench_gpu.sh jax
set -u
cd "$(dirname "$0")/.."
BACKEND="${1:-${BACKEND:-jax}}"
PY="${PYTHON:-python3}"
export OUT="${OUT:-runs/bench-gpu}"
export KERAS_BACKEND="$BACKEND" PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT"

if [ "${BLOCK_TENSORFLOW:-0}" = 1 ]; then
  block="$(mktemp -d)"
  # None in sys.modules: `import tensorflow` raises ModuleNotFoundError and
  # importlib.util.find_spec answers None, as where it is not installed (torch._dynamo probes
  # optional modules with find_spec; a meta-path finder that raises breaks it).
  cat > "$block/sitecustomize.py" <<'PY'
import sys
for _name in ("tensorflow", "tensorflow_text", "tf_keras"):
    sys.modules[_name] = None
PY
  export PYTHONPATH="$block:$PYTHONPATH"
  if "$PY" -c "import tensorflow" >/dev/null 2>&1; then
    echo "bench-gpu: BLOCK_TENSORFLOW=1 but tensorflow still imports" >&2; exit 2
  fi
  echo "bench-gpu: tensorflow blocked ($block/sitecustomize.py)" >&2
fi

if ! "$PY" -c "import keras" >/dev/null 2>&1; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    echo "bench-gpu: installing $(ls .whl/*.whl | xargs -n1 basename | tr '\n' ' ')into /tmp/site" >&2
    if timeout 60 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target /tmp/site .whl/*.whl; then
      export PYTHONPATH="$PYTHONPATH:/tmp/site"
    else
      echo "bench-gpu: the wheel install failed; going on (the table will say what broke)" >&2
    fi
  else
    echo "bench-gpu: '$PY' cannot import keras with KERAS_BACKEND=$BACKEND and .whl/ has no" \
         "wheels (scripts/gpu_wheels.sh); going on (the table will say what broke)" >&2
  fi
fi

# shellcheck disable=SC2086  # BENCH_GPU_ARGS is a list of words
exec timeout 470 "$PY" -m keras_seq.benchmarks.gpu --backend "$BACKEND" --out "$OUT" \
  ${BENCH_GPU_ARGS:-}
