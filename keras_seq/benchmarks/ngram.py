"""``keras-seq bench ngram``: Kneser-Ney estimation speed and memory, and PPL by order.

What it measures:

* KN estimation (count + discounts + interpolation + backoffs) and ARPA write time for
  an order-5 model on a bigger training text made of ``repeat`` variants of the training
  split: the lines as they are, each line reversed, each line rotated left by one word,
  and so on (tinyshakespeare's word-level train split is ~256k tokens, 3 variants ≈ 770k).
  Plain copies would make every count a multiple of the copy count, which breaks the
  Kneser-Ney discounts; the variants give new n-grams with natural counts-of-counts.
  Reported: wall time and tokens/s (untraced run), then peak memory from a second,
  traced run (``tracemalloc`` peak, which numpy reports into; and the process max RSS);
* perplexity of MLE / add-1 / KN for orders 1..5 on the validation split (models trained
  on one copy of train);
* with ``lmplz``: the same token stream (one training line per line) through KenLM's
  ``lmplz -o 5``, its ARPA scored by keras-seq's scorer, PPL and wall time compared.

Example (tiny, no lmplz):

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "t.txt")
>>> _ = open(path, "w").write("the cat sat on the mat\\nthe dog sat\\n" * 50)
>>> out = run_bench(path, repeat=1, split="90/10/0", max_order=2)
>>> sorted(out["estimation"])[:3]
['arpa_bytes', 'arpa_write_s', 'estimate_s']
"""

from __future__ import annotations

import math
import os
import resource
import shutil
import subprocess
import tempfile
import time
import tracemalloc
import warnings

from keras_seq.errors import DataError
from keras_seq.ngram.arpa import read_arpa, write_arpa
from keras_seq.ngram.counts import NgramCounts, Vocabulary
from keras_seq.ngram.data import load_tokenized
from keras_seq.ngram.kneser_ney import DiscountWarning, kneser_ney
from keras_seq.ngram.scorer import evaluate
from keras_seq.ngram.sparsity import sparsity_report


def variants(lines, repeat: int) -> list[list[str]]:
    """``repeat`` variants of ``lines``: as is, reversed, rotated left by 1, 2, … words."""
    out = list(lines)
    for r in range(1, repeat):
        if r == 1:
            out += [line[::-1] for line in lines]
        else:
            out += [line[(r - 1) % len(line):] + line[:(r - 1) % len(line)] for line in lines]
    return out


def _estimate(lines, order, workdir, trace=False):
    if trace:
        tracemalloc.start()
    t0 = time.perf_counter()
    vocab = Vocabulary.from_lines(lines)
    stream = vocab.encode(lines)
    counts = NgramCounts.from_stream(stream, order, len(vocab))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DiscountWarning)
        model = kneser_ney(counts, vocab)
    t1 = time.perf_counter()
    path = os.path.join(workdir, "keras_seq.arpa")
    write_arpa(model, path)
    t2 = time.perf_counter()
    peak = 0
    if trace:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return model, path, {
        "tokens": stream.n_predicted,
        "estimate_s": t1 - t0,
        "arpa_write_s": t2 - t1,
        "total_s": t2 - t0,
        "tokens_per_s": stream.n_predicted / (t2 - t0),
        "tracemalloc_peak_mb": peak / 2**20,
        "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "ngrams": model.counts,
        "arpa_bytes": os.path.getsize(path),
    }


