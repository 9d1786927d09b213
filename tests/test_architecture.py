"""The house plan, checked: keras_seq's import graph (function-local imports counted) has no
circle and no arrow from a lower layer up to a higher one, nothing in the package imports
the fault campaign (tools/), the on-device runtime never imports TensorFlow, and no
function outside the benchmarks (and tools/) is longer than 80 lines.

The layers, lowest first (a module may import its own layer and the ones below it):

    0  keras_seq, errors, atomic, backend, extras, tables, script_config, machine
    1  runs                      the run-directory layout
    2  data, metrics, keyboard, sampling
    3  ngram
    4  layers
    5  models
    6  training
    7  tasks
    8  runtime                   LiteRT only
    9  export
    10 serving
    11 pipeline, pipeline_mix    the main job: it never imports a benchmark
    12 benchmarks, analysis      they measure the product and reuse its parts
    13 commands
    14 cli
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "keras_seq"
MAX_FUNCTION_LINES = 80  # def line to last line, docstring included, decorators not
# Where the bound holds: the package but its benchmarks, the fit and export scripts, tests.
SHORT_FUNCTION_FOLDERS = ("keras_seq", "train", "export", "scripts", "tests")

LAYERS = {
    "keras_seq": 0, "keras_seq.errors": 0, "keras_seq.atomic": 0, "keras_seq.backend": 0,
    "keras_seq.extras": 0, "keras_seq.tables": 0, "keras_seq.script_config": 0,
    "keras_seq.machine": 0,
    "keras_seq.runs": 1,
    "keras_seq.data": 2, "keras_seq.metrics": 2, "keras_seq.keyboard": 2,
    "keras_seq.sampling": 2,
    "keras_seq.ngram": 3,
    "keras_seq.layers": 4, "keras_seq.cells": 4,
    "keras_seq.models": 5,
    "keras_seq.training": 6,
    "keras_seq.tasks": 7,
    "keras_seq.runtime": 8,
    "keras_seq.export": 9,
    "keras_seq.serving": 10,
    "keras_seq.pipeline": 11, "keras_seq.pipeline_mix": 11,
    "keras_seq.benchmarks": 12, "keras_seq.analysis": 12,
    "keras_seq.commands": 13,
    "keras_seq.cli": 14,
}


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    """``{dotted module name: file}`` for every module of the package."""
    mods = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def imports_of(name: str, path: Path, mods: dict[str, Path] | None = None
               ) -> list[tuple[str, int]]:
    """``(imported module, line)`` for every import in the file, wherever it stands.
    ``from pkg import sub`` counts as importing the submodule, and the package itself only
    for names that are not submodules (as ../shared/tools/import_cycles.py reads it)."""
    mods = mods or {}
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            subs = [f"{base}.{alias.name}" for alias in node.names]
            found += [(sub, node.lineno) for sub in subs if sub in mods]
            if not mods or any(sub not in mods for sub in subs):
                found.append((base, node.lineno))
    return found


def graph(mods: dict[str, Path]) -> dict[str, dict[str, int]]:
    """``{module: {module it imports: first line}}`` within the package."""

    def resolve(target: str) -> str | None:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target or None

    edges: dict[str, dict[str, int]] = {}
    for name, path in mods.items():
        edges[name] = {}
        for target, line in imports_of(name, path, mods):
            if target.split(".")[0] != "keras_seq":
                continue
            found = resolve(target)
            if found and found != name:
                edges[name].setdefault(found, line)
    return edges


def layer_of(module: str) -> int:
    best = max((key for key in LAYERS if module == key or module.startswith(key + ".")),
               key=len)
    return LAYERS[best]


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return out


@pytest.fixture(scope="module")
def edges():
    return graph(module_files())


def test_every_module_has_a_layer(edges):
    assert all(layer_of(module) >= 0 for module in edges)


def test_no_import_circle(edges):
    assert circles(edges) == []


def test_no_import_from_a_lower_layer_to_a_higher_one(edges):
    upward = [f"{module}:{line} imports {target} (layer {layer_of(module)} -> "
              f"{layer_of(target)})"
              for module, targets in sorted(edges.items())
              for target, line in sorted(targets.items())
              if layer_of(target) > layer_of(module)]
    assert upward == []


def test_the_package_never_imports_the_fault_campaign():
    mods = module_files()
    found = [f"{name}:{line} imports {target}" for name, path in mods.items()
             for target, line in imports_of(name, path)
             if target.split(".")[0] == "tools" or "reliability" in target.split(".")]
    assert found == []


def test_the_runtime_never_imports_tensorflow_or_keras():
    mods = module_files()
    found = [f"{name}:{line} imports {target}" for name, path in mods.items()
             if name.startswith("keras_seq.runtime")
             for target, line in imports_of(name, path)
             if target.split(".")[0] in ("tensorflow", "keras")]
    assert found == []


def long_functions(root: Path, folders=SHORT_FUNCTION_FOLDERS) -> list[str]:
    """``path:line name (N lines)`` for each function over MAX_FUNCTION_LINES under
    ``folders`` of ``root``, keras_seq/benchmarks left out."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            relative = path.relative_to(root)
            if relative.parts[:2] == ("keras_seq", "benchmarks"):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append(f"{relative}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_outside_the_benchmarks_is_over_80_lines():
    assert long_functions(ROOT) == []


def test_the_checks_find_what_they_look_for(tmp_path):
    """The checker itself: a planted circle and a planted upward import are found."""
    package = tmp_path / "keras_seq"
    (package / "layers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers" / "__init__.py").write_text("")
    (package / "layers" / "lstm.py").write_text(
        "def f():\n    from keras_seq.training import trainer\n")
    (package / "training").mkdir()
    (package / "training" / "__init__.py").write_text("")
    (package / "training" / "trainer.py").write_text("from keras_seq.layers import lstm\n")
    planted = graph(module_files(package))
    assert circles(planted) == [["keras_seq.layers.lstm", "keras_seq.training.trainer"]]
    assert planted["keras_seq.layers.lstm"] == {"keras_seq.training.trainer": 2}
    assert layer_of("keras_seq.training.trainer") > layer_of("keras_seq.layers.lstm")
    body = "".join(f"    x = {i}\n" for i in range(80))  # 81 lines with the def
    (package / "layers" / "long.py").write_text(f"def long():\n{body}")
    (package / "benchmarks").mkdir()
    (package / "benchmarks" / "long.py").write_text(f"def long():\n{body}")
    assert long_functions(tmp_path, ("keras_seq",)) == \
        ["keras_seq/layers/long.py:1 long (81 lines)"]
