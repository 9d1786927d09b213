"""The test suite's own layout: a module named ``test_*.py`` holds tests, and what several
modules share (tiny trained runs, servers) lives in :mod:`tests.fixtures`, imported as
``from tests.fixtures.… import …``: no test module imports another."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _modules():
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def _imported(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_every_test_module_holds_tests():
    empty = []
    for path in _modules():
        tree = ast.parse(path.read_text())
        if not any(isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and node.name.startswith("test") for node in ast.walk(tree)):
            empty.append(str(path.relative_to(TESTS)))
    assert not empty, f"named like test modules, holding no test (to tests/fixtures): {empty}"


def test_no_test_module_imports_another():
    found = {str(path.relative_to(TESTS)): sorted(
        name for name in _imported(ast.parse(path.read_text()))
        if name.split(".")[-1].startswith("test_")) for path in _modules()}
    assert not {k: v for k, v in found.items() if v}, found
    assert (TESTS / "fixtures" / "__init__.py").is_file()
