# keras-seq: two set-up commands (`make demo`, `make test`); both bootstrap .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA_DIR ?= $(abspath ../shared/data)

.PHONY: venv web-deps test test-all demo reliability reliability-quick lint clean

venv: $(STAMP)

# LiteRT.js for the browser demo (`keras-seq export web` copies it into every site), pinned
# with its integrity hashes in keras_seq/web/package-lock.json; offline after this.
WEB_DIR := keras_seq/web
WEB_STAMP := $(WEB_DIR)/node_modules/.installed
web-deps: $(WEB_STAMP)

$(WEB_STAMP): $(WEB_DIR)/package.json $(WEB_DIR)/package-lock.json
	npm ci --prefix $(WEB_DIR) --no-audit --no-fund --loglevel=error
	touch $(WEB_STAMP)

# Re-install only when the pins or the package metadata change (idempotent).
# kenlm has no wheel: pip compiles it from its sdist (C++, 88 s on its own), so it builds
# beside the rest of the install, not after it (it has no dependencies; the second pip
# installs everything else). From scratch (no pip cache) on 2 cores: 3 min 12 s, against
# 3 min 28 s in one pip; the other packages' unpacking is the longer path.
$(STAMP): requirements.txt setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	grep -v '^kenlm' requirements.txt > $(VENV)/requirements-no-kenlm.txt
	$(BIN)/python -m pip install --quiet --no-deps $$(grep -o '^kenlm[^ #]*' requirements.txt) & \
	    kenlm=$$!; $(BIN)/python -m pip install --quiet -r $(VENV)/requirements-no-kenlm.txt; \
	    rest=$$?; wait $$kenlm && test $$rest -eq 0
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# One pytest worker per core (pytest-xdist): TensorFlow start-up and tracing dominate the
# small tests, so two workers on two cores finish in 0.66x the serial time (172 s vs 260 s).
PYTEST := $(BIN)/python -m pytest -q -n auto --durations=15

# The main run uses the TensorFlow backend; tests/backends (layers and models written
# backend-neutrally, and the fused-kernel path on reference kernels) then runs again under
# JAX and under PyTorch (their CPU wheels are test dependencies).
# The tests compile hundreds of tiny XLA programs (every JAX test, the JAX runs the TF
# tests start, TF's jit_compile ones) and run each a few times: XLA's LLVM back end at -O0
# compiles them faster (JAX's train/save/load and adaptive-softmax fit tests: 104 s → 64 s).
TEST_ENV = XLA_FLAGS="--xla_backend_optimization_level=0 $${XLA_FLAGS:-}" \
    KERAS_SEQ_DATA_DIR=$${KERAS_SEQ_DATA_DIR:-$(DATA_DIR)}
test: $(STAMP) $(WEB_STAMP)
	$(TEST_ENV) $(PYTEST) -m "not slow"
	KERAS_BACKEND=jax $(TEST_ENV) $(PYTEST) -m "not slow" -p no:cacheprovider tests/backends
	KERAS_BACKEND=torch $(TEST_ENV) $(PYTEST) -m "not slow" -p no:cacheprovider tests/backends

test-all: $(STAMP) $(WEB_STAMP)
	$(TEST_ENV) $(PYTEST)

# The main job, offline (~7 min on 2 cores): Kneser-Ney n-grams of orders 2-5 and an LSTM LM
# on tinyshakespeare (shipped in the package), SavedModel + TFLite export, the on-device
# benchmark (neural vs n-gram), the demo model and a summary table; then the LiteRT-only demo.
DEMO_OUT ?= runs/pipeline
demo: $(STAMP) $(WEB_STAMP)
	$(BIN)/keras-seq data stats --data tinyshakespeare --tokenizer word --min-count 2
	$(BIN)/keras-seq pipeline --out $(DEMO_OUT) --epochs 5
	printf 'my lord\nthe king is\n/gen 30\n' | \
	    $(BIN)/keras-seq demo --model $(DEMO_OUT)/demo/model.tflite --lines
	@echo "Try it yourself: $(BIN)/keras-seq demo --model $(DEMO_OUT)/demo/model.tflite"
	@echo "In a browser:    $(BIN)/keras-seq demo --web --site $(DEMO_OUT)/web"

# The GPU check in one command, inside 8 minutes (run it on a machine with an NVIDIA GPU,
# e.g. through the workplace's device tool with .whl carried): environment, whether the cuDNN
# call is in the compiled step, gpu-marked tests with durations, then keras-seq vs Keras's
# built-in LSTM/GRU in fp32 and mixed_float16, one table in $OUT/bench_gpu.md. No venv: it
# uses that machine's python3 (PYTHON=...) and installs .whl/ (scripts/gpu_wheels.sh) if
# Keras is missing there. BACKEND: jax (default), torch or tensorflow. Dry run on a CPU:
# PYTHON=.venv/bin/python BLOCK_TENSORFLOW=1 BENCH_GPU_ARGS="--device cpu --quick".
BACKEND ?= jax
.PHONY: bench-gpu
bench-gpu:
	bash scripts/bench_gpu.sh $(BACKEND)

# The fault campaign (tools/reliability, not part of the library): real runs killed with
# SIGKILL at every write point, damaged checkpoints, full disks, fuzzed files, hostile
# requests and a 10-minute soak; the full scale (~25 min) rewrites
# docs/reliability.md. `make reliability-quick` runs the quick subset and only prints it.
reliability: $(STAMP)
	KERAS_SEQ_DATA_DIR=$${KERAS_SEQ_DATA_DIR:-$(DATA_DIR)} \
	    $(BIN)/python -m tools.reliability --full --out docs/reliability.md

reliability-quick: $(STAMP)
	KERAS_SEQ_DATA_DIR=$${KERAS_SEQ_DATA_DIR:-$(DATA_DIR)} $(BIN)/python -m tools.reliability

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) $(WEB_DIR)/node_modules build *.egg-info .pytest_cache .ruff_cache
