"""The cell registry (keras_seq.cells.CELLS) is the one place cells are named.

A grep over keras_seq/ fails on a hand-written list of cell names outside it (a tuple, list
or set literal, or a dict's keys, holding two or more of its names: ``("gru", "lstm")``,
``kind in ("lstm", "lstmp")``, ``{"rnn": SimpleRNN, "gru": GRU}``); strings in docstrings
and messages are not lists and pass. A toy cell registered with one row trains and exports
through the LM and the classifier (tests/toy_cell.py).
"""

import ast
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest

from keras_seq import cells as registry
from keras_seq.cells import ALIASES, CELLS, CellSpec, cell_spec, cells_for, registered
from keras_seq.tasks.classify.config import ClassifyConfig
from keras_seq.tasks.lm.config import LMConfig
from tests.toy_cell import TOY

PACKAGE = Path(__file__).resolve().parents[1] / "keras_seq"

#: files that keep a list of cell names on purpose, and why
ALLOWED = {
    "benchmarks/cells.py": "`bench cells --cells` values and its reports' rows say simple_rnn "
                           "(the registry reads it as an alias of rnn)",
    "benchmarks/gpu.py": "the cells with a cuDNN kernel that the GPU benchmark times",
    "analysis/report.py": "the textbook's claims per cell, checked against measurements",
    "analysis/memory.py": "memory probes mix cells with attn-gru (a model) and the seed's "
                          "claims per cell",
    "analysis/_common.py": "plot labels and colours, with nplm and attn-gru (models)",
    "benchmarks/backends.py": "Keras's backend functions lstm()/gru() it patches, not cells",
}


def _names() -> set[str]:
    return set(CELLS) | set(ALIASES)


