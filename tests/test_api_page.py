"""The public Python API: docs/api.md agrees with the package, the short import paths work
without loading TensorFlow before a name is used, and yesterday's import paths still work."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools import api_page

ROOT = Path(__file__).resolve().parents[1]


def test_api_page_lists_exactly_the_public_names():
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| \[`(\w+)`\]", page, re.M))
    public = {name for names in api_page.public_names().values() for name in names}
    assert not public - listed, f"missing from docs/api.md: {sorted(public - listed)}"
    assert not listed - public, f"docs/api.md names what is not public: {sorted(listed - public)}"
    assert api_page.without_anchors(page) == api_page.without_anchors(api_page.render()), \
        "docs/api.md is out of date: run python -m tools.api_page"


def test_api_page_links_point_at_the_definitions():
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for name, target in re.findall(r"^\| \[`(\w+)`\]\((\.\./[^)#]+)(?:#L\d+)?\)", page, re.M):
        path = (ROOT / "docs" / target).resolve()
        assert path.is_file(), (name, target)
        text = path.read_text(encoding="utf-8")
        assert re.search(rf"^(class|def) {name}\b|^{name} = |\b{name}\b", text, re.M), \
            (name, target)


@pytest.mark.parametrize("package", ["keras_seq.training", "keras_seq.export",
                                     "keras_seq.data", "keras_seq.runtime"])
def test_short_import_paths_load_no_tensorflow_until_used(package):
    code = (f"import sys, {package} as p; names = p.__all__; "
            "assert 'tensorflow' not in sys.modules and 'keras' not in sys.modules, "
            "sorted(m for m in sys.modules if m.startswith(('tensorflow', 'keras.')))[:5]; "
            "print(len(names))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_old_import_paths_still_work():
    """Scripts written against the modules keep working (nothing moved away)."""
    import keras_seq.data
    import keras_seq.export
    import keras_seq.layers
    import keras_seq.tasks.lm
    import keras_seq.training
    from keras_seq.data.batching import stream_arrays, stream_dataset
    from keras_seq.export.tflite import export_tflite
    from keras_seq.layers.state import reset_recurrent_states
    from keras_seq.models.perplexity import Perplexity
    from keras_seq.models.rnn_lm import TiedLogits
    from keras_seq.tasks.lm.config import LMConfig
    from keras_seq.training.callbacks import ResetStatesCallback
    from keras_seq.training.trainer import start_run

    assert keras_seq.data.stream_dataset is stream_dataset
    assert keras_seq.data.stream_arrays is stream_arrays
    assert keras_seq.export.export_tflite is export_tflite
    assert keras_seq.layers.reset_recurrent_states is reset_recurrent_states
    assert keras_seq.layers.TiedLogits is TiedLogits
    assert keras_seq.tasks.lm.LMConfig is LMConfig
    assert keras_seq.training.ResetStatesCallback is ResetStatesCallback
    assert keras_seq.training.Perplexity is Perplexity
    assert keras_seq.training.start_run is start_run
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        keras_seq.training.Nope  # noqa: B018
