"""Reliability area "tflite": corrupt ``.tflite`` files handed to the LiteRT runtime and to
``keras-seq demo``.

A small LSTM language model is exported once (``step_dynamic``, ``step_int8`` and
``step_fused_float32``; cached in :data:`CACHE` between runs under a key made from the
source that exports it) and then damaged on purpose:

* **truncated** at many lengths (the header, the middle, the last byte);
* **bit-flipped**: one flip, or 2–8 at random positions (seeded);
* **overwritten**: a random byte, a 4-byte word set to 0, 1, -1, ``INT_MAX``, ``INT_MIN``
  or a random value, a run of random or zero bytes;
* **garbage**: an empty file, zeros, random bytes, a wrong identifier, the header alone,
  the identifier followed by noise, a JSON file named ``.tflite``, a directory;
* **semantic**: the model unpacked with LiteRT's generated schema, one number changed
  (first the changes that crashed plain LiteRT when this campaign found them, then
  random fields set to edge values), packed again: a well-formed flatbuffer that lies.

The byte-level positions are half aimed at the model's structure (everything but the
weights), half anywhere. Each damaged file gets a metadata ``.json`` whose hash matches
it, as if the damage happened before the export hashed the file, so the runtime's hash
check cannot help and the file itself is what is tested (one scenario keeps the original
metadata, to count what the hash check catches).

Each file is loaded in a subprocess through :class:`keras_seq.runtime.LiteRTLM` (two
streaming steps), a few through ``keras-seq demo``. A case fails when the process dies by
a signal or hangs, when anything but a :class:`~keras_seq.errors.KerasSeqError` naming the
file escapes (a traceback), or when the demo does not end with a ``keras-seq: error: …``
line and exit status 2 (LiteRT may log lines of its own to stderr before it). A damaged
file that still loads and runs with finite outputs is a model LiteRT accepts as valid
(most are weight bytes, names or unused fields): it is counted as "accepted (still
valid)", not as a failure; the notes say how many changed the logits. The same files are
also loaded by plain LiteRT (no keras-seq checks), to measure what the checks prevent.
``python -m tools.reliability.tflite --worker MODE LIST START`` is the worker.

>>> data, how = MUTATORS["flipped"](bytes(16), 0, random.Random(0), [])
>>> how, sum(bin(byte).count("1") for byte in data)
('1 bit flip(s)', 1)
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

import keras_seq
from keras_seq.errors import KerasSeqError
from tools.reliability import Row

#: the exported models the mutations start from
SOURCES = ("step_dynamic", "step_int8", "step_fused_float32")
#: where the exported models are kept between runs, one folder per :func:`_cache_key`
CACHE = Path(tempfile.gettempdir()) / "keras-seq-reliability-tflite"
#: damaged files per scenario
COUNTS = {
    "quick": {"truncated": 8, "flipped": 8, "overwritten": 6, "garbage": 0, "semantic": 10,
              "original": 3, "demo": 3},
    "full": {"truncated": 300, "flipped": 600, "overwritten": 600, "garbage": 40,
             "semantic": 1000, "original": 100, "demo": 30},
}
SCENARIOS = {
    "truncated": "truncated .tflite → runtime",
    "flipped": "bit-flipped .tflite → runtime",
    "overwritten": "overwritten bytes in .tflite → runtime",
    "garbage": "empty / garbage / wrong-identifier file or a directory → runtime",
    "semantic": "well-formed .tflite with a wrong number in it → runtime",
    "original": "damaged .tflite with its original metadata → runtime",
}
CASE_TIMEOUT_S = 30.0
_CORPUS = ("the cat sat on a mat\na big dog ran on the log\nthe small red cat ran and sat\n"
           "a dog sat on the big red mat\nthe log and the mat\n") * 8
_EXAMPLES = 3


@dataclass
class Case:
    """One damaged file: which scenario, how it was made, where it is."""

    scenario: str
    how: str
    path: Path
    source: str
    changed: bool = True  # differs from the source model (two flips can cancel out)


# ----------------------------------------------------------------------------------------
# The model


def _cache_key() -> str:
    """What the exported models are made from, hashed: the source of every module of
    ``keras_seq`` and of this one, the corpus, and the TensorFlow and LiteRT versions. A
    change to the export (or anything it imports) makes a new key, so a cache an earlier
    build left behind can never stand in for today's export."""
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256(_CORPUS.encode())
    package = Path(keras_seq.__file__).resolve().parent
    for path in [*sorted(package.rglob("*.py")), Path(__file__).resolve()]:
        digest.update(path.as_posix().removeprefix(package.as_posix()).encode() + b"\0")
        digest.update(path.read_bytes())
    for name in ("tensorflow", "ai-edge-litert"):
        try:
            digest.update(version(name).encode())
        except PackageNotFoundError:
            digest.update(b"none")
    return digest.hexdigest()[:20]


