"""The README's measured claims, kept in one results file that the runs themselves write.

``docs/results.json`` holds:

* ``main_job``: what ``make demo`` printed, run by run: the machine (CPU, cores, load at the
  start and end), the pipeline's wall time, the step models it exported (size, val PPL),
  the model it shipped and its targets (a)–(g) with their measured values. ``record``
  copies these out of each run's ``pipeline.json`` and ``tflite/manifest.json``.
* ``other_texts``: the pipeline with default flags on texts it was not tuned on
  (``tools/public_texts.py``), per text its runs, each naming its machine (figures from
  different CPUs stay apart); ``record-text NAME RUN_DIR`` adds one.
* ``headlines``: the other rows of the README's results table, each with the command that
  measured it and the page that holds the full table (tests/test_results.py checks that
  every number of a row appears on its page).

``render`` rewrites the README's generated blocks (between ``<!-- results:NAME -->`` and
``<!-- /results:NAME -->``) from the file; tests/test_results.py fails when the README
differs from what ``render`` would write, so the two cannot drift.

    python -m tools.results record runs/demo1 runs/demo2 runs/demo3   # after make demo
    python -m tools.results record-text kjv runs/kjv   # keras-seq pipeline --data kjv.txt
    python -m tools.results render                                     # README.md
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "docs" / "results.json"
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- results:(?P<name>[\w-]+) -->\n)(?P<body>.*?)"
                   r"(<!-- /results:(?P=name) -->)", re.S)


def load(path: Path = RESULTS) -> dict:
    return json.loads(Path(path).read_text())


def run_record(run_dir: Path) -> dict:
    """The main-job record of one ``keras-seq pipeline --out RUN_DIR`` (``make demo``)."""
    run_dir = Path(run_dir)
    summary = json.loads((run_dir / "pipeline.json").read_text())
    manifest = json.loads((run_dir / "tflite" / "manifest.json").read_text())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=ROOT).stdout.strip()
    candidates = [{"name": m["name"], "graph": m["graph"], "size_bytes": m["size_bytes"],
                   "val_ppl": (m.get("parity") or {}).get("val_ppl")}
                  for m in manifest["models"] if "error" not in m]
    shipped = next(c for c in candidates if c["name"] == summary["demo_model"]["name"])
    return {"commit": commit, "machine": summary.get("machine", {}),
            "pipeline_seconds": round(summary["wall_seconds"], 1),
            "epochs": summary["epochs"], "lstm_val_ppl": summary["lstm"]["val"]["ppl"],
            "ngram": {"order": summary["ngram"]["order"],
                      "val_ppl": summary["ngram"]["val"]["ppl"],
                      "compact_bytes": summary["ngram"]["compact_bytes"],
                      "compact_val_ppl": summary["ngram"]["compact_val_ppl"]},
            "shipped": shipped, "shipped_reason": summary["demo_model"]["reason"],
            "candidates": candidates, "skipped": [
                {"name": m["name"], "why": m["error"]} for m in manifest["models"]
                if "error" in m] + manifest.get("skipped", []),
            "checks": summary["checks"],
            "keyboard": summary.get("keyboard"),
            "mixture": {k: (summary.get("mixture") or {}).get(k)
                        for k in ("ships", "weights", "half_life", "ngram_order",
                                  "device_bytes")},
            "test": summary.get("test")}


def text_record(run_dir: Path) -> dict:
    """A run on another text: :func:`run_record` with the text's size, sha256 and
    vocabulary, and the stages' seconds."""
    summary = json.loads((Path(run_dir) / "pipeline.json").read_text())
    tokenizer = json.loads((Path(run_dir) / "tflite" / "tokenizer.json").read_text())
    data = Path(summary["data"])
    return {**run_record(run_dir), "data": data.name, "bytes": data.stat().st_size,
            "sha256": summary["ngram"]["val"]["fingerprint"]["corpus_sha256"],
            "vocab_size": len(tokenizer["vocab"]), "units": summary["lstm"]["config"]["units"],
            "epochs_done": summary["lstm"]["epochs"],
            "minutes_budget": summary["minutes_budget"],
            "stages_seconds": {k: round(v, 1) for k, v in summary["stages_seconds"].items()}}


# ----------------------------------------------------------------------------------------
# Rendering


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {int(round(seconds % 60))} s"