def cell_lists(source: str, names: set[str]) -> list[int]:
    """Lines of ``source`` holding a tuple/list/set literal or dict keys with ≥ 2 of
    ``names`` as string constants."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        hits = {i.value for i in items if isinstance(i, ast.Constant) and i.value in names}
        if len(hits) >= 2:
            found.append(node.lineno)
    return found


def test_the_scan_catches_what_it_should_and_passes_prose():
    names = _names()
    caught = ['CELLS = {"rnn": SimpleRNN, "gru": GRU}', 'CHOICES = ("gru", "lstm")',
              'ok = kind in ("lstm", "lstmp")', 'x = cell.endswith(["lstm", "lstmp"])']
    for line in caught:
        assert cell_lists(line, names) == [1], line
    prose = ['"""cell: ``"rnn"``, ``"gru"`` or ``"lstm"``."""',
             'raise ValueError(f"expected one of rnn, gru, lstm, got {cell!r}")',
             'ok = kind == "lstm"', 'x = ("lstm", 4)']
    for line in prose:
        assert cell_lists(line, names) == [], line


def test_no_cell_name_list_outside_the_registry():
    names, problems = _names(), []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "cells.py" or rel in ALLOWED:
            continue
        for line in cell_lists(path.read_text(encoding="utf-8"), names):
            problems.append(f"keras_seq/{rel}:{line}")
    assert not problems, ("cell names listed outside keras_seq/cells.py (read "
                          "CELLS / cells_for / cell_spec instead): " + ", ".join(problems))


def test_allowed_files_still_need_their_exemption():
    names = _names()
    stale = [rel for rel in ALLOWED if not cell_lists((PACKAGE / rel).read_text("utf-8"), names)]
    assert not stale, f"drop these from ALLOWED, they list no cells any more: {stale}"


def test_choices_and_errors_read_the_table():
    assert cells_for("seq2seq") == ("gru", "lstm")
    assert cells_for("classify") == ("rnn", "gru", "lstm")
    assert cells_for("lm") == ("rnn", "gru", "lstm", "lstmp", "keras-rnn", "keras-gru",
                               "keras-lstm")
    assert cell_spec("simple_rnn") is CELLS["rnn"]  # the benchmarks' name
    with pytest.raises(ValueError, match=r"received cell='lstmp', an unknown cell for a tag "
                                         r"model; expected one of rnn, gru, lstm .*one CELLS row"):
        cell_spec("lstmp", "tag")
    with registered(TOY):
        assert "toy" in LMConfig.__dataclass_fields__["cell"].metadata["choices"]
        assert LMConfig(cell="toy").problems() == []
        assert ClassifyConfig(cell="toy").problems() == []
    assert "toy" not in CELLS and "toy" not in cells_for("lm")
    assert any("cell must be one of" in p for p in _declared(LMConfig(cell="toy")))


def _declared(config):
    from keras_seq.options import declared_problems

    return declared_problems(config)


def test_a_registered_name_is_not_replaced():
    with pytest.raises(ValueError, match="already has"):
        with registered(CellSpec("gru", CELLS["gru"].layer, CELLS["gru"].cell, 3)):
            pass


def test_params_read_gates_and_projection():
    from keras_seq.layers import count_params

    assert count_params("cifg", 4, 3) == 3 * (4 * 3 + 3 * 3 + 3)
    with registered(TOY):
        layer = TOY.build(3)
        layer.build((None, 5, 4))
        assert count_params("toy", 4, 3) == 2 * (4 * 3 + 3 * 3 + 3) == layer.count_params()


def _fit_two_steps(model, x, y):
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model(x[:1])  # built, so the weights exist before fit
    before = [np.array(w) for w in model.trainable_weights]
    history = model.fit(x, y, batch_size=4, epochs=1, steps_per_epoch=2, verbose=0)
    assert np.isfinite(history.history["loss"]).all()
    after = model.trainable_weights
    assert before and any(not np.allclose(b, np.array(a)) for b, a in zip(before, after))


@pytest.fixture
def toy():
    with registered(TOY) as spec:
        yield spec


def test_toy_cell_trains_and_exports_through_the_lm(toy, tmp_path):
    from keras_seq.export.graphs import LMGraphs
    from keras_seq.export.tflite import build_saved_model, convert
    from keras_seq.models import RecurrentLM

    keras.utils.set_random_seed(0)
    lm = RecurrentLM(12, embed_dim=4, units=6, num_layers=2, cell="toy")
    ids = np.random.default_rng(0).integers(0, 12, (8, 5)).astype("int32")
    _fit_two_steps(lm, ids, np.roll(ids, -1, axis=1))
    assert [type(r).__name__ for r in lm.rnns] == ["ToyRNN", "ToyRNN"]

    graphs = LMGraphs(lm)
    assert graphs.kind == "toy" and graphs.state_names == ["h0", "h1"]
    assert not graphs.fusable()
    build_saved_model(graphs, tmp_path / "sm", ["step"])
    flat, _ = convert(tmp_path / "sm", "step", "float32")
    logits = _stream(flat, ids[0], graphs.state_names, "logits")
    np.testing.assert_allclose(logits, np.asarray(lm(ids[:1]))[0, -1], atol=1e-5)


def test_toy_cell_trains_and_exports_through_the_classifier(toy, tmp_path):
    from keras_seq.export.graphs import LMGraphs
    from keras_seq.export.tflite import build_saved_model, convert
    from keras_seq.models import SequenceClassifier

    keras.utils.set_random_seed(0)
    clf = SequenceClassifier(12, 3, embed_dim=4, units=6, cell="toy")
    ids = np.random.default_rng(1).integers(1, 12, (8, 5)).astype("int32")
    _fit_two_steps(clf, ids, np.arange(8) % 3)
    graphs = LMGraphs(clf, output="scores")  # the streaming classifier's step graph
    assert graphs.state_names == ["h0"]
    build_saved_model(graphs, tmp_path / "sm", ["step"])
    flat, _ = convert(tmp_path / "sm", "step", "float32")
    scores = _stream(flat, ids[0], graphs.state_names, "scores")
    expected = np.asarray(keras.ops.softmax(clf(ids[:1]), axis=-1))[0]
    np.testing.assert_allclose(scores, expected, atol=1e-5)


def _stream(flat, ids, state_names, output):
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=flat)
    run = it.get_signature_runner(list(it.get_signature_list())[0])
    inputs = {d: np.zeros(run.get_input_details()[d]["shape"], np.float32)
              for d in state_names}
    for token in ids:
        out = run(token=np.array([token], np.int32), **inputs)
        inputs = {name: out[name] for name in state_names}
    return out[output][0]


def test_registry_module_loads_no_keras():
    code = ("import sys, keras_seq.cells as r, keras_seq.tasks.lm.config; "
            "r.cells_for('lm'); assert 'keras' not in sys.modules, 'keras imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert registry.CELLS is CELLS


def test_importing_the_layers_package_registers_every_serializable():
    """A script's ``import keras_seq.layers`` is what lets ``keras.saving.load_model`` find
    keras-seq's layers: the package imports them, the table does not stand in for that."""
    code = ("import keras, keras_seq.layers\n"
            "for name in ('LSTM', 'GRU', 'SimpleRNN', 'LSTMP', 'LSTMCell', 'TiedLogits'):\n"
            "    assert keras.saving.get_registered_object('keras_seq>' + name), name")
    subprocess.run([sys.executable, "-c", code], check=True)