def _cached_models_ok(folder: Path) -> bool:
    from keras_seq.runtime.flatbuffer_check import check_tflite
    from keras_seq.runtime.metadata import read_metadata

    try:
        for name in SOURCES:
            data = (folder / f"{name}.tflite").read_bytes()
            check_tflite(data, name)
            read_metadata(folder / f"{name}.tflite", data)
        return (folder / "tokenizer.json").is_file()
    except (OSError, KerasSeqError):
        return False


def export_models(printer=print) -> Path:
    """The folder of the exported source models, exporting them on the first call (about
    10 s: an untrained 32-unit LSTM, word vocabulary of 16). Processes that ask at once
    (pytest-xdist workers) wait for one export under a file lock."""
    folder = CACHE / _cache_key()
    if _cached_models_ok(folder):
        return folder
    CACHE.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        if not _cached_models_ok(folder):  # no one exported it while this one waited
            _export(folder, printer)
    return folder


def _export(folder: Path, printer) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow's first import
    from keras_seq.data.tokenizers import make_tokenizer
    from keras_seq.export.tflite import export_tflite
    from keras_seq.tasks.lm.config import LMConfig
    from keras_seq.tasks.lm.task import build_model

    printer(f"  exporting the source models into {folder} …")
    staging = Path(tempfile.mkdtemp(prefix="export-", dir=CACHE))
    corpus = staging / "corpus.txt"
    corpus.write_text(_CORPUS)
    config = LMConfig(data=str(corpus), embed_dim=32, units=32, batch_size=4, bptt=6,
                      epochs=1, sample_tokens=0, histogram_freq=0, cell="lstm", seed=0)
    tokenizer = make_tokenizer("word").fit(_CORPUS)
    export_tflite("(untrained)", staging, variants=("float32", "dynamic", "int8"),
                  graphs=("step", "step_fused"), check_parity=False, calib_tokens=100,
                  model=build_model(config, tokenizer.vocab_size), tokenizer=tokenizer,
                  config=config, printer=lambda *a: None)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)
    if not _cached_models_ok(folder):
        raise KerasSeqError(f"the export in {folder} did not produce {', '.join(SOURCES)}; "
                            "run `keras-seq export tflite` by hand to see why")


# ----------------------------------------------------------------------------------------
# Damaged files


def _position(rng: random.Random, size: int, structure: list[int]) -> int:
    """A random byte position: half the time one of the model's structure (not weights)."""
    if structure and rng.random() < 0.5:
        return rng.choice(structure)
    return rng.randrange(size)


