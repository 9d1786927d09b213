"""Reliability area "tflite": the quick campaign, and regression tests for damaged files.

Files that crash plain LiteRT (segfaults found by the campaign) are loaded in a worker
subprocess, so that a crash fails the test instead of killing pytest.
"""

import hashlib
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import flatbuffers
import numpy as np
import pytest
from ai_edge_litert import schema_py_generated as schema

from keras_seq.cli import main
from keras_seq.errors import KerasSeqError
from keras_seq.runtime.flatbuffer_check import CorruptModelError, check_tflite
from keras_seq.runtime.litert import LiteRTLM
from tools.reliability.tflite import (
    KNOWN_CRASHERS,
    SCENARIOS,
    SOURCES,
    export_models,
    operators_named,
    run,
    run_workers,
)

MODEL = "step_dynamic"


@pytest.fixture(scope="module")
def models():
    return export_models(print)


@pytest.fixture
def folder(models, tmp_path):
    """A copy of the exported model: ``step_dynamic.tflite``, its .json, tokenizer.json."""
    for name in (f"{MODEL}.tflite", f"{MODEL}.json", "tokenizer.json"):
        shutil.copy(models / name, tmp_path / name)
    return tmp_path


def _original(folder):
    return (folder / f"{MODEL}.tflite").read_bytes()


def _damaged(folder, name: str, data: bytes | None = None, model=None, source: str = MODEL):
    """``name.tflite`` holding ``data`` (or ``model`` packed) with metadata that matches
    it (``source``'s, with the new file's hash), as if the file was damaged before the
    export hashed it."""
    if model is not None:
        builder = flatbuffers.Builder(1024)
        builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        data = bytes(builder.Output())
    path = folder / f"{name}.tflite"
    path.write_bytes(data)
    meta = json.loads((folder / f"{source}.json").read_text())
    meta["tflite_sha256"] = hashlib.sha256(data).hexdigest()
    path.with_suffix(".json").write_text(json.dumps(meta))
    return path


def test_quick_campaign_has_no_failures(tmp_path):
    rows = run("quick", tmp_path, print)
    assert [row.scenario for row in rows][:len(SCENARIOS)] == list(SCENARIOS.values())
    assert len(rows) == len(SCENARIOS) + 1 and all(row.cases > 0 for row in rows)
    assert all(row.ok for row in rows), [row for row in rows if not row.ok]
    assert sum(row.cases for row in rows) >= 30


def test_valid_model_still_loads_and_streams(folder):
    data = _original(folder)
    summary = check_tflite(data, "model")
    meta = json.loads((folder / f"{MODEL}.json").read_text())
    assert summary.ops == sorted(meta["ops"]) and list(summary.signatures) == ["step"]
    assert 0 < sum(size for _, size in summary.data_spans) < len(data)
    lm = LiteRTLM(folder / f"{MODEL}.tflite")
    assert np.isfinite(lm.step(lm.start_id())).all() and len(lm.suggest(3)) == 3


