"""Harnesses that are not the library: run from the project root (``python -m tools.…``).

``tools.reliability`` is the fault campaign behind ``docs/reliability.md``. Nothing in
``keras_seq/`` imports from here; ``tools`` imports ``keras_seq`` like any user would.
"""