def _truncate(data: bytes, k: int, rng: random.Random, structure) -> tuple[bytes, str]:
    fixed = [len(data) - 1, 8, len(data) // 2, 4, len(data) - 4, 16, 64, len(data) - 64]
    length = fixed[k] if k < len(fixed) else rng.randrange(1, len(data))
    return data[:length], f"truncated to {length:,} of {len(data):,} bytes"


def _flip(data: bytes, k: int, rng: random.Random, structure) -> tuple[bytes, str]:
    out = bytearray(data)
    flips = 1 if k % 2 == 0 else rng.randint(2, 8)
    for _ in range(flips):
        out[_position(rng, len(out), structure)] ^= 1 << rng.randrange(8)
    return bytes(out), f"{flips} bit flip(s)"


_WORDS = (0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000)


def _overwrite(data: bytes, k: int, rng: random.Random, structure) -> tuple[bytes, str]:
    out = bytearray(data)
    at = _position(rng, len(out), structure)
    kind = ("byte", "word", "random run", "zero run")[k % 4]
    if kind == "byte":
        out[at] = rng.randrange(256)
    elif kind == "word":
        at = min(at & ~3, len(out) - 4)
        word = rng.choice(_WORDS + (rng.getrandbits(32),))
        out[at:at + 4] = word.to_bytes(4, "little")
        kind = f"word {word:#x}"
    else:
        n = min(rng.randint(2, 64), len(out) - at)
        out[at:at + n] = rng.randbytes(n) if kind == "random run" else bytes(n)
        kind = f"{kind} of {n}"
    return bytes(out), f"{kind} at byte {at:,}"


_GARBAGE = ("empty file", "zeros", "random bytes", "wrong identifier 'TFL2'", "header only",
            "identifier then noise", "JSON named .tflite", "a directory")


def _garbage(data: bytes, k: int, rng: random.Random, structure) -> tuple[bytes | None, str]:
    kind = _GARBAGE[k] if k < len(_GARBAGE) else "random bytes"
    if kind == "empty file":
        return b"", kind
    if kind == "zeros":
        return bytes(len(data)), kind
    if kind == "random bytes":
        n = rng.randint(1, len(data))
        return rng.randbytes(n), f"{n:,} random bytes"
    if kind.startswith("wrong identifier"):
        return data[:4] + b"TFL2" + data[8:], kind
    if kind == "header only":
        return data[:8], kind
    if kind == "identifier then noise":
        return data[:8] + rng.randbytes(len(data) - 8), kind
    if kind == "JSON named .tflite":
        return json.dumps({"format": "keras-seq-tflite", "graph": "step"}).encode(), kind
    return None, kind  # a directory


def operators_named(model, name: str) -> list:
    """The operators of ``model``'s main subgraph that are ``name`` (e.g. ``"SPLIT"``)."""
    from ai_edge_litert.schema_py_generated import BuiltinOperator

    code = getattr(BuiltinOperator, name)
    return [op for op in model.subgraphs[0].operators
            if model.operatorCodes[op.opcodeIndex].builtinCode == code]


def _set_input(op, position: int, value: int) -> None:
    op.inputs[position] = value


def _drop_options(op) -> None:
    op.builtinOptionsType, op.builtinOptions = 0, None


# Wrong numbers that crashed plain LiteRT 2.3.0 (SIGSEGV / SIGABRT) when the campaign
# found them: (what, operator it needs, change). Cases beyond these change random fields.
KNOWN_CRASHERS = (
    ("an ADD input marked optional (-1)", "ADD", lambda m, op: _set_input(op, 1, -1)),
    ("SPLIT into 0 parts", "SPLIT", lambda m, op: setattr(op.builtinOptions, "numSplits", 0)),
    ("SPLIT without its options", "SPLIT", lambda m, op: _drop_options(op)),
    ("SPLIT with an extra output", "SPLIT",
     lambda m, op: setattr(op, "outputs", list(op.outputs) + [int(m.subgraphs[0].inputs[0])])),
    ("STRIDED_SLICE with relative ends", "STRIDED_SLICE",
     lambda m, op: setattr(op.builtinOptions, "offset", True)),
    ("STRIDED_SLICE with one input", "STRIDED_SLICE",
     lambda m, op: setattr(op, "inputs", list(op.inputs[:1]))),
    ("an operator writing a graph input", "MUL",
     lambda m, op: setattr(op, "outputs", [int(m.subgraphs[0].inputs[0])])),
    ("a fused LSTM missing its input-gate bias", "UNIDIRECTIONAL_SEQUENCE_LSTM",
     lambda m, op: _set_input(op, 12, -1)),
)
_NUMBERS = (-1, 0, 1, 2, 3, 7, 255, 65535, 2**31 - 1, -2**31)
_FLOATS = (0.0, -1.0, 1e-38, 1e38, float("nan"), float("inf"), 4.0)


def _objects(node, found: list) -> list:
    """Every table object under ``node`` (the unpacked model), weights' data left out."""
    import numpy as np

    if isinstance(node, list):
        for item in node:
            _objects(item, found)
    elif hasattr(node, "__dict__") and not isinstance(node, np.ndarray):
        found.append(node)
        for key, value in vars(node).items():
            if key != "data":
                _objects(value, found)
    return found


def _change_field(model, rng: random.Random) -> str:
    """Set one scalar field, or one element of a number vector, to an edge value."""
    import numpy as np

    while True:
        obj = rng.choice(_objects(model, []))
        fields = [k for k, v in vars(obj).items() if k != "data" and
                  (isinstance(v, (bool, int, float)) or
                   (isinstance(v, (list, np.ndarray)) and len(v) and
                    isinstance(v[0], (int, float, np.number))))]
        if not fields:
            continue
        key = rng.choice(fields)
        value = getattr(obj, key)
        where = f"{type(obj).__name__[:-1]}.{key}"
        if isinstance(value, bool):
            setattr(obj, key, not value)
            return f"{where} toggled"
        if isinstance(value, (int, float)):
            new = rng.choice(_FLOATS if isinstance(value, float) else _NUMBERS)
            setattr(obj, key, new)
            return f"{where} = {new}"
        items = list(value)
        at = rng.randrange(len(items))
        floats = isinstance(items[0], (float, np.floating))
        items[at] = rng.choice(_FLOATS if floats else _NUMBERS)
        if isinstance(value, np.ndarray):
            try:
                items = np.array(items, value.dtype)
            except OverflowError:  # e.g. 65535 in an int8 vector: draw again
                continue
        setattr(obj, key, items)
        return f"{where}[{at}] = {items[at]}"


def _semantic(data: bytes, k: int, rng: random.Random, structure) -> tuple[bytes, str]:
    """The model unpacked, one number changed, packed again: a well-formed flatbuffer."""
    import flatbuffers
    from ai_edge_litert.schema_py_generated import ModelT

    for _ in range(50):  # a value out of its field's range does not pack: draw again
        model = ModelT.InitFromPackedBuf(bytearray(data), 0)
        ops = operators_named(model, KNOWN_CRASHERS[k][1]) if k < len(KNOWN_CRASHERS) else []
        if ops:
            what = KNOWN_CRASHERS[k][0]
            KNOWN_CRASHERS[k][2](model, ops[0])
        else:
            what = _change_field(model, rng)
        builder = flatbuffers.Builder(1024)
        try:
            builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
        except (struct.error, OverflowError, TypeError, ValueError):
            continue
        return bytes(builder.Output()), what
    return data[:8], "header only (no packable change found)"


MUTATORS = {"truncated": _truncate, "flipped": _flip, "overwritten": _overwrite,
            "garbage": _garbage, "semantic": _semantic}


def _write_case(folder: Path, index: int, data: bytes | None, meta: dict,
                own_hash: bool) -> Path:
    """``c<index>.tflite`` (a directory when ``data`` is None) and its metadata."""
    path = folder / f"c{index:05d}.tflite"
    if data is None:
        path.mkdir()
    else:
        path.write_bytes(data)
    if own_hash and data is not None:
        meta = {**meta, "tflite_sha256": hashlib.sha256(data).hexdigest()}
    path.with_suffix(".json").write_text(json.dumps(meta))
    return path


def make_cases(scale: str, workdir: Path, models: Path, seed: int = 0) -> list[Case]:
    """Write the damaged files of every scenario under ``workdir/cases``."""
    from keras_seq.runtime.flatbuffer_check import check_tflite

    folder = Path(workdir) / "cases"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    shutil.copy(models / "tokenizer.json", folder / "tokenizer.json")
    sources = {}
    for name in SOURCES:
        data = (models / f"{name}.tflite").read_bytes()
        weights = set()
        for start, size in check_tflite(data).data_spans:
            weights.update(range(start, start + size))
        structure = [i for i in range(len(data)) if i not in weights]
        sources[name] = (data, json.loads((models / f"{name}.json").read_text()), structure)
    rng = random.Random(seed)
    counts = dict(COUNTS[scale])
    counts["garbage"] = max(counts["garbage"], len(_GARBAGE))
    cases = []
    for scenario in ("truncated", "flipped", "overwritten", "garbage", "semantic", "original"):
        for k in range(counts[scenario]):
            name = SOURCES[len(cases) % len(SOURCES)]
            if scenario == "semantic" and k < len(KNOWN_CRASHERS):  # a model with the op
                op = KNOWN_CRASHERS[k][1]
                name = next((n for n in SOURCES if op in sources[n][1]["ops"]), name)
            data, meta, structure = sources[name]
            kind = scenario if scenario != "original" else \
                ("truncated", "flipped", "overwritten")[k % 3]
            damaged, how = MUTATORS[kind](data, k, rng, structure)
            path = _write_case(folder, len(cases), damaged, meta,
                               own_hash=scenario != "original")
            cases.append(Case(scenario, f"{name}: {how}", path, name, damaged != data))
    return cases


# ----------------------------------------------------------------------------------------
# Subprocesses


def _env() -> dict:
    """The workers' environment: the project root (holding ``tools/``, the worker's
    package) and the folder ``keras_seq`` was imported from first on ``PYTHONPATH``."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    roots = dict.fromkeys((str(Path(__file__).resolve().parents[2]),  # tools/reliability/
                           str(Path(keras_seq.__file__).resolve().parents[1])))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (*roots, env.get("PYTHONPATH")) if p)
    return env


def _signal_name(rc: int) -> str:
    try:
        return f"killed by {signal.Signals(-rc).name}"
    except ValueError:
        return f"exit status {rc}"


def run_workers(mode: str, paths: list[Path], workdir: Path,
                timeout: float = CASE_TIMEOUT_S) -> list[dict]:
    """Load each of ``paths`` in a worker subprocess (``mode``: ``runtime`` through
    :class:`~keras_seq.runtime.LiteRTLM`, ``raw`` through plain LiteRT). A worker that
    dies or hangs is replaced, resuming after the file it was on.

    Returns one ``{"status", "detail"}`` per path; ``status`` is ``ok``, ``refused``,
    ``error`` (an exception other than KerasSeqError), ``crashed`` or ``hung``.

    >>> folder = tempfile.mkdtemp()
    >>> [r["status"] for r in run_workers("runtime", [Path(folder) / "none.tflite"], folder)]
    ['refused']
    """
    listing = Path(workdir) / f"{mode}-files.txt"
    listing.write_text("".join(f"{p}\n" for p in paths))
    results: list[dict | None] = [None] * len(paths)
    start = 0
    with open(Path(workdir) / f"{mode}-stderr.log", "w") as log:
        while start < len(paths):
            current, rc = _worker_pass(mode, listing, start, results, log, timeout)
            if current is None:  # the worker went through the list
                if any(r is None for r in results[start:]):
                    raise KerasSeqError(f"the {mode} worker stopped early "
                                        f"({_signal_name(rc)}); see {log.name}")
                break
            if results[current] is None:
                results[current] = {"status": "crashed" if rc < 0 else "error",
                                    "detail": _signal_name(rc)}
            start = current + 1
    return results


def _pump(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)


def _worker_pass(mode, listing, start, results, log, timeout) -> tuple[int | None, int]:
    """One worker from ``start`` on: fills ``results``; returns ``(index it died or hung
    on or None, exit status)``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.reliability.tflite", "--worker", mode,
         str(listing), str(start)], stdout=subprocess.PIPE, stderr=log, text=True, env=_env())
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
    current = None
    while True:
        try:
            line = lines.get(timeout=timeout if current is not None else 120.0)
        except queue.Empty:
            proc.kill()
            rc = proc.wait()
            if current is None:
                raise KerasSeqError(f"the {mode} worker stopped answering; see "
                                    f"{log.name}") from None
            results[current] = {"status": "hung", "detail": f"no answer in {timeout:.0f} s"}
            return current, rc
        if line is None:
            return current, proc.wait()
        if line.startswith("START "):
            current = int(line.split()[1])
        elif line.startswith("{"):
            answer = json.loads(line)
            results[answer.pop("i")] = answer
            current = None


