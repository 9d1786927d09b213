"""The report's keyboard section: the arc (NPLM … LSTM) against KN by perplexity and by
what a keyboard user sees, with the verdict's rule checked on made-up rows."""

import json

import pytest

from keras_seq.analysis import keyboard_arc
from keras_seq.analysis import report as R


def test_keyboard_section_rates_the_arc_against_kn(tmp_path):
    path = R.run_report(tmp_path, preset="tiny", sections=["keyboard"], progress=False,
                        printer=lambda *a: None)
    text = path.read_text()
    assert f"## {R.CLAIMS['keyboard'][0]}" in text
    for part in ("| NPLM |", "| LSTM |", "| KN2 |", "top-1 in-vocab − KN",
                 "Stand-alone: `keras-seq bench lm --out runs/bench-keyboard --data python-docs "
                 "--cells nplm,lstm --seed 0", "](keyboard.png)"):
        assert part in text, part
    assert (tmp_path / "keyboard.png").stat().st_size > 1000
    section = json.loads((tmp_path / "report.json").read_text())["sections"]["keyboard"]
    rows = section["data"]["rows"]
    assert [r["model"] for r in rows] == ["nplm", "lstm", "KN2"]
    assert all("keyboard" in r for r in rows) and "vs_kn" not in rows[-1]
    assert section["verdict"] in ("agrees", "partly", "disagrees")
    assert len(section["checks"]) == 3  # one per neural model, then the verdict's


def _row(model, ppl, top1_low, ksr_low):
    interval = {"diff": 0.01, "high": 0.02}
    return {"model": model, "val_ppl": ppl, "ppl_vs_kn": ppl / 100, "params": 1000,
            "epochs": 1, "keyboard": {m: 0.2 for m in ("top1", "top3", "top1_iv", "top3_iv",
                                                        "ksr")},
            "vs_kn": {"top1_iv": {**interval, "low": top1_low},
                      "top3_iv": {**interval, "low": 0.0}, "ksr": {**interval, "low": ksr_low}}}


@pytest.mark.parametrize("ppl, top1_low, ksr_low, verdict", [
    (80, 0.001, 0.002, "agrees"),      # lower perplexity, both keyboard intervals above 0
    (80, -0.001, 0.002, "partly"),     # lower perplexity, top-1 a tie
    (80, 0.001, -0.002, "partly"),     # lower perplexity, keystroke savings a tie
    (120, 0.001, 0.002, "partly"),     # higher perplexity, yet ahead where users look
    (120, -0.001, 0.002, "disagrees"),
])
def test_the_verdict_needs_perplexity_and_both_keyboard_intervals(monkeypatch, tmp_path, ppl,
                                                                  top1_low, ksr_low, verdict):
    kn = {"model": "KN5", "val_ppl": 100.0, "ppl_vs_kn": 1.0, "params": None, "epochs": None,
          "keyboard": {"top1": 0.2, "top3": 0.3, "top1_iv": 0.2, "top3_iv": 0.3, "ksr": 0.4,
                       "k": 3, "positions": 10, "in_vocab_words": 8}}
    bench = {"rows": [_row("gru", 90, 0.01, 0.01), _row("lstm", ppl, top1_low, ksr_low), kn],
             "tokenizer": "word", "split_ratio": "90/5/5", "vocab_size": 50,
             "budget_params": 1000, "minutes_per_model": 1, "data": "x"}
    monkeypatch.setattr(keyboard_arc, "run_bench", lambda *a, **k: bench)
    section = keyboard_arc.section_keyboard(tmp_path, {"data": "x"}, 0, "x", False)
    assert section["verdict"] == verdict
    assert section["checks"][-1].startswith("LSTM vs KN5: lower perplexity "
                                            + ("yes" if ppl < 100 else "no"))
