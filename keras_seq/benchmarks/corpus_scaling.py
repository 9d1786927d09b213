"""``keras-seq bench scaling``: wall time and peak RSS against corpus size (1 M → 100 M tokens).

For each size the corpus comes from :mod:`keras_seq.benchmarks.scaling_text` (one seeded
stream: the smaller corpora are prefixes of the larger, written once under
``--corpus-dir``), and every stage is a fresh ``keras-seq`` (or ``lmplz``) process, timed
from start to exit. Its peak memory is the larger of its largest process's ``ru_maxrss``
(from ``os.wait4``) and the peak of its whole process tree's PSS, sampled every 0.1 s (so
``ngram train``'s ARPA worker processes count together, shared pages once):

* ``prepare``: ``data prepare --tokenizer word --min-count 1 --split-ratio 100/0/0`` — every
  token in one train split, the full vocabulary, as ``ngram train`` and ``lmplz`` need;
* ``ngram``: ``ngram train --order 5 --memory 1G`` from that prepared directory, with
  ``--profile``: each row also holds the run's own step breakdown (``steps_s``: reading
  the data, tokens, count, merge, discounts, probabilities, arpa);
* ``ngram-raw``: the same from the raw text in one command (``ngram train --data
  corpus.txt``: tokenizing streamed into a temporary prepared folder, then as ``ngram``);
* ``lmplz`` (with ``--lmplz PATH``): KenLM's ``lmplz -o 5 -S 1G`` on the same text (a fixed
  point of the word rule, so the same tokens);
* ``prepare-lm``: ``data prepare`` again with ``--max-vocab 50000``, the LM's vocabulary;
* ``lm-1`` and ``lm-N``: ``train lm`` on it (a 64-unit LSTM, batch 32 × bptt 35, no
  validation split) for 1 and for 1 + N optimizer steps. ``lm-1``'s wall time is the
  start-up: process start to exit through imports, opening the memory-mapped ids, building
  and tracing the model and the first step (an upper bound on the time to the first step).
  Training speed is ``N × 32 × 35 / (fit(lm-N) − fit(lm-1))`` tokens/s, ``fit`` the seconds
  each run spent in ``model.fit`` (its ``metrics.json``): tracing and the first step cancel.

``--rounds R`` runs ``ngram``, ``ngram-raw`` and ``lmplz`` R times at each size, in
alternating order (ABC, CBA, ABC…); the summary takes each stage's median run and gives the
spread (min–max). With two sizes or more, the summary fits ``time ∝ tokens^k`` by least
squares on the log-log points (each stage's medians) and prints ``k`` — near 1 is linear.

Each stage's exact command is recorded with its row; ``--keep`` keeps the ARPA files and the
prepared directories (several GB at 100 M tokens), removed after each size otherwise.
On a shared machine the times move with the load (recorded as ``load``); the RSS does not.

Example (a tiny run from a folder of text, no TensorFlow stages):

>>> import os, tempfile
>>> root = tempfile.mkdtemp()
>>> _ = open(os.path.join(root, "a.md"), "w").write("one two three four five six\\n\\n" * 400)
>>> out = run_bench([2000], out=os.path.join(root, "out"), stages=["prepare"],
...                 roots=[root], progress=None)
>>> row = out["rows"][0]
>>> row["stage"], row["rc"], row["peak_rss_mb"] > 0
('prepare', 0, True)
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from keras_seq.atomic import write_json_atomic
from keras_seq.benchmarks.scaling_text import write_corpora
from keras_seq.errors import DataError
from keras_seq.extras import pyplot
from keras_seq.machine import cpu_name, load_1min

STAGES = ("prepare", "ngram", "ngram-raw", "lmplz", "prepare-lm", "lm")
KN_STAGES = ("ngram", "ngram-raw")  # keras-seq's Kneser-Ney, from prepared ids / raw text
COMPARED = (*KN_STAGES, "lmplz")  # the stages --rounds repeats, alternated
DEFAULT_SIZES = "1M,16M,100M"
LM_BATCH, LM_BPTT = 32, 35
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgG]?)\s*$")
_SCALE = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def parse_sizes(spec: str) -> list[int]:
    """``"20k,1M,1.5M"`` → ``[20000, 1000000, 1500000]`` (sorted, k/M/G = 10³/10⁶/10⁹).

    >>> parse_sizes("16M, 1M")
    [1000000, 16000000]
    """
    sizes = []
    for piece in str(spec).split(","):
        match = _SIZE.match(piece)
        if not match or float(match.group(1)) <= 0:
            raise DataError(f"--sizes {spec!r}: {piece.strip()!r} is not a token count; "
                            "expected positive numbers with an optional k/M/G suffix, "
                            f"e.g. {DEFAULT_SIZES}")
        sizes.append(int(float(match.group(1)) * _SCALE[match.group(2).lower()]))
    return sorted(set(sizes))


def label(n: int) -> str:
    """``16000000`` → ``"16M"``, ``20000`` → ``"20k"``."""
    for suffix, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if n >= scale and n % (scale // 1000 or 1) == 0:
            return f"{n / scale:g}{suffix}"
    return str(n)


def keras_seq_command() -> list[str]:
    """How to start ``keras-seq`` with this interpreter (its script beside it, else ``-c``)."""
    script = Path(sys.executable).parent / "keras-seq"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "import sys; from keras_seq.cli import main; sys.exit(main())"]


# Linux folds the memory a process had before exec into its peak RSS, and a child forked
# from this (large: Python, numpy, maybe TensorFlow) process starts as a copy of it. So the
# command is started by a small Python launcher, whose own child's peak is the command's.
# ``ru_maxrss`` is the largest single process of the command's tree, so the launcher also
# samples the whole tree's PSS (shared pages split between the processes that map them,
# so forked workers are not counted twice) every 0.1 s from /proc.
_LAUNCHER = ("import json, os, subprocess, sys, threading, time\n"
             "def tree_kb(root):\n"
             "    kids = {}\n"
             "    for name in os.listdir('/proc'):\n"
             "        try:\n"
             "            with open(f'/proc/{name}/stat') as f:\n"
             "                ppid = int(f.read().rsplit(')', 1)[1].split()[1])\n"
             "        except (OSError, ValueError, IndexError):\n"
             "            continue\n"
             "        kids.setdefault(ppid, []).append(name)\n"
             "    total, todo = 0, [str(root)]\n"
             "    while todo:\n"
             "        pid = todo.pop()\n"
             "        todo += kids.get(int(pid), [])\n"
             "        try:\n"
             "            with open(f'/proc/{pid}/smaps_rollup') as f:\n"
             "                total += next(int(x.split()[1]) for x in f if x.startswith('Pss:'))\n"
             "        except (OSError, StopIteration, ValueError):\n"
             "            pass\n"
             "    return total\n"
             "peak, done = [0], threading.Event()\n"
             "def sample(pid):\n"
             "    while not done.wait(0.1):\n"
             "        peak[0] = max(peak[0], tree_kb(pid))\n"
             "with open(sys.argv[1], 'wb') as out:\n"
             "    p = subprocess.Popen(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT)\n"
             "    sampler = threading.Thread(target=sample, args=(p.pid,), daemon=True)\n"
             "    if os.path.isdir('/proc'):\n"
             "        sampler.start()\n"
             "    _, status, usage = os.wait4(p.pid, 0)\n"
             "    done.set()\n"
             "print(json.dumps([os.waitstatus_to_exitcode(status), usage.ru_maxrss, peak[0]]))\n")


def measure(cmd: list[str], log: Path) -> dict:
    """Run ``cmd`` (output to ``log``); its wall time, exit status and peak memory:
    ``peak_rss_mb`` is the larger of the largest process's peak RSS and the sampled peak of
    the whole process tree's PSS (``tree_pss_mb``: what worker processes add together)."""
    start = time.perf_counter()
    launched = subprocess.run([sys.executable, "-c", _LAUNCHER, str(log), *cmd],
                              capture_output=True, text=True, check=False,
                              env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    wall = time.perf_counter() - start
    if launched.returncode != 0:
        raise DataError(f"could not start {cmd[0]!r}: {launched.stderr.strip()[-300:]}")
    rc, max_rss_kb, tree_kb = json.loads(launched.stdout.strip().splitlines()[-1])
    return {"wall_s": round(wall, 3), "peak_rss_mb": round(max(max_rss_kb, tree_kb) / 1024, 1),
            "max_rss_mb": round(max_rss_kb / 1024, 1), "tree_pss_mb": round(tree_kb / 1024, 1),
            "rc": rc}


def _fit_seconds(run_dir: Path) -> float | None:
    """The seconds a ``train lm`` run spent in ``fit`` (``metrics.json``'s train_minutes)."""
    try:
        return round(json.loads((run_dir / "metrics.json").read_text())["train_minutes"] * 60, 3)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _tail(log: Path, n: int = 5) -> str:
    lines = log.read_text(errors="replace").strip().splitlines()
    return " | ".join(line.strip() for line in lines[-n:])


def _commands(stage: str, corpus: Path, work: Path, *, memory: str, max_vocab: int,
              lm_steps: int, lmplz: str | None) -> list[tuple[str, list[str]]]:
    """``[(row name, command)]`` of one stage at one size."""
    ks = keras_seq_command()
    split = ["--split-ratio", "100/0/0"]
    prep, prep_lm = work / "prepared", work / "prepared-lm"
    if stage == "prepare":
        return [("prepare", ks + ["data", "prepare", "--data", str(corpus), "--tokenizer",
                                  "word", "--min-count", "1", *split, "--out", str(prep),
                                  "--quiet"])]
    if stage in KN_STAGES:
        source, arpa = ((prep, "keras-seq.arpa") if stage == "ngram"
                        else (corpus, "keras-seq-raw.arpa"))
        return [(stage, ks + ["ngram", "train", "--data", str(source), *split, "--order", "5",
                              "--memory", memory, "--temp-dir", str(work / "tmp"),
                              "--out", str(work / arpa),
                              "--profile", str(work / f"{stage}-profile.json")])]
    if stage == "lmplz":
        return [("lmplz", [lmplz, "-o", "5", "-S", memory, "-T", str(work / "tmp"),
                           "--discount_fallback", "--text", str(corpus),
                           "--arpa", str(work / "lmplz.arpa")])]
    if stage == "prepare-lm":
        return [("prepare-lm", ks + ["data", "prepare", "--data", str(corpus), "--tokenizer",
                                     "word", "--max-vocab", str(max_vocab), *split,
                                     "--out", str(prep_lm), "--quiet"])]
    rows = []
    for steps in (1, 1 + lm_steps):
        rows.append((f"lm-{steps}", ks + [
            "train", "lm", "--data", str(prep_lm), *split, "--tokenizer", "word",
            "--max-vocab", str(max_vocab), "--run-dir", str(work / f"lm-{steps}"),
            "--cell", "lstm", "--units", "64", "--embed-dim", "32",
            "--batch-size", str(LM_BATCH), "--bptt", str(LM_BPTT), "--epochs", "1",
            "--max-steps-per-epoch", str(steps), "--sample-tokens", "0",
            "--histogram-freq", "0", "--quiet"]))
    return rows


def _clear(work: Path, stage: str) -> None:
    """Remove what a stage's earlier run left (each stage starts from nothing)."""
    names = {"prepare": ["prepared"], "ngram": ["keras-seq.arpa", "ngram-profile.json"],
             "ngram-raw": ["keras-seq-raw.arpa", "ngram-raw-profile.json"],
             "lmplz": ["lmplz.arpa"], "prepare-lm": ["prepared-lm"], "lm": ["lm-*"]}[stage]
    for pattern in names:
        for path in work.glob(pattern):
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    (work / "tmp").mkdir(parents=True, exist_ok=True)


def corpora(sizes: list[int], corpus_dir: Path, seed: int, roots=None, progress=print):
    """The corpus file of each size (written once; a manifest records how), and the
    manifest: the sizes' token counts and the 5-gram novelty curve."""
    corpus_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = corpus_dir / f"scaling-seed{seed}.json"
    paths = {n: corpus_dir / f"scaling-{label(n)}-seed{seed}.txt" for n in sizes}
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = None
    roots = [str(r) for r in roots] if roots else None
    made = {s["target"]: s for s in manifest["sizes"]} if manifest else {}
    if (manifest and (roots is None or manifest["roots"] == roots)
            and all(n in made and paths[n].is_file() for n in sizes)):
        return paths, manifest
    targets = sorted(set(sizes) | set(made))
    all_paths = {n: corpus_dir / f"scaling-{label(n)}-seed{seed}.txt" for n in targets}
    if progress is not None:
        progress(f"writing corpora {', '.join(map(label, targets))} under {corpus_dir} "
                 f"(seed {seed})")
    manifest = write_corpora(all_paths, seed=seed, roots=roots, progress=progress)
    write_json_atomic(manifest_path, manifest)
    return paths, manifest


def count_tokens(path) -> int:
    """Tokens of a whitespace-separated text as the stages count them: its words plus one
    ``</s>`` per non-empty line (``text``: e.g. ``keras-seq data tokenize --out``, whose
    tokens the word rule keeps as they are, so lmplz and keras-seq see the same ones).
    """
    if not os.path.isfile(path):
        raise DataError(f"--text {str(path)!r} is not a file; give a text of space-separated "
                        "tokens, e.g. from keras-seq data tokenize --tokenizer word --out FILE")
    n = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            words = len(line.split())
            n += words + (words > 0)
    return n


def _schedule(stages: list[str], rounds: int) -> list[tuple[str, int]]:
    """``(stage, round)`` in the order they run: the compared stages ``rounds`` times,
    alternating, after ``prepare`` and before the LM's stages.

    >>> _schedule(["prepare", "ngram", "lmplz"], 2)
    [('prepare', 0), ('ngram', 0), ('lmplz', 0), ('lmplz', 1), ('ngram', 1)]
    """
    compared = [s for s in stages if s in COMPARED]
    order = [(s, 0) for s in stages if s == "prepare"]
    for r in range(rounds):
        order += [(s, r) for s in (compared if r % 2 == 0 else compared[::-1])]
    return order + [(s, 0) for s in stages if s not in COMPARED and s != "prepare"]


def run_bench(sizes: list[int], *, out, corpus_dir=None, seed: int = 0, stages=STAGES,
              lmplz: str | None = None, memory: str = "1G", max_vocab: int = 50_000,
              lm_steps: int = 20, keep: bool = False, roots=None, rounds: int = 1,
              text=None, progress=print) -> dict:
    """Measure every stage at every size; write ``scaling.json`` (and the PNG plots) in
    ``out``; return the results (see the module docstring)."""
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        raise DataError(f"--stages: unknown stage(s) {unknown}; choose from {', '.join(STAGES)}")
    stages = [s for s in STAGES if s in stages]
    if "lmplz" in stages and lmplz is None:
        stages.remove("lmplz")
    if lmplz is not None and not (os.path.isfile(lmplz) and os.access(lmplz, os.X_OK)):
        found = shutil.which(lmplz)
        if not found:
            raise DataError(f"--lmplz {lmplz!r} is not an executable file; build KenLM's "
                            "lmplz (docs/scaling.md says how) or leave --lmplz out")
        lmplz = found
    needs = {"ngram": "prepare", "lm": "prepare-lm"}
    for stage, before in needs.items():
        if stage in stages and before not in stages:
            raise DataError(f"--stages: {stage} reads what {before} writes; add {before}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    corpus_dir = Path(corpus_dir) if corpus_dir else out / "corpora"
    if text is not None:  # one given text instead of the generated sizes
        n = count_tokens(text)
        sizes, paths, tokens = [n], {n: Path(text)}, {n: n}
        about = {"file": str(text)}
    else:
        paths, manifest = corpora(sizes, corpus_dir, seed, roots, progress)
        tokens = {s["target"]: s["tokens"] for s in manifest["sizes"]}
        about = {k: manifest[k] for k in ("roots", "natural_tokens", "vocabulary", "keep",
                                          "replace_p", "novelty")}
    results = {"sizes": sizes, "seed": seed, "memory": memory, "max_vocab": max_vocab,
               "rounds": rounds, "cpu": cpu_name(),
               "lm": {"steps": lm_steps, "batch": LM_BATCH, "bptt": LM_BPTT},
               "corpus": about,
               "cpu_count": os.cpu_count(), "rows": []}
    for n in sizes:
        work = out / "work" / label(n)
        work.mkdir(parents=True, exist_ok=True)
        for stage, round_ in _schedule(stages, rounds):
            _clear(work, stage)
            for name, cmd in _commands(stage, paths[n], work, memory=memory,
                                       max_vocab=max_vocab, lm_steps=lm_steps, lmplz=lmplz):
                if progress is not None:
                    progress(f"[{label(n)}] {name}: {' '.join(cmd)}")
                load = load_1min()
                log = work / f"{name}.log"
                row = {"size": label(n), "tokens": tokens[n], "stage": name, "round": round_,
                       "load": load, **measure(cmd, log), "command": cmd, "log": str(log)}
                if row["rc"] != 0:
                    row["error"] = _tail(log)
                elif name.startswith("lm-"):
                    row["fit_s"] = _fit_seconds(work / name)
                elif name in KN_STAGES:
                    row["steps_s"] = _steps(work / f"{name}-profile.json")
                results["rows"].append(row)
                write_json_atomic(out / "scaling.json", results)
                if progress is not None:
                    progress(f"[{label(n)}] {name}: {row['wall_s']:.1f}s, peak RSS "
                             f"{row['peak_rss_mb']:,.0f} MB" + (f" — FAILED ({row['rc']}): "
                                                                f"{row['error']}" if row["rc"]
                                                                else ""))
        if not keep:
            for stage in ("prepare", "ngram", "ngram-raw", "lmplz", "prepare-lm"):
                _clear(work, stage)
    results["summary"] = summary(results)
    results["exponents"] = exponents(results["summary"])
    write_json_atomic(out / "scaling.json", results)
    results["plots"] = plot(results, out)
    write_json_atomic(out / "scaling.json", results)
    return results


def _row(results, size, stage):
    """The run of ``stage`` at ``size`` (with several rounds: the one of median wall time),
    with ``spread_s`` (the fastest and slowest run's wall time); None if none succeeded."""
    rows = sorted((r for r in results["rows"] if r["size"] == size and r["stage"] == stage
                   and r["rc"] == 0), key=lambda r: r["wall_s"])
    if not rows:
        return None
    return {**rows[(len(rows) - 1) // 2], "runs": len(rows),
            "spread_s": [rows[0]["wall_s"], rows[-1]["wall_s"]]}


def _steps(path: Path) -> dict | None:
    """The step breakdown ``ngram train --profile`` wrote (None if it wrote none)."""
    try:
        return json.loads(path.read_text())["steps_s"]
    except (OSError, ValueError, KeyError):
        return None


def fit_exponent(tokens: list[float], seconds: list[float]) -> float | None:
    """``k`` of ``seconds ∝ tokens^k``, least squares on the log-log points (None for
    fewer than two sizes).

    >>> round(fit_exponent([1e6, 1e7, 1e8], [1.0, 10.0, 100.0]), 3)
    1.0
    """
    if len(tokens) < 2:
        return None
    x, y = [math.log(t) for t in tokens], [math.log(s) for s in seconds]
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxx = sum((a - mx) ** 2 for a in x)
    return sum((a - mx) * (b - my) for a, b in zip(x, y)) / sxx if sxx else None


def summary(results: dict) -> list[dict]:
    """One line per size: each stage's time and RSS, the lmplz ratios, the LM's start-up
    and tokens/s."""
    lines = []
    for n in results["sizes"]:
        size, line = label(n), {}
        for stage in ("prepare", "ngram", "ngram-raw", "lmplz", "prepare-lm", "lm-1"):
            row = _row(results, size, stage)
            if row:
                line[stage] = {k: row[k] for k in ("wall_s", "peak_rss_mb", "runs",
                                                   "spread_s", "load", "steps_s") if k in row}
        theirs = line.get("lmplz")
        for stage, key in (("ngram", ""), ("ngram-raw", "raw_")):
            ours = line.get(stage)
            if ours and theirs:
                line[f"{key}time_ratio"] = ours["wall_s"] / max(theirs["wall_s"], 1e-9)
                line[f"{key}rss_ratio"] = ours["peak_rss_mb"] / max(theirs["peak_rss_mb"], 1e-9)
        steps = results["lm"]["steps"]
        one, many = _row(results, size, "lm-1"), _row(results, size, f"lm-{1 + steps}")
        if one and many:
            line["lm_startup_s"] = one["wall_s"]
            line["lm_rss_mb"] = many["peak_rss_mb"]
            extra = (many.get("fit_s") or 0) - (one.get("fit_s") or 0)
            tokens = steps * results["lm"]["batch"] * results["lm"]["bptt"]
            line["lm_tokens_per_s"] = tokens / extra if extra > 0 else None
        tokens = next((r["tokens"] for r in results["rows"] if r["size"] == size), n)
        lines.append({"size": size, "tokens": tokens, **line})
    return lines


def exponents(summary_lines: list[dict]) -> dict:
    """``{stage: k}`` of ``time ∝ tokens^k`` over the sizes each stage ran at."""
    out = {}
    for stage in ("prepare", "ngram", "ngram-raw", "lmplz"):
        points = [(line["tokens"], line[stage]["wall_s"]) for line in summary_lines
                  if stage in line]
        k = fit_exponent([t for t, _ in points], [s for _, s in points])
        if k is not None:
            out[stage] = k
    return out


def _cell(line, stage):
    v = line.get(stage)
    if not v:
        return "–"
    spread = (f" ({v['spread_s'][0]:.1f}–{v['spread_s'][1]:.1f})"
              if v.get("runs", 1) > 1 else "")
    return f"{v['wall_s']:.1f} s{spread} / {v['peak_rss_mb']:,.0f} MB"


def _ratio(line, key):
    return f"{line[key]:.2f}×" if key in line else "–"


def format_steps(summary_lines: list[dict]) -> str:
    """The step breakdown of ``ngram`` and ``ngram-raw`` (their median runs), in seconds."""
    from keras_seq.ngram.external import STEPS  # lazy: only this table needs the n-grams

    names = ("read", *STEPS)
    out = [f"| tokens | run | {' | '.join(names)} |", "|---:|---|" + "---:|" * len(names)]
    for line in summary_lines:
        for stage in KN_STAGES:
            steps = (line.get(stage) or {}).get("steps_s")
            if steps:
                cells = " | ".join(f"{steps.get(n, 0):.2f}" for n in names)
                out.append(f"| {line['tokens'] / 1e6:,.2f} M | {stage} | {cells} |")
    return "\n".join(out)


def format_bench(results: dict) -> str:
    """The summary table, then one row per process with the command that reproduces it."""
    lines = results.get("summary") or summary(results)
    cpu = f"{results.get('cpu') or cpu_name()}, {results['cpu_count']} cores"
    out = [f"{cpu}; median of {results.get('rounds', 1)} "
           "alternated run(s) per compared stage (min–max in brackets); load per row below",
           "",
           "| tokens | prepare | ngram train --memory " + results["memory"] + " (prepared) | "
           "ngram train (raw text) | lmplz -S " + results["memory"] + " | time × lmplz | "
           "RSS × lmplz | raw: time × lmplz | raw: RSS × lmplz | prepare (V=50k) | "
           "train lm start-up | train lm tokens/s | train lm RSS |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for line in lines:
        tps = line.get("lm_tokens_per_s")
        out.append(" | ".join([
            f"| {line['tokens'] / 1e6:,.2f} M", _cell(line, "prepare"), _cell(line, "ngram"),
            _cell(line, "ngram-raw"), _cell(line, "lmplz"), _ratio(line, "time_ratio"),
            _ratio(line, "rss_ratio"), _ratio(line, "raw_time_ratio"),
            _ratio(line, "raw_rss_ratio"), _cell(line, "prepare-lm"),
            f"{line['lm_startup_s']:.1f} s" if "lm_startup_s" in line else "–",
            f"{tps:,.0f}" if tps else "–",
            f"{line['lm_rss_mb']:,.0f} MB" if "lm_rss_mb" in line else "–"]) + " |")
    fitted = results.get("exponents") or exponents(lines)
    if fitted:
        out += ["", "time ∝ tokens^k: " + ", ".join(f"{s} k = {k:.2f}"
                                                     for s, k in fitted.items())]
    if any("steps_s" in r for r in results["rows"]):
        out += ["", "ngram train's steps (seconds, median run):", format_steps(lines)]
    out += ["", "| size | stage | wall | peak RSS | load | command |",
            "|---|---|---:|---:|---:|---|"]
    for r in results["rows"]:
        status = "" if r["rc"] == 0 else f" FAILED ({r['rc']})"
        cmd = " ".join(["keras-seq", *r["command"][1:]] if r["command"][0].endswith(
            "keras-seq") else r["command"])
        out.append(f"| {r['size']} | {r['stage']}{status} | {r['wall_s']:.1f} s | "
                   f"{r['peak_rss_mb']:,.0f} MB | {r['load']} | `{cmd}` |")
    return "\n".join(out)


def plot(results: dict, out: Path) -> list[str]:
    """``scaling_time.png`` and ``scaling_rss.png``: each stage against tokens, log-log."""
    plt = pyplot("the corpus-scaling plot")

    stages = sorted({r["stage"] for r in results["rows"]}, key=lambda s: (s[:2], len(s), s))
    written = []
    for key, name, what in (("wall_s", "scaling_time.png", "wall time (s)"),
                            ("peak_rss_mb", "scaling_rss.png", "peak RSS (MB)")):
        fig, ax = plt.subplots(figsize=(6, 4))
        for stage in stages:
            rows = [_row(results, label(n), stage) for n in results["sizes"]]
            rows = [r for r in rows if r]  # each size's median run
            if rows:
                ax.plot([r["tokens"] for r in rows], [r[key] for r in rows], "o-", label=stage)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("corpus tokens")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / name, dpi=80)
        plt.close(fig)
        written.append(str(out / name))
    return written
