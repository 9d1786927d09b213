"""Shared test set-up: corpora come from ../shared/data (never downloaded), TF logs quiet."""

import os
from pathlib import Path

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
if "KERAS_SEQ_DATA_DIR" not in os.environ and _SHARED.is_dir():
    os.environ["KERAS_SEQ_DATA_DIR"] = str(_SHARED)


@pytest.fixture
def shakespeare_available():
    folder = os.environ.get("KERAS_SEQ_DATA_DIR")
    if not folder or not (Path(folder) / "tinyshakespeare.txt").is_file():
        pytest.skip("tinyshakespeare.txt not found in $KERAS_SEQ_DATA_DIR")
    return Path(folder) / "tinyshakespeare.txt"


@pytest.fixture
def tiny_text():
    return (
        "The cat sat on the mat.\n"
        "The dog sat on the log!\n"
        "\n"
        "Don't stop: the cat's hat, the dog's bone.\n"
    )


@pytest.fixture
def eager_tf_functions():
    """Run ``tf.function`` s eagerly for one test: tiny models then train without tracing,
    which is most of a tiny training run's time. For the fast versions of `slow` end-to-end
    tests; the slow versions keep graph mode."""
    import tensorflow as tf

    tf.config.run_functions_eagerly(True)
    try:
        yield
    finally:
        tf.config.run_functions_eagerly(False)
