"""The machine a measurement ran on: CPU model, cores and load, recorded beside every figure.

>>> sorted(describe())
['cores', 'cpu', 'load_1min']
"""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_1min() -> float | None:
    """The 1-minute load average (``None`` where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def describe() -> dict:
    """``{"cpu", "cores", "load_1min"}`` now."""
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "load_1min": load_1min()}
