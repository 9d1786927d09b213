"""``keras-seq demo`` scripted through stdin, in a process that must not import TensorFlow."""

import re
import subprocess
import sys
import threading

import pytest

from tests.fixtures.lm_runs import exported

SCRIPT = "the cat\n?d\n/gen 5\n/reset\n\n/nope\nsat on\n/gen x\n/quit\n"


def _run_demo(model, stdin):
    code = (
        "import sys\n"
        "from keras_seq.cli import main\n"
        f"rc = main(['demo', '--model', {str(model)!r}, '--seed', '1'])\n"
        "bad = [m for m in sys.modules if m == 'tensorflow' or m.startswith('tensorflow.')]\n"
        "print('TF_IMPORTED' if bad else 'NO_TF', file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    return subprocess.run([sys.executable, "-c", code], input=stdin, capture_output=True,
                          text=True, timeout=120)


def test_demo_scripted_without_tensorflow(tmp_path_factory):
    out, _ = exported(tmp_path_factory)
    res = _run_demo(out / "step_dynamic.tflite", SCRIPT)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "NO_TF" in res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("keras-seq demo: lstm 1×12 (step, dynamic)")
    typed = [line for line in lines if "→" in line and "µs]" in line]
    assert len(typed) == 4  # the, cat, sat, on: one row of suggestions per word
    assert all(line.count("'") >= 8 for line in typed)  # the word + 3 suggestions
    assert any("'d'… → 'dog'" in line for line in lines)
    assert any(line.startswith("[5 tokens, per token p50") for line in lines)
    assert "(new context)" in res.stdout and "unknown command '/nope'" in res.stdout
    assert "usage: /gen N" in res.stdout


def test_demo_on_fused_model_and_bad_model(tmp_path_factory, tmp_path):
    out, _ = exported(tmp_path_factory)
    res = _run_demo(out / "step_fused_float32.tflite", "the\n/gen 3\n")
    assert res.returncode == 0 and "NO_TF" in res.stderr
    assert "(step_fused, float32)" in res.stdout
    res = _run_demo(tmp_path / "nothing.tflite", "")
    assert res.returncode == 2 and "no model at" in res.stderr


class _Screen:
    """The demo's output stream: keeps what was written and wakes :meth:`wait_for`."""

    def __init__(self):
        self.text = ""
        self.changed = threading.Condition()

    def write(self, text):
        with self.changed:
            self.text += text
            self.changed.notify_all()
        return len(text)

    def flush(self):
        pass

    def wait_for(self, fragment, after=0, timeout=60.0):
        """Until ``fragment`` appears past offset ``after``; the timeout only bounds a hung
        demo. Returns the offset just past it."""
        with self.changed:
            assert self.changed.wait_for(lambda: fragment in self.text[after:], timeout), \
                f"{fragment!r} not shown; screen ends with {self.text[-400:]!r}"
            return self.text.index(fragment, after) + len(fragment)


def test_demo_keys_mode_on_a_pseudo_terminal(tmp_path_factory):
    """The fast version of the terminal test below, in this process: the keys go one at a
    time through a real pseudo-terminal (cbreak mode and all), and each is typed only
    after the screen showed the answer to the one before."""
    import os

    from keras_seq.runtime.demo import KEYS_HELP, run_demo

    out, _ = exported(tmp_path_factory)
    master, slave = os.openpty()
    stdin = open(slave, encoding="utf-8", closefd=False)
    screen, result = _Screen(), {}

    def demo():
        try:
            result["rc"] = run_demo(out / "step_float32.tflite", stdin=stdin, stdout=screen,
                                    keys=True, seed=1)
        except BaseException as err:  # noqa: BLE001 - reported by the test thread
            result["error"] = err
            screen.write("\n[demo failed]")

    thread = threading.Thread(target=demo, daemon=True)
    thread.start()
    try:
        at = screen.wait_for(KEYS_HELP)
        at = screen.wait_for("\r\x1b[K  |  next → ", at)  # the first status line: cbreak
        start = screen.text[at:screen.wait_for("  [", at) - 3]  # the start's suggestions
        os.write(master, b"d")
        at = screen.wait_for("'d'… → 'dog'", at)  # completions of the word being typed
        os.write(master, b"og ")
        at = screen.wait_for("dog   |  next → ", at)  # the space fed it: next words
        top = re.match(r"'([^']*)'", screen.text[at:]).group(1)
        os.write(master, b"x\x7f")  # a key, then Backspace takes it back
        at = screen.wait_for("dog x  |  ", at)
        at = screen.wait_for("dog   |  next → ", at)
        os.write(master, b"\t")  # take the top suggestion
        at = screen.wait_for(f"dog {top}   |  next → ", at)
        os.write(master, b"\x07")  # generate
        at = screen.wait_for("µs/token]", at)
        gen = screen.text[screen.text.rindex("\n[", 0, at):at]
        at = screen.wait_for("\r\x1b[K  |  next → ", at)  # generating ends the line
        os.write(master, b"cat ")
        at = screen.wait_for("cat   |  next → ", at)
        os.write(master, b"\x12")  # Ctrl-R: back to the start context
        at = screen.wait_for("\r\x1b[K  |  next → " + start + "  [", at)
        os.write(master, b"\x04")  # Ctrl-D: quit
        thread.join(60)
        assert not thread.is_alive() and "error" not in result, result
        assert result["rc"] == 0
    finally:
        if thread.is_alive():
            os.write(master, b"\x04")
            thread.join(10)
        stdin.close()
        os.close(slave)
        os.close(master)
    assert gen.startswith("\n[20 tokens, p50 ")  # --max-tokens' default


@pytest.mark.slow  # a subprocess; the fast test above drives the same keys in-process
def test_demo_keys_mode_in_a_terminal(tmp_path_factory):
    """One key at a time through a pseudo-terminal: completions, next words, Tab, Ctrl-G."""
    import os
    import select
    import time

    out, _ = exported(tmp_path_factory)
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "keras_seq.cli", "demo", "--model",
                             str(out / "step_float32.tflite")], stdin=slave, stdout=slave,
                            stderr=subprocess.PIPE, close_fds=True)
    os.close(slave)
    seen = ""

    def wait_for(text, timeout=60.0):
        nonlocal seen
        end = time.time() + timeout
        while text not in seen and time.time() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(master, 65536).decode(errors="replace")
                except OSError:
                    break
        return text in seen

    try:
        assert wait_for("|  next → "), seen  # the first status line: cbreak is on
        os.write(master, b"d")
        assert wait_for("'d'… → 'dog'"), seen[-500:]
        os.write(master, b"og ")
        assert wait_for("dog   |  next → "), seen[-500:]
        os.write(master, b"\t")  # take the top suggestion
        os.write(master, b"\x07")  # generate
        assert wait_for("µs/token]"), seen[-500:]
        os.write(master, b"\x04")
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
