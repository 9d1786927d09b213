# keras-seq: two set-up commands (`make demo`, `make test`); both bootstrap .venv when missing.
# Needs Python 3.11+ with venv. Optional, named at the start of every target with what goes
# without it (scripts/prereqs.sh): a C++ compiler (KenLM's Python module, for the KenLM
# parity tests), npm (LiteRT.js, for the browser site and its tests), Chromium (the browser
# tests). Nothing else is downloaded but packages.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA_DIR ?= $(abspath ../shared/data)
# PyPI's torch for Linux is a CUDA build of several GB. `make test` asks for the CPU build by
# its local version (torch==2.13.0+cpu, which PyPI does not have): from a local wheel where
# pip finds one (find-links, a mirror), else from PyTorch's CPU index, TORCH_INDEX.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
TORCH_CPU = torch==$$(grep -o '^torch==[0-9.]*' constraints.txt | cut -d= -f3)+cpu

.PHONY: prereqs venv web-deps test test-slow test-all demo package-check lock reliability \
    reliability-quick lint clean lmplz

prereqs:
	@bash scripts/prereqs.sh $(PYTHON)

venv: prereqs $(STAMP)

# `make demo`'s environment: keras-seq with only what the main job runs, the core (TensorFlow,
# Keras, LiteRT, numpy), `plot` (its PNGs) and `quantize` (the int4 model), each at its
# constraints.txt version: no torch, JAX, Playwright or test tools (54 s here from pip's cache).
# `make test` adds the rest to the same .venv.
DEMO_STAMP := $(VENV)/.installed-demo
$(DEMO_STAMP): constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[plot,quantize]"
	touch $(DEMO_STAMP)

# LiteRT.js for the browser demo (`keras-seq export web` copies it into every site), pinned
# with its integrity hashes in keras_seq/web/package-lock.json; offline after this. Without
# npm the browser site and tests skip, saying why.
WEB_DIR := keras_seq/web
WEB_STAMP := $(WEB_DIR)/node_modules/.installed
web-deps:
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory $(WEB_STAMP); \
	else echo "web-deps: skipped, npm not found (no LiteRT.js: no browser site, tests/test_web.py skips)"; fi

$(WEB_STAMP): $(WEB_DIR)/package.json $(WEB_DIR)/package-lock.json
	npm ci --prefix $(WEB_DIR) --no-audit --no-fund --loglevel=error
	touch $(WEB_STAMP)

# Re-install only when the pins or the package metadata change (idempotent): keras-seq
# editable with every extra (requirements.txt), each package at its constraints.txt version.
# kenlm has no wheel: pip compiles it from its sdist (C++, 88 s on its own), so it builds
# beside the rest of the install, not after it (it has no dependencies); without a C++
# compiler it is left out and the KenLM parity tests skip, saying why.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_CPU)" 2>/dev/null || \
	    $(BIN)/python -m pip install --quiet "$(TORCH_CPU)" --extra-index-url $(TORCH_INDEX)
	if command -v "$${CXX:-c++}" >/dev/null 2>&1; then \
	    $(BIN)/python -m pip install --quiet --no-deps $$(grep -o '^kenlm==[^ #]*' constraints.txt) & \
	    kenlm=$$!; else kenlm=; echo "venv: no C++ compiler, kenlm left out"; fi; \
	$(BIN)/python -m pip install --quiet -r requirements.txt; rest=$$?; \
	if [ -n "$$kenlm" ]; then wait $$kenlm || exit 1; fi; test $$rest -eq 0
	touch $(STAMP)

