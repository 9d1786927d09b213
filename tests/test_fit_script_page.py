"""docs/fit-script.md run as written: each ```python block after a ``<!-- fit-script: NAME -->``
marker, in order, in one namespace (in a temporary folder). Then what the page says is
checked: the model learned, the shuffle guard printed the line the page shows, every
exported variant streams close to Keras, and LiteRT's float32 probabilities equal Keras's."""

import re
from pathlib import Path

import numpy as np

PAGE = Path(__file__).resolve().parents[1] / "docs" / "fit-script.md"
BLOCK = re.compile(r"<!-- fit-script: ([\w-]+) -->\s*```(\w+)\n(.*?)```", re.S)
ORDER = ["data", "model", "fit", "guard", "save", "export", "runtime"]


def blocks() -> dict:
    found = {name: (lang, code) for name, lang, code in BLOCK.findall(PAGE.read_text("utf-8"))}
    assert [n for n in found if found[n][0] == "python"] == ORDER, list(found)
    return found


def test_the_fit_script_page_runs_as_written(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    found = blocks()
    namespace = {"__name__": "fit_script"}
    for name in ORDER:
        exec(compile(found[name][1], f"{PAGE.name}:{name}", "exec"), namespace)
    ns = namespace
    # the model learned: validation perplexity well under the vocabulary's size
    assert ns["ppl"] < ns["V"] / 4, (ns["ppl"], ns["V"])
    # the guard's one line is the one the page shows
    assert ns["refused"] == found["guard-output"][1].strip()
    assert "\n" not in ns["refused"]
    # every variant exported, close to Keras
    entries = {m["variant"]: m["parity"] for m in ns["manifest"]["models"]}
    assert set(entries) == {"float32", "dynamic", "int8"}
    assert entries["float32"]["max_abs_prob_diff"] < 1e-4
    for variant, p in entries.items():
        assert p["top1_agreement"] >= 0.97, (variant, p)
        assert abs(p["ppl_delta_pct"]) < 1.0, (variant, p)
    # LiteRT float32 against the Keras model, token by token (the page's own check)
    assert ns["gap"] < 1e-4
    assert len(ns["lm"].suggest(3)) == 3
    # the reloaded .keras file is the same model
    x = np.tile(ns["ids"][:T_CHECK], (ns["B"], 1))
    from keras_seq.layers import reset_recurrent_states

    reset_recurrent_states(ns["model"])
    reset_recurrent_states(ns["reloaded"])
    np.testing.assert_allclose(ns["reloaded"].predict(x, batch_size=ns["B"], verbose=0),
                               ns["model"].predict(x, batch_size=ns["B"], verbose=0),
                               atol=1e-6)


T_CHECK = 20
