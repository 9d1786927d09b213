"""Public names of a package, imported from their modules when first used (PEP 562).

``keras_seq.training`` and ``keras_seq.export`` list what a script uses
(``from keras_seq.training import ResetStatesCallback``) without importing Keras or
TensorFlow when the package itself is imported: the command line reads light modules of
these packages (their configs) and must stay quick to start.

>>> import types
>>> pkg = types.ModuleType("pkg")
>>> pkg.__getattr__, pkg.__dir__ = lazy_exports("pkg", {"dumps": "json"})
>>> pkg.__getattr__("dumps")([1])
'[1]'
"""

from __future__ import annotations

import importlib


def lazy_exports(package: str, table: dict[str, str]):
    """``(__getattr__, __dir__)`` for ``package``: ``table`` maps each public name to the
    module that defines it; an unknown name raises ``AttributeError`` as usual."""

    def __getattr__(name: str):
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__():
        return sorted(table)

    return __getattr__, __dir__
