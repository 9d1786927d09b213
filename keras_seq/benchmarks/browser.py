"""Headless Chromium driven by Playwright, for the browser tests and ``bench web``.

Debian's ``chromium`` package is the browser (Playwright's own download is not reachable
here): :func:`launch_chromium` starts it through ``executable_path`` with the flags a
closed network and a root sandbox need. :func:`browser_missing` says why a browser cannot
run (so tests skip with that reason).

Example::

    with sync_playwright() as p:
        browser = launch_chromium(p)
        page = browser.new_page()
"""

from __future__ import annotations

import importlib.util
import os
import shutil

from keras_seq.errors import KerasSeqError

CHROMIUM_ENV = "KERAS_SEQ_CHROMIUM"
# --no-sandbox: Chromium refuses to sandbox as root; the background-networking flags stop it
# from calling Google's hosts on a closed network at every start.
CHROMIUM_ARGS = ("--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage")


def chromium_path() -> str | None:
    """The Chromium binary: ``$KERAS_SEQ_CHROMIUM``, else ``chromium`` on the PATH."""
    return os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or \
        shutil.which("chromium-browser")


def browser_missing() -> str | None:
    """Why a headless browser cannot run here, or None when it can."""
    if importlib.util.find_spec("playwright") is None:
        return "Playwright for Python is not installed (pip install -r requirements.txt)"
    if chromium_path() is None:
        return ("no Chromium binary: install Debian's chromium (apt-get install chromium) or "
                f"set {CHROMIUM_ENV}")
    return None


def launch_chromium(playwright, gpu: bool = False):
    """A headless Chromium; ``gpu=True`` keeps the GPU (and WebGPU, where there is one)."""
    reason = browser_missing()
    if reason:
        raise KerasSeqError(f"cannot start a browser: {reason}")
    args = [a for a in CHROMIUM_ARGS if not (gpu and a == "--disable-gpu")]
    if gpu:
        args += ["--enable-unsafe-webgpu", "--enable-features=Vulkan"]
    return playwright.chromium.launch(executable_path=chromium_path(), args=args)
