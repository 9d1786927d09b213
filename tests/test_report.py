import json

import pytest

from keras_seq.analysis import report as R


def test_md_table_formats_numbers_and_missing_values():
    text = R.md_table([{"a": 1.23456, "b": None, "c": True, "d": 12345}])
    assert text.splitlines()[0] == "| a | b | c | d |"
    assert "| 1.235 | — | yes | 12,345 |" in text


def test_bad_preset_and_section_say_how_to_fix(tmp_path):
    with pytest.raises(ValueError, match="--quick, --tiny"):
        R.run_report(tmp_path, preset="huge")
    with pytest.raises(ValueError, match="received sections"):
        R.run_report(tmp_path, preset="tiny", sections=["gradient"])


def test_one_section_report_has_claim_command_table_and_verdict(tmp_path):
    # The fast version of the full check below: one cheap section, same layout.
    path = R.run_report(tmp_path, preset="tiny", sections=["sparsity"], progress=False,
                        printer=lambda *a: None)
    text = path.read_text()
    assert f"## {R.CLAIMS['sparsity'][0]}" in text
    for part in ("**Claim.**", "**How measured.** `keras-seq report", "Stand-alone: ",
                 "**Measured.**", "](sparsity.png)", "**Verdict: ", "| tensorflow |"):
        assert part in text, part
    assert (tmp_path / "sparsity.png").is_file()


@pytest.mark.slow  # every section at toy sizes; the layout is covered by the fast test above
def test_tiny_report_through_the_cli(tmp_path):
    from keras_seq.cli import main

    out = tmp_path / "rep"
    assert main(["report", "--out", str(out), "--tiny", "--no-progress"]) == 0
    text = (out / "report.md").read_text()
    for name in R.SECTIONS:
        title = R.CLAIMS[name][0]
        assert f"## {title}" in text
    assert text.count("**Claim.**") == len(R.SECTIONS)
    assert text.count("**How measured.** `keras-seq report") == len(R.SECTIONS)
    assert text.count("**Verdict: ") == len(R.SECTIONS)
    for png in ("gradient_decay.png", "clipping_1.png", "memory.png", "tbptt.png",
                "sparsity.png"):
        assert (out / png).stat().st_size > 1000, png
        assert f"]({png})" in text
    assert "tensorflow" in text and "cpu_count" in text and "wall time" in text
    payload = json.loads((out / "report.json").read_text())
    assert set(payload["sections"]) == set(R.SECTIONS)
    for section in payload["sections"].values():
        assert section["verdict"] in ("agrees", "partly", "disagrees")
    # Merging report folders (run in parallel) keeps every section and copies the plots.
    merged = tmp_path / "merged"
    assert main(["report", "--out", str(merged), "--combine", str(out)]) == 0
    merged_text = (merged / "report.md").read_text()
    assert merged_text.count("**Verdict: ") == len(R.SECTIONS)
    assert (merged / "memory.png").is_file() and "Combined from" in merged_text
    with pytest.raises(ValueError, match="no report.json"):
        R.combine_reports(tmp_path / "x", tmp_path)