def render_main_job(results: dict) -> str:
    """The README's paragraph on what ``make demo`` ships, from the recorded runs."""
    runs = results["main_job"]["runs"]
    first = runs[0]
    shipped, ng = first["shipped"], first["ngram"]
    met = [sum(c["met"] for c in run["checks"]) for run in runs]
    targets = "–".join((runs[0]["checks"][0]["target"][:3], runs[0]["checks"][-1]["target"][:3]))
    machine = first["machine"]
    loads = ", ".join(f"{run['machine'].get('load_1min', float('nan')):.2f}" for run in runs)
    times = ", ".join(_minutes(run["pipeline_seconds"]) for run in runs)
    all_met = all(m == len(run["checks"]) for m, run in zip(met, runs))
    verdict = (f"all targets {targets} met in all {len(runs)}" if all_met else
               "targets met: " + ", ".join(f"{m} of {len(r['checks'])}"
                                           for m, r in zip(met, runs)))
    mix = first.get("mixture") or {}
    mixed = (f" It suggests with that model mixed with KN{mix['ngram_order']} and a cache of "
             f"the words typed ({mix['device_bytes']:,} bytes on the device), which won on "
             "validation." if mix.get("ships") and mix.get("ngram_order") else "")
    return (f"The phone model it ships is `{shipped['name']}`: {shipped['size_bytes']:,} bytes, "
            f"val PPL {shipped['val_ppl']:.2f} against KN{ng['order']}'s "
            f"{ng['val_ppl']:.2f} ({shipped['val_ppl'] / ng['val_ppl']:.3f}×), chosen by "
            f"the rule in `keras_seq/pipeline.py` (`choose_shipped_model`).{mixed} Recorded "
            f"`make demo` runs ({len(runs)}, commit {first['commit']}, "
            f"{machine.get('cores')} cores, {machine.get('cpu')}, 1-minute load at the start "
            f"{loads}): the pipeline took {times}; {verdict}.\n")


def render_checks(results: dict) -> str:
    """The targets table of the last recorded run."""
    run = results["main_job"]["runs"][-1]
    lines = ["| target | measured | met |", "|---|---|---|"]
    for check in run["checks"]:
        target, measured = (check[key].replace("<", "&lt;") for key in ("target", "measured"))
        lines.append(f"| {target} | {measured} | {'yes' if check['met'] else 'no'} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell: every ``|`` escaped (GitHub splits cells
    on a bare ``|`` even inside backticks)."""
    return re.sub(r"(?<!\\)\|", r"\\|", text)


def render_headlines(results: dict) -> str:
    lines = ["| what | measured | command (page) |", "|---|---|---|"]
    for row in results["headlines"]:
        lines.append(f"| {_cell(row['what'])} | {_cell(row['measured'])} | "
                     f"`{_cell(row['command'])}` ([{row['page_title']}]({row['page']})) |")
    return "\n".join(lines) + "\n"


RENDERERS = {"main-job": render_main_job, "checks": render_checks,
             "headlines": render_headlines}


def render(text: str, results: dict) -> str:
    """``text`` (the README) with every generated block rewritten from ``results``."""
    def replace(match):
        name = match.group("name")
        if name not in RENDERERS:
            raise SystemExit(f"README block results:{name} has no renderer; expected one of "
                             f"{', '.join(RENDERERS)}")
        return match.group(1) + RENDERERS[name](results) + match.group(4)

    return BLOCK.sub(replace, text)


def blocks(text: str) -> dict:
    """``{name: body}`` of the generated blocks in ``text``."""
    return {m.group("name"): m.group("body") for m in BLOCK.finditer(text)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.results",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="replace main_job's runs with these pipeline runs")
    rec.add_argument("run_dirs", nargs="+", type=Path, help="each a `keras-seq pipeline --out`")
    text = sub.add_parser("record-text", help="add a pipeline run on another text")
    text.add_argument("name", help="the text's name (tools/public_texts.py: kjv, jargon, …)")
    text.add_argument("run_dir", type=Path, help="its `keras-seq pipeline --data FILE --out`")
    text.add_argument("--commit", default=None,
                      help="the commit the run was made at (default: HEAD's)")
    sub.add_parser("render", help="rewrite README.md's generated blocks from the file")
    args = parser.parse_args(argv)
    results = load()
    if args.command == "record":
        results["main_job"]["runs"] = [run_record(d) for d in args.run_dirs]
    elif args.command == "record-text":
        texts = results.setdefault("other_texts", {})
        texts.setdefault(args.name, {"command": "python -m tools.public_texts --out texts "
                                     f"{args.name} && keras-seq pipeline --data texts/"
                                     f"{args.name}.txt --out runs/{args.name}", "runs": []})
        record = text_record(args.run_dir)
        texts[args.name]["runs"].append({**record, "commit": args.commit or record["commit"]})
    if args.command != "render":
        RESULTS.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
        print(f"{RESULTS}: {args.command} done")
    README.write_text(render(README.read_text(), results))
    print(f"{README}: generated blocks rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