def _load_runtime(path: str) -> str:
    """Load through the runtime, stream two tokens; a checksum of the logits."""
    import numpy as np

    from keras_seq.runtime.litert import LiteRTLM

    lm = LiteRTLM(path)
    logits = lm.step(lm.start_id())
    lm.step(int(np.argmax(logits)))
    return f"{float(np.abs(lm.logits).sum()):.6g}"


def _load_raw(path: str) -> str:
    """Plain LiteRT, as before keras-seq checked files: load, allocate, invoke on zeros."""
    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=path)
    interp.allocate_tensors()
    for d in interp.get_input_details():
        interp.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
    interp.invoke()
    out = interp.get_output_details()
    return f"{float(np.abs(interp.get_tensor(out[-1]['index'])).sum()):.6g}"


def _worker(mode: str, listing: str, start: int) -> None:
    paths = Path(listing).read_text().splitlines()
    load = _load_runtime if mode == "runtime" else _load_raw
    for i in range(start, len(paths)):
        print(f"START {i}", flush=True)
        try:
            answer = {"status": "ok", "detail": load(paths[i])}
        except KerasSeqError as err:
            answer = {"status": "refused", "detail": str(err)}
        except Exception as err:  # noqa: BLE001 - a traceback the user would see
            status = "refused" if mode == "raw" else "error"
            answer = {"status": status, "detail": f"{type(err).__name__}: {err}"}
        print(json.dumps({"i": i, **answer}), flush=True)