@pytest.mark.parametrize("length", [0, 7, 8, 100, "half", "last byte"])
def test_truncated_file_gives_a_clear_error(folder, length):
    data = _original(folder)
    length = {"half": len(data) // 2, "last byte": len(data) - 1}.get(length, length)
    path = _damaged(folder, "cut", data[:length])
    with pytest.raises(CorruptModelError, match=r"cut\.tflite is not a usable \.tflite model"
                       r".*(truncated|outside).*re-export it") as err:
        LiteRTLM(path)
    assert f"received {length:,} bytes" in str(err.value)


def test_truncated_file_with_its_original_metadata_says_it_is_truncated(folder):
    path = folder / f"{MODEL}.tflite"
    path.write_bytes(_original(folder)[:-100])
    with pytest.raises(KerasSeqError, match="looks truncated or overwritten"):
        LiteRTLM(path)


def test_bit_flipped_file_gives_a_clear_error(folder):
    data = bytearray(_original(folder))
    root = int.from_bytes(data[:4], "little")
    for at in (3, root + 2):  # a high bit of the root offset, of the root's vtable offset
        flipped = bytearray(data)
        flipped[at] ^= 0x40
        path = _damaged(folder, "flipped", bytes(flipped))
        with pytest.raises(CorruptModelError, match="flipped.tflite is not a usable .* lies "
                           "outside the"):
            LiteRTLM(path)
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    add = operators_named(model, "ADD")[0]  # by its opcode: the export's op order changes
    add.inputs[0] |= np.int32(1 << 30)  # reads tensor 2^30+
    index = model.subgraphs[0].operators.index(add)
    with pytest.raises(CorruptModelError,
                       match=rf"operator {index} \(ADD\) reads tensor 107374"):
        LiteRTLM(_damaged(folder, "flipped", model=model))


def test_wrong_identifier_and_garbage_give_a_clear_error(folder):
    data = _original(folder)
    path = _damaged(folder, "other", data[:4] + b"TFL2" + data[8:])
    with pytest.raises(CorruptModelError, match=r"its identifier is b'TFL2'.*expected a "
                       "TFLite flatbuffer with identifier 'TFL3'"):
        LiteRTLM(path)
    with pytest.raises(CorruptModelError, match="too short"):
        LiteRTLM(_damaged(folder, "other", b""))
    with pytest.raises(CorruptModelError, match="identifier is b'\\\\x00"):
        LiteRTLM(_damaged(folder, "other", bytes(len(data))))
    (folder / "dir.tflite").mkdir()
    with pytest.raises(CorruptModelError, match="dir.tflite is a directory"):
        LiteRTLM(folder / "dir.tflite")


def _crashers(models) -> dict:
    """Well-formed flatbuffers with one wrong number each, ``{name: (source, model)}``: the
    campaign's known crashers (every one crashed plain LiteRT 2.3.0 — SIGSEGV in XNNPACK
    or the kernels — when the campaign found it), each applied to the first operator of
    its kind in the first exported model that has one (found by opcode, not by index)."""
    found = {}
    for what, op_name, change in KNOWN_CRASHERS:
        for source in SOURCES:
            data = (models / f"{source}.tflite").read_bytes()
            model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
            ops = operators_named(model, op_name)
            if ops:
                change(model, ops[0])
                found[re.sub(r"\W+", "-", what).strip("-")] = (source, model)
                break
    return found


def test_every_known_crasher_finds_its_operator(models):
    assert len(_crashers(models)) == len(KNOWN_CRASHERS)


def test_files_that_crashed_litert_are_refused_in_a_subprocess(folder, models):
    paths = []
    for name, (source, model) in _crashers(models).items():
        shutil.copy(models / f"{source}.json", folder / f"{source}.json")
        paths.append(_damaged(folder, name, model=model, source=source))
    results = run_workers("runtime", paths, folder)
    for path, result in zip(paths, results):
        assert result["status"] == "refused", (path.name, result)
        assert f"{path.name} is not a usable .tflite model" in result["detail"]


def test_nan_weights_are_refused_at_the_first_step(folder, models):
    shutil.copy(models / "step_fused_float32.json", folder / f"{MODEL}.json")
    data = bytearray((models / "step_fused_float32.tflite").read_bytes())
    start, size = max(check_tflite(bytes(data)).data_spans, key=lambda span: span[1])
    data[start:start + size] = np.full(size // 4, np.nan, np.float32).tobytes()
    lm = LiteRTLM(_damaged(folder, "nan", bytes(data)))
    with pytest.raises(KerasSeqError, match="nan.tflite produced .* NaN .*weights are damaged"):
        lm.step(lm.start_id())


def test_the_finite_check_refuses_nan_and_inf_but_not_a_large_finite_value():
    """The one-dot-product check: a square that overflows is not an error."""
    lm = SimpleNamespace(path=Path("m.tflite"))
    big = np.full(4, 3e38, np.float32)  # finite, its square is inf in float32
    assert LiteRTLM._finite(lm, big, "logits") is big
    for bad, kind in ((np.nan, "1 NaN and 0 infinite"), (-np.inf, "0 NaN and 1 infinite")):
        values = np.array([0.5, bad, 2.0], np.float32)
        with pytest.raises(KerasSeqError, match=f"m.tflite produced {kind} logits"):
            LiteRTLM._finite(lm, values, "logits")


def test_demo_command_reports_a_damaged_model(folder, capsys):
    path = _damaged(folder, "cut", _original(folder)[:500])
    assert main(["demo", "--model", str(path), "--lines"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("keras-seq: error: cut.tflite is not a usable .tflite model")
    assert "Traceback" not in err


def test_the_model_cache_is_keyed_by_the_source_that_exports_it(tmp_path, monkeypatch):
    """A change to the export's code makes a new cache folder (a version-keyed cache once
    kept yesterday's models and hid two broken tests)."""
    import keras_seq
    from tools.reliability import tflite

    copy = tmp_path / "keras_seq"
    shutil.copytree(Path(keras_seq.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("node_modules", "__pycache__", "*.xz"))
    monkeypatch.setattr(keras_seq, "__file__", str(copy / "__init__.py"))
    key = tflite._cache_key()
    assert tflite._cache_key() == key
    graphs = copy / "export" / "graphs.py"
    graphs.write_text(graphs.read_text() + "\n# one more line\n")
    assert tflite._cache_key() != key