def run_lmplz(lmplz: str, lines, order: int, workdir: str) -> tuple[str, float]:
    """Run ``lmplz -o order`` on ``lines`` (one per line); returns (ARPA path, wall s)."""
    if not (os.path.isfile(lmplz) and os.access(lmplz, os.X_OK)) and not shutil.which(lmplz):
        raise DataError(f"--lmplz {lmplz!r} is not an executable file")
    text = os.path.join(workdir, "train.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.writelines(" ".join(line) + "\n" for line in lines)
    arpa = os.path.join(workdir, "lmplz.arpa")
    cmd = [lmplz, "-o", str(order), "-S", "1G", "-T", workdir, "--text", text, "--arpa", arpa,
           "--discount_fallback"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise DataError(f"lmplz failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return arpa, wall


def run_bench(data: str = "tinyshakespeare", *, repeat: int = 3, split: str = "90/10/0",
              max_order: int = 5, lmplz: str | None = None, data_dir=None) -> dict:
    """Run the benchmark and return a JSON-able dict (see the module docstring)."""
    if repeat < 1:
        raise DataError(f"--repeat must be at least 1, got {repeat}")
    corpus = load_tokenized(data, split=split, data_dir=data_dir)
    val = corpus.lines("val")
    if not val:
        raise DataError(f"the val split of {corpus.corpus.name!r} is empty; use another split")
    out = {"data": corpus.corpus.name, "repeat": repeat, "order": max_order,
           "fingerprint": corpus.fingerprint("val")}
    with tempfile.TemporaryDirectory() as workdir:
        big = variants(corpus.train, repeat)
        _, _, est = _estimate(big, max_order, workdir)
        _, _, traced = _estimate(big, max_order, workdir, trace=True)
        est["tracemalloc_peak_mb"] = traced["tracemalloc_peak_mb"]
        est["max_rss_mb"] = traced["max_rss_mb"]
        out["estimation"] = est
        rows = sparsity_report(corpus.train, val, max_order, 1.0, corpus.raw_lines("val"))
        out["ppl"] = [{k: r[k] for k in ("order", "ppl_mle", "ppl_addk", "ppl_kn")}
                      for r in rows]
        if lmplz:
            _, _, ours = _estimate(corpus.train, max_order, workdir)
            ours_model = read_arpa(os.path.join(workdir, "keras_seq.arpa"))
            ours_ppl = evaluate(ours_model, val).ppl
            ours_big = est
            arpa, _ = run_lmplz(lmplz, corpus.train, max_order, workdir)
            lm_ppl = evaluate(read_arpa(arpa), val).ppl
            _, lm_wall_big = run_lmplz(lmplz, big, max_order, workdir)
            out["lmplz"] = {
                "ppl_keras_seq": ours_ppl,
                "ppl_lmplz": lm_ppl,
                "ppl_rel_diff": abs(ours_ppl - lm_ppl) / lm_ppl,
                "wall_s_keras_seq": ours_big["total_s"],
                "wall_s_lmplz": lm_wall_big,
                "time_ratio": ours_big["total_s"] / lm_wall_big,
            }
    return out


def format_bench(out: dict) -> str:
    """Human-readable summary of :func:`run_bench`'s result."""
    e = out["estimation"]
    lines = [
        f"KN{out['order']} on {out['data']} train, {out['repeat']} variants: "
        f"{e['tokens']:,} tokens, "
        f"n-grams {', '.join(f'{c:,}' for c in e['ngrams'])}",
        f"  estimate {e['estimate_s']:.2f}s + ARPA write {e['arpa_write_s']:.2f}s "
        f"= {e['total_s']:.2f}s ({e['tokens_per_s']:,.0f} tokens/s); "
        f"peak tracemalloc {e['tracemalloc_peak_mb']:.0f} MB, max RSS {e['max_rss_mb']:.0f} MB",
        "",
        "order   PPL MLE   PPL add-1    PPL KN   (val)",
    ]
    for r in out["ppl"]:
        mle = "inf" if math.isinf(r["ppl_mle"]) else f"{r['ppl_mle']:.1f}"
        lines.append(f"{r['order']:5d} {mle:>9} {r['ppl_addk']:11.1f} {r['ppl_kn']:9.2f}")
    if "lmplz" in out:
        c = out["lmplz"]
        lines += ["", f"lmplz: PPL {c['ppl_lmplz']:.3f} vs keras-seq {c['ppl_keras_seq']:.3f} "
                  f"(rel. diff {c['ppl_rel_diff']:.2e}); wall {c['wall_s_lmplz']:.2f}s vs "
                  f"{c['wall_s_keras_seq']:.2f}s (ratio {c['time_ratio']:.2f}x)"]
    return "\n".join(lines)
