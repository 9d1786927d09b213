"""The README's measured claims come from docs/results.json (tools/results.py), so they
cannot drift from what the runs recorded, from their pages, or from the code's rules."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from keras_seq.pipeline import MAX_BYTES, PPL_CUT, choose_shipped_model
from keras_seq.pipeline import MIX_NAME as MIX
from tools import results as tool

ROOT = Path(__file__).resolve().parents[1]
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?:e-?\d+)?")


@pytest.fixture(scope="module")
def recorded():
    return tool.load()


def test_the_readme_blocks_are_what_the_results_file_renders(recorded):
    text = tool.README.read_text()
    assert set(tool.blocks(text)) == set(tool.RENDERERS), "a generated block is missing"
    assert text == tool.render(text, recorded), (
        "README.md differs from docs/results.json: run `python -m tools.results render`")


def test_every_headline_number_is_on_its_page(recorded):
    for row in recorded["headlines"]:
        page = (ROOT / row["page"].split("#")[0]).read_text()
        missing = [n for n in NUMBER.findall(row["measured"]) if n not in page]
        assert not missing, f"{row['what']!r}: {missing} not on {row['page']}"


def test_the_recorded_main_job_agrees_with_the_code(recorded):
    runs = recorded["main_job"]["runs"]
    assert runs, "no make demo run recorded: python -m tools.results record RUN_DIR…"
    for run in runs:
        manifest = {"models": [{**c, "parity": {"val_ppl": c["val_ppl"]}}
                               for c in run["candidates"] if c["val_ppl"] is not None]}
        chosen, _ = choose_shipped_model(manifest, run["ngram"]["val_ppl"])
        assert chosen["name"] == run["shipped"]["name"], "the shipping rule picks another"
        targets = " ".join(c["target"] for c in run["checks"])
        assert f"{MAX_BYTES / 1e6:.1f} MB" in targets and f"{1 - PPL_CUT:.2f}×" in targets
        assert {"cpu", "cores", "load_1min"} <= set(run["machine"])


def test_a_changed_record_changes_the_readme(recorded):
    text = tool.README.read_text()
    changed = {**recorded, "headlines": recorded["headlines"][:-1]}
    assert tool.render(text, changed) != text


def test_every_readme_table_row_has_its_headers_cells():
    # a bare | inside a cell (even in backticks) splits it on GitHub: the renderer escapes
    # them, and hand-written tables must too
    bare = re.compile(r"(?<!\\)\|")
    lines = tool.README.read_text().splitlines()
    header = None
    for number, line in enumerate(lines, 1):
        if not line.startswith("|"):
            header = None
            continue
        if header is None:
            header = len(bare.findall(line))
        assert len(bare.findall(line)) == header, f"README.md:{number}: {line[:80]}"


def test_the_other_texts_page_shows_the_recorded_runs(recorded):
    """Each run on another text (``other_texts``) shows on its page with the figures its
    record holds: the mixture's test PPL ratio, top-1 ratio and keystroke difference."""
    page = (ROOT / "docs" / "export-and-on-device.md").read_text()
    texts = recorded.get("other_texts", {})
    assert len(texts) >= 2, "fewer than two other texts recorded (tools.results record-text)"
    for name, entry in texts.items():
        for run in entry["runs"]:
            models, versus = run["test"]["models"], run["test"]["versus"]
            arpa = next(m for n, m in models.items() if "arpa" in n)
            compact = next(m for n, m in models.items() if "compact" in n)
            ships = MIX if MIX in versus else f"tflite {run['shipped']['name']}"
            for figure in (f"{models[ships]['ppl'] / arpa['ppl']:.3f}×",
                           f"{models[ships]['top1_iv'] / compact['top1_iv']:.3f}×",
                           f"+{100 * versus[ships]['ksr']['diff']:.2f}",
                           f"{run['bytes'] / 1e6:.1f} MB"):
                assert figure in page, f"{name}: {figure} not on docs/export-and-on-device.md"