# The lock, from this venv (after `make test` passed in it): every installed package, exact.
lock: $(STAMP)
	{ sed -n '/^#/p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable | \
	    grep -v '^#' | sed 's/+cpu$$//' | LC_ALL=C sort -f; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# One pytest worker per core (pytest-xdist): TensorFlow start-up and tracing dominate the
# small tests, so two workers on two cores finish in 0.66x the serial time (172 s vs 260 s).
PYTEST := $(BIN)/python -m pytest -q -n auto --dist worksteal --durations=15

# The main run uses the TensorFlow backend; tests/backends (layers and models written
# backend-neutrally, and the fused-kernel path on reference kernels) runs again under JAX
# and under PyTorch, each where its package is installed (it says so where not; a failure
# where $$KERAS_SEQ_REQUIRE names it, as in CI). scripts/test_phases.sh runs the two backend
# phases in one process beside the TensorFlow phase and prints their logs after it.
# The tests compile hundreds of tiny XLA programs (every JAX test, the JAX runs the TF
# tests start, TF's jit_compile ones) and run each a few times: XLA's LLVM back end at -O0
# compiles them faster (JAX's train/save/load and adaptive-softmax fit tests: 104 s → 64 s).
# TensorFlow's ops run on one thread each (TF_NUM_INTRAOP_THREADS=1): two pytest workers and
# the backend phases already fill the two cores, and a thread pool per op only contends with
# them (a 75-test TensorFlow subset, 2 workers, AMD EPYC, load < 2.5 at the start: 74.2 and
# 75.2 s against 76.0 and 81.6 s with TensorFlow's default pool, alternated; 70 vs 96 s
# with other work beside it).
TEST_ENV = XLA_FLAGS="--xla_backend_optimization_level=0 $${XLA_FLAGS:-}" \
    TF_NUM_INTRAOP_THREADS=$${TF_NUM_INTRAOP_THREADS:-1} \
    KERAS_SEQ_DATA_DIR=$${KERAS_SEQ_DATA_DIR:-$(DATA_DIR)}

# The fast tier: every check, each heavy one in a fast version (the `slow` marker).
test: prereqs $(STAMP) web-deps
	$(TEST_ENV) bash scripts/test_phases.sh $(BIN)/python "not slow"

# The slow tier (CI runs it after make test): the full versions of the heavy checks
# (tests/backends has none: its phases would collect nothing).
test-slow: prereqs $(STAMP) web-deps
	$(TEST_ENV) $(PYTEST) -m slow

# Both tiers.
test-all: test test-slow

# The package as a user installs it: sdist + wheel built, the wheel installed into two clean
# venvs (full; litert extra only, without TensorFlow) and run from outside the checkout.
package-check: prereqs
	bash scripts/package_check.sh $(PYTHON)

# The main job, offline (from a fresh clone of dd0c95c on a 2-core AMD EPYC: 7 min 23 s with
# the install, the pipeline 6.5 min; 9 min 12 s at d4393a4, which installed every extra): Kneser-Ney
# n-grams of orders 2-5 and a GRU LM on tinyshakespeare (shipped in the package), SavedModel
# + TFLite export, the on-device benchmark (neural vs n-gram), the demo model and a summary
# table; then the LiteRT-only demo.
DEMO_OUT ?= runs/pipeline
# the neural + n-gram + cache mixture, where the pipeline shipped one
DEMO_MIX = $$([ -f $(DEMO_OUT)/demo/mix.json ] && echo --mix $(DEMO_OUT)/demo/mix.json)
demo: prereqs $(DEMO_STAMP) web-deps
	$(BIN)/keras-seq data stats --data tinyshakespeare --tokenizer word --min-count 2
	$(BIN)/keras-seq pipeline --out $(DEMO_OUT)
	printf 'my lord\nthe king is\n/gen 30\n' | \
	    $(BIN)/keras-seq demo --model $(DEMO_OUT)/demo/model.tflite --lines $(DEMO_MIX)
	@echo "Try it yourself: $(BIN)/keras-seq demo --model $(DEMO_OUT)/demo/model.tflite $(DEMO_MIX)"
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

# KenLM's lmplz, the peer `keras-seq bench ngram --lmplz` and `bench scaling --lmplz` time
# against (docs/language-models.md, docs/scaling.md), built from the kenlm sdist at
# constraints.txt's version into build/kenlm/bin/lmplz (pip downloads the sdist: the one
# network step). Needs a C++ compiler, cmake and Boost's headers; it says which Debian
# packages to install when one is missing. Not part of make test (the parity tests use
# kenlm's Python module). 33 s on 2 AMD EPYC cores once the Debian packages are in.
LMPLZ := build/kenlm/bin/lmplz
KENLM_PIN = $$(grep -o '^kenlm==[^ \#]*' constraints.txt)
LMPLZ_APT := cmake g++ libboost-program-options-dev libboost-system-dev libboost-thread-dev \
    libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev
lmplz: $(LMPLZ)

$(LMPLZ): constraints.txt
	@missing=; for tool in cmake "$${CXX:-c++}"; do \
	    command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if command -v dpkg >/dev/null 2>&1; then for pkg in $(LMPLZ_APT); do \
	    dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; fi; \
	if [ -n "$$missing" ]; then echo "lmplz: missing$$missing"; \
	    echo "lmplz: on Debian/Ubuntu: sudo apt-get install $(LMPLZ_APT)"; exit 1; fi
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	rm -rf build/kenlm && mkdir -p build/kenlm/bin
	$(BIN)/python -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
	    -d build/kenlm "$(KENLM_PIN)" || $(BIN)/python -m pip download --quiet --no-deps \
	    --no-binary :all: -d build/kenlm "$(KENLM_PIN)"
	tar xzf build/kenlm/kenlm-*.tar.gz -C build/kenlm
	cmake -S build/kenlm/kenlm-* -B build/kenlm/cmake -DCMAKE_BUILD_TYPE=Release \
	    -DCOMPILE_TESTS=OFF -DENABLE_PYTHON=OFF
	cmake --build build/kenlm/cmake --target lmplz -j $$(nproc 2>/dev/null || echo 2)
	cp build/kenlm/cmake/bin/lmplz $(LMPLZ)
	$(LMPLZ) --help 2>&1 | head -n 1

clean:
	rm -rf $(VENV) $(WEB_DIR)/node_modules build *.egg-info .pytest_cache .ruff_cache