def run_demo(path: Path, timeout: float = 60.0) -> dict:
    """``keras-seq demo --model path --lines`` with a short script; the outcome, as
    :func:`run_workers` gives it.

    >>> run_demo(Path(tempfile.mkdtemp()) / "none.tflite")["detail"].split(";")[0]
    'keras-seq: error: no model at ...none.tflite'
    """
    try:
        res = subprocess.run(
            [sys.executable, "-m", "keras_seq.cli", "demo", "--model", str(path), "--lines"],
            input="the cat\n/gen 3\n/quit\n", capture_output=True, text=True,
            timeout=timeout, env=_env())
    except subprocess.TimeoutExpired:
        return {"status": "hung", "detail": f"no exit in {timeout:.0f} s"}
    if res.returncode < 0:
        return {"status": "crashed", "detail": _signal_name(res.returncode)}
    if "Traceback" in res.stderr:
        return {"status": "error", "detail": res.stderr.strip().splitlines()[-1][:300]}
    last = (res.stderr.strip().splitlines() or [""])[-1]  # after LiteRT's own log lines
    if res.returncode == 2 and last.startswith("keras-seq: error: "):
        return {"status": "refused", "detail": last}
    if res.returncode == 0:
        return {"status": "ok", "detail": res.stdout[-200:]}
    return {"status": "error", "detail": f"exit status {res.returncode}: {res.stderr[-300:]}"}


