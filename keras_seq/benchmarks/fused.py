"""The fused TFLite LSTM (``UNIDIRECTIONAL_SEQUENCE_LSTM``) against the explicit graph.

``keras-seq bench fused --run-dir R`` exports the four float32 graphs of an LSTM run
(``step``, ``step_fused``, ``sequence``, ``sequence_fused``; windows of ``seq_length``
tokens) and scores the same validation tokens with each, with LiteRT's XNNPACK delegate on
and off, alternating the models over ``rounds`` rounds. Reported per model: µs per token
(scoring = every next-token log-probability of the stream; a step model is called once
per token, a sequence model once per window). An op XNNPACK does not accelerate runs as
fast with the delegate off as on: the on/off pair shows where the time goes.

Two questions it answers: why the fused step is slower than the explicit one for streaming
(is the fused op accelerated at all?), and where the fused op wins (whole windows at once).
"""

from __future__ import annotations

import io
import tempfile
import time
from pathlib import Path

import numpy as np

from keras_seq.errors import KerasSeqError
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.tables import print_table

GRAPHS = ("step", "step_fused", "sequence", "sequence_fused")


def run_fused_benchmark(run_dir, out_dir=None, seq_length: int = 32, tokens: int = 2000,
                        rounds: int = 3, printer=print) -> dict:
    """Export the float32 graphs of ``run_dir`` (into ``out_dir`` or a temporary folder)
    and time scoring ``tokens`` validation tokens with each; returns the report."""
    # lazy: loads Keras, TensorFlow only when this runs
    from keras_seq.export.tflite import export_ids, export_tflite
    from keras_seq.tasks.lm.evaluation import load_run

    if rounds < 1 or tokens < seq_length:
        raise KerasSeqError(f"need rounds ≥ 1 and tokens ≥ seq_length ({seq_length}); got "
                            f"rounds={rounds}, tokens={tokens}")
    config, tokenizer, model = load_run(run_dir)
    tmp = tempfile.TemporaryDirectory() if out_dir is None else None
    out = Path(tmp.name if tmp else out_dir)
    try:
        manifest = export_tflite(run_dir, out, variants=("float32",), graphs=GRAPHS,
                                 seq_length=seq_length, check_parity=False, printer=printer,
                                 model=model, tokenizer=tokenizer, config=config)
        names = [m["name"] for m in manifest["models"] if "error" not in m]
        if not any(n.startswith("step_fused") for n in names):
            raise KerasSeqError(f"no fused graph converted for cell {config.cell!r}: the fused "
                                "TFLite LSTM needs a plain LSTM (no CIFG, no projection)")
        _, _, val_ids = export_ids(config, tokenizer, val_tokens=tokens)
        runners = {}
        for name in names:
            for xnn in (True, False):
                lm = LiteRTLM(out / f"{name}.tflite", tokenizer=tokenizer, num_threads=1,
                              xnnpack=xnn)
                runners[(name, xnn)] = lm
        keys = list(runners)
        timed = {k: [] for k in keys}
        logp = {}
        for r in range(rounds):
            shift = r % len(keys)
            for key in keys[shift:] + keys[:shift]:
                t0 = time.perf_counter_ns()
                logp[key] = runners[key].score_ids(val_ids)
                timed[key].append((time.perf_counter_ns() - t0) / 1e3 / (len(val_ids) - 1))
        reference = logp[("step_float32", True)]
        rows = []
        for (name, xnn), micros in timed.items():
            rows.append({"model": name, "xnnpack": "on" if xnn else "off",
                         "us_per_token": float(np.median(micros)),
                         "rounds_us": [float(x) for x in micros],
                         "ops": ", ".join(runners[(name, xnn)].meta.get("ops", [])),
                         "max_abs_logp_diff": float(np.max(np.abs(logp[(name, xnn)] -
                                                                  reference)))})
    finally:
        if tmp is not None:
            tmp.cleanup()
    return {"run_dir": str(run_dir), "seq_length": seq_length, "tokens": len(val_ids) - 1,
            "rounds": rounds, "rows": rows}


def format_report(report: dict) -> str:
    buf = io.StringIO()
    print(f"scoring {report['tokens']:,} validation tokens, 1 thread, {report['rounds']} "
          f"rounds alternated; sequence models read windows of {report['seq_length']}",
          file=buf)
    rows = [{**r, "rounds": "–".join(f"{x:.1f}" for x in (min(r["rounds_us"]),
                                                          max(r["rounds_us"])))}
            for r in report["rows"]]
    print_table(rows, ["model", "xnnpack", "us_per_token", "rounds", "max_abs_logp_diff", "ops"],
                file=buf)
    return buf.getvalue().rstrip("\n")
