"""``keras-seq`` output starts with its own lines: TensorFlow's and absl's start-up lines
("oneDNN custom operations are on…", "Could not find cuda drivers…", "failed call to
cuInit…") are kept off stdout and stderr unless ``--debug``."""

import os
import re
import subprocess
import sys

import pytest

# written here, not imported from keras_seq, so the check does not share the code it checks
STARTUP = re.compile(r"^[IWEF]\d{4} |absl::InitializeLog|oneDNN custom operations|"
                     r"cuda drivers|cuInit", re.M)


def _run(*argv, code=None, timeout=300):
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    env["KERAS_BACKEND"] = "tensorflow"
    command = [sys.executable, "-c", code] if code else [sys.executable, "-m", "keras_seq.cli",
                                                         *map(str, argv)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    return out, out.stdout + out.stderr


IMPORT = "import tensorflow as tf; tf.config.list_physical_devices('GPU'); print('imported')"


def test_importing_tensorflow_after_the_cli_set_up_prints_no_start_up_line():
    _, plain = _run(code=IMPORT)
    if not STARTUP.search(plain):
        pytest.skip("TensorFlow prints no start-up line on this machine")
    out, both = _run(code="from keras_seq.commands._startup import quiet_tensorflow_startup; "
                          "quiet_tensorflow_startup(); " + IMPORT)
    assert out.returncode == 0 and "imported" in out.stdout, both[-2000:]
    assert not STARTUP.search(both), both[-2000:]


def test_a_python_error_during_the_import_still_shows():
    code = ("import sys; from keras_seq.commands._startup import _caught_stderr\n"
            "with _caught_stderr():\n"
            "    print('real problem', file=sys.stderr)\n"
            "    import os\n"
            "    os.write(2, b'I0000 00:00:1796121005.113392   11735 port.cc:153] x\\n')\n")
    out, both = _run(code=code)
    assert out.stderr.strip() == "real problem", both


@pytest.mark.slow
def test_train_and_eval_print_no_start_up_line_unless_debug(tmp_path):
    run_dir = tmp_path / "run"
    out, both = _run("train", "lm", "--run-dir", run_dir, "--epochs", "1",
                     "--max-steps-per-epoch", "2", "--units", "8", "--embed-dim", "8",
                     "--batch-size", "4", "--bptt", "5", "--histogram-freq", "0",
                     "--sample-tokens", "0", "--max-vocab", "200", "--quiet")
    assert out.returncode == 0, both[-2000:]
    assert both.startswith("lm: "), both[:2000]  # its own first line comes first
    assert not STARTUP.search(both), both[:2000]
    out, both = _run("eval", "lm", "--run-dir", run_dir)
    assert out.returncode == 0 and not STARTUP.search(both), both[:2000]
    out, both = _run("--debug", "eval", "lm", "--run-dir", run_dir)
    assert out.returncode == 0 and "PPL" in out.stdout, both[-2000:]
    assert STARTUP.search(out.stderr), "--debug should keep TensorFlow's start-up lines"