# ----------------------------------------------------------------------------------------
# Scoring


def _who(detail: str) -> str:
    """Which check refused a file, from the message."""
    for needle, who in (("not a usable .tflite", "structure check"),
                        ("is a directory", "structure check"),
                        ("does not match its metadata", "metadata hash"),
                        ("runs operators", "metadata operators"),
                        ("signature", "metadata signature"),
                        ("the metadata describes", "metadata shapes"),
                        ("LiteRT", "LiteRT's own checks"),
                        ("NaN", "NaN/inf output")):
        if needle in detail:
            return who
    return "other check"


class _Tally:
    def __init__(self):
        self.cases = self.failures = self.accepted = self.changed = self.same = 0
        self.refused: dict[str, int] = {}
        self.examples: list[str] = []

    def fail(self, case: Case, problem: str) -> None:
        self.failures += 1
        if len(self.examples) < _EXAMPLES:
            self.examples.append(f"{case.how}: {problem[:200]}")

    def add(self, case: Case, result: dict, reference: dict, must_refuse: bool) -> None:
        self.cases += 1
        status, detail = result["status"], result["detail"]
        if status in ("crashed", "hung", "error"):
            self.fail(case, f"{status}: {detail}")
        elif status == "refused":
            if case.path.name not in detail:
                self.fail(case, f"the refusal does not name the file: {detail}")
            else:
                who = _who(detail)
                self.refused[who] = self.refused.get(who, 0) + 1
        elif must_refuse and case.changed:
            self.fail(case, "a damaged file was accepted although its metadata is the "
                      "original's")
        else:
            self.accepted += 1
            self.changed += detail != reference.get(case.source)
            self.same += not case.changed

    def notes(self, raw: dict | None, logits: bool = True) -> str:
        """The row's notes: failures, else who refused how many, what was accepted and
        what plain LiteRT did with the same files (``raw``: crashes by signal)."""
        if self.examples:
            return "FAILED: " + "; ".join(self.examples)
        who = ", ".join(f"{name} {n:,}" for name, n in
                        sorted(self.refused.items(), key=lambda item: -item[1]))
        parts = [f"refused with a clear error naming the file: "
                 f"{sum(self.refused.values()):,}" + (f" ({who})" if who else "")]
        if self.accepted:
            text = f"accepted (still valid): {self.accepted:,}"
            if logits:
                text += f", {self.changed:,} of them with changed logits"
            if self.same:
                text += f", {self.same:,} byte-identical to the original (changes cancelled out)"
            parts.append(text)
        if raw:
            crashes = ", ".join(f"{n} {signal_name}" for signal_name, n in raw.items())
            parts.append(f"plain LiteRT on the same files crashed: {crashes}")
        return "; ".join(parts)


