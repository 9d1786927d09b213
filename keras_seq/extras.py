"""The optional packages behind ``pip install 'keras-seq[EXTRA]'``, and the one-line error
when a feature's package is missing.

The core install (pyproject.toml's ``dependencies``) covers the layers, training and export;
a feature that needs more imports it through :func:`require` when it runs, so the message
naming the extra is written here once::

    plt = pyplot("the sparsity plot")   # matplotlib.pyplot, or KerasSeqError naming [plot]

>>> require("json", "plot", "a test").__name__
'json'
>>> missing("no_such_module_here", "plot", "the sparsity plot")
"the sparsity plot needs no_such_module_here, which is not installed: pip install 'keras-seq[plot]'"
"""

from __future__ import annotations

import importlib

from keras_seq.backend import installed
from keras_seq.errors import KerasSeqError

__all__ = ["PACKAGES", "missing", "pyplot", "require"]

# module -> the package pip installs (where they differ)
PACKAGES = {"tensorflow_text": "tensorflow-text"}


def _message(module: str, extra: str, feature: str, hint: str = "") -> str:
    top = module.split(".")[0]
    return (f"{feature} needs {PACKAGES.get(top, top)}, which is not installed: "
            f"pip install 'keras-seq[{extra}]'{hint}")


def missing(module: str, extra: str, feature: str) -> str | None:
    """``None`` where ``module`` is installed, else the message :func:`require` raises (for
    a feature that is skipped with a note instead of failing)."""
    return None if installed(module.split(".")[0]) else _message(module, extra, feature)


def require(module: str, extra: str, feature: str, hint: str = ""):
    """``module`` imported, or a one-line :class:`KerasSeqError`: ``feature`` needs its
    package, ``pip install 'keras-seq[extra]'`` (then ``hint``, another way round it)."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        if (err.name or module).split(".")[0] != module.split(".")[0]:
            raise  # the package is there but one of its own dependencies is not
        raise KerasSeqError(_message(module, extra, feature, hint)) from err


def pyplot(feature: str):
    """``matplotlib.pyplot`` on the file-only Agg backend (the ``plot`` extra)."""
    require("matplotlib", "plot", feature).use("Agg")
    return require("matplotlib.pyplot", "plot", feature)
