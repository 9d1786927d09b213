"""``keras-seq demo`` scripted through stdin, in a process that must not import TensorFlow."""

import subprocess
import sys

import pytest
from test_export_common import exported

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


@pytest.mark.slow  # a real pseudo-terminal; the scripted (stdin) demo tests cover the same paths
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
        assert wait_for("Ctrl-D = quit."), seen
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