def run(scale: str, workdir, printer=print) -> list[Row]:
    """Damage exported models, load each file in a subprocess; one row per scenario."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    models = export_models(printer)
    cases = make_cases(scale, workdir, models)
    printer(f"  {len(cases):,} damaged files; loading each through the runtime …")
    references = [models / f"{name}.tflite" for name in SOURCES]
    runtime = run_workers("runtime", references + [c.path for c in cases], workdir)
    reference = {name: r["detail"] for name, r in zip(SOURCES, runtime)}
    if any(r["status"] != "ok" for r in runtime[:len(SOURCES)]):
        raise KerasSeqError(f"the undamaged source models in {models} do not load: "
                            f"{runtime[:len(SOURCES)]}")
    runtime = runtime[len(SOURCES):]
    printer("  … and through plain LiteRT, without keras-seq's checks …")
    raw = run_workers("raw", [c.path for c in cases], workdir)
    rows = []
    for scenario, title in SCENARIOS.items():
        tally, crashes = _Tally(), {}
        for case, result, plain in zip(cases, runtime, raw):
            if case.scenario != scenario:
                continue
            tally.add(case, result, reference, must_refuse=scenario == "original")
            if plain["status"] in ("crashed", "hung"):
                what = plain["detail"].replace("killed by ", "")
                crashes[what] = crashes.get(what, 0) + 1
        rows.append(Row(title, tally.cases, tally.failures, notes=tally.notes(crashes)))
    rows.append(_demo_row(cases, runtime, COUNTS[scale]["demo"], printer))
    printer(f"  tflite: {sum(r.cases for r in rows):,} cases in "
            f"{time.monotonic() - started:.0f} s")
    return rows


def _demo_row(cases, runtime, n: int, printer) -> Row:
    """``keras-seq demo`` on ``n`` damaged files: the directory, the empty file, then a
    seeded sample of the rest (refused and accepted ones alike)."""
    pool = [i for i, c in enumerate(cases) if c.scenario != "original"]
    first = [i for i in pool if cases[i].how.endswith(("a directory", "empty file"))]
    rest = [i for i in pool if i not in first]
    chosen = (first + random.Random(1).sample(rest, min(len(rest), n)))[:max(n, len(first))]
    printer(f"  keras-seq demo on {len(chosen)} of them …")
    tally = _Tally()
    for i in chosen:
        result = run_demo(cases[i].path)
        if result["status"] == "ok" and runtime[i]["status"] != "ok":
            result = {"status": "error", "detail": "the demo ran a file the runtime refused"}
        tally.add(cases[i], result, {}, must_refuse=False)
    return Row("corrupt .tflite → keras-seq demo", tally.cases, tally.failures,
               notes=tally.notes(None, logits=False))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        sys.exit("usage: python -m tools.reliability.tflite --worker runtime|raw LIST START")
