# keras-seq: two set-up commands (`make demo`, `make test`); both bootstrap .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DATA_DIR ?= $(abspath ../shared/data)

.PHONY: venv test test-all demo lint clean

venv: $(STAMP)

# Re-install only when the pins or the package metadata change (idempotent).
$(STAMP): requirements.txt setup.cfg pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

test: $(STAMP)
	KERAS_SEQ_DATA_DIR=$${KERAS_SEQ_DATA_DIR:-$(DATA_DIR)} $(BIN)/python -m pytest -q -m "not slow"

test-all: $(STAMP)
	KERAS_SEQ_DATA_DIR=$${KERAS_SEQ_DATA_DIR:-$(DATA_DIR)} $(BIN)/python -m pytest -q

# The main job on the embedded corpus (offline). For now: corpus and tokenizer statistics.
demo: $(STAMP)
	$(BIN)/keras-seq data stats --data python-docs --tokenizer char
	$(BIN)/keras-seq data stats --data python-docs --tokenizer word
	$(BIN)/keras-seq data stats --data python-docs --tokenizer subword --vocab-size 2000

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
