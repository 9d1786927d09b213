"""TensorFlow's start-up lines kept off a command's output (``keras-seq --debug`` keeps them).

TensorFlow prints its start-up lines ("oneDNN custom operations are on…", "Could not find
cuda drivers…", "failed call to cuInit…") from C++. Those printed once it is loaded obey
``TF_CPP_MIN_LOG_LEVEL``; those printed while its libraries load come before absl's
logging is set up and ignore it. So :func:`quiet_tensorflow_startup` sets the variable and
makes the first ``import tensorflow`` (whichever command does it, whenever) run with the
process's stderr (file descriptor 2) caught in a temporary file; afterwards every caught
line that is not an absl log line is written back, so a real error still shows.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
import tempfile
import warnings

#: absl's C++ log line ("I0000 00:00:1796121005.113392   11735 port.cc:153] …") and the
#: line absl prints before its first one
STARTUP_LINE = re.compile(r"^([IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ \S+:\d+\] |"
                          r"WARNING: All log messages before absl::InitializeLog\(\) is called)")


def quiet_tensorflow_startup() -> None:
    """Silence TensorFlow's start-up lines in this process (call before TensorFlow is
    imported; a user's own ``TF_CPP_MIN_LOG_LEVEL`` is kept)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "tensorflow" not in sys.modules and not any(
            isinstance(finder, _QuietImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _QuietImport())


@contextlib.contextmanager
def _caught_stderr():
    """Run the body with file descriptor 2 in a temporary file; write back every line of
    it that is not an absl start-up line (:data:`STARTUP_LINE`)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as caught:
        os.dup2(caught.fileno(), 2)
        try:
            with warnings.catch_warnings():  # Python warnings of the import, too
                warnings.simplefilter("ignore")
                yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = [line for line in caught.read().decode("utf-8", "replace").splitlines()
                    if not STARTUP_LINE.match(line)]
            if kept:
                print("\n".join(kept), file=sys.stderr, flush=True)


class _QuietImport(importlib.abc.MetaPathFinder):
    """Finds ``tensorflow`` as Python would, and runs its first import in
    :func:`_caught_stderr`."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        spec = None
        for finder in sys.meta_path:  # as the finders after this one would (a blocker too)
            if finder is not self and hasattr(finder, "find_spec"):
                spec = finder.find_spec(name, path, target)
                if spec is not None:
                    break
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader, self)
        return spec


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader, finder):
        self.loader, self.finder = loader, finder

    def __getattr__(self, name):  # get_resource_reader, is_package…: the real loader's
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        if self.finder in sys.meta_path:  # once: later imports find the loaded module
            sys.meta_path.remove(self.finder)
        with _caught_stderr():
            self.loader.exec_module(module)
