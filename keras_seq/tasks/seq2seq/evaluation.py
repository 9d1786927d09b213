"""Evaluate, load and plot seq2seq runs (no trainer import: the exporter uses this).

:func:`evaluate_pairs` decodes pairs (greedy or beam) and scores them overall and per
source-length bucket; :func:`evaluate_run` does it for a split of a run directory, with
the fingerprints of its tokenizers and data.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from keras_seq import runs
from keras_seq.data.batching import pad_sequences
from keras_seq.data.tokenizers import load_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.models import loading
from keras_seq.tasks.seq2seq import decoding, metrics
from keras_seq.tasks.seq2seq.config import Seq2SeqConfig
from keras_seq.tasks.seq2seq.data import encode_pairs, task_data

# ----------------------------------------------------------------------------------------
# Run directories


def check_run_dir(run_dir) -> Path:
    """The run directory, after checking it holds a `keras-seq train seq2seq` run."""
    return runs.check_run_dir(run_dir, "seq2seq")


def load_run(run_dir, which: str = "best"):
    """``(config, source_tokenizer, target_tokenizer, model)`` of a run."""
    run_dir = check_run_dir(run_dir)
    config = Seq2SeqConfig.load(run_dir / runs.CONFIG)
    src_tok = load_tokenizer(run_dir / "source_tokenizer.json")
    tgt_tok = load_tokenizer(run_dir / "target_tokenizer.json")
    return config, src_tok, tgt_tok, loading.load_model(run_dir, which)


# ----------------------------------------------------------------------------------------
# Evaluation


def tokens_of(tokenizer, ids) -> list[str]:
    vocab = tokenizer.vocab
    return [vocab[i] if i < len(vocab) else "<eos>" for i in ids]


def evaluate_pairs(model, src_tok, tgt_tok, pairs, beam: int = 1, length_penalty: float = 1.0,
                   n_buckets: int = 8, max_bucket_len: int | None = None,
                   return_attention: bool = False, progress: bool = False) -> dict:
    """Decode ``pairs`` and score them (overall and per source-length bucket)."""
    encoded = encode_pairs(pairs, src_tok, tgt_tok, model.max_source_len)
    if not encoded:
        raise KerasSeqError("no evaluation pair fits the model's source length limit "
                            f"({model.max_source_len} tokens)")
    order = np.argsort([len(e[0]) for e in encoded], kind="stable")  # less padding per batch
    encoded = [encoded[i] for i in order]
    src = pad_sequences([e[0] for e in encoded])[0]
    attention = None
    if beam == 1:
        out = decoding.greedy_decode(model, src, return_attention=return_attention,
                                     progress=progress)
        hyps, attention = out if return_attention else (out, None)
    else:
        hyps = decoding.beam_search(model, src, beam=beam, length_penalty=length_penalty,
                                    progress=progress)
    refs = [e[1].tolist() for e in encoded]
    hyp_texts = decoding.decode_targets(tgt_tok, hyps)
    ref_texts = decoding.decode_targets(tgt_tok, refs)
    lengths = [len(e[0]) for e in encoded]
    edges = metrics.bucket_edges(max_bucket_len or max(lengths), n_buckets)
    result = metrics.summarize(hyps, refs, hyp_texts, ref_texts, lengths, edges,
                               char_level=tgt_tok.kind == "char")
    result["skipped"] = len(pairs) - len(encoded)
    result["examples"] = [{"source": e[2], "reference": r, "output": h}
                          for e, r, h in list(zip(encoded, ref_texts, hyp_texts))[:: max(
                              1, len(encoded) // 5)][:5]]
    if return_attention:
        result["_attention"] = (encoded, hyps, attention)
    return result


def heatmap_for(model, src_tok, tgt_tok, source: str, path, title: str | None = None):
    """Greedy-decode ``source`` and write its attention heatmap PNG (title: input → output)."""
    from keras_seq.tasks.seq2seq.plots import attention_heatmap  # lazy: matplotlib to plot

    ids = decoding.encode_sources(src_tok, [source], model.max_source_len)
    (hyp,), (weights,) = decoding.greedy_decode(model, ids, return_attention=True)
    src_tokens = tokens_of(src_tok, ids[0][ids[0] != 0])
    out_tokens = tokens_of(tgt_tok, hyp + [model.eos_id])[: len(weights)]
    if title is None:
        title = f"{source} → {decoding.decode_targets(tgt_tok, [hyp])[0]}"
    return attention_heatmap(weights, src_tokens, out_tokens, path, title=title)


def evaluate_run(run_dir, split: str = "test", beam: int = 1, length_penalty: float = 1.0,
                 plot_dir=None, limit: int | None = None, progress: bool = False) -> dict:
    """Metrics of a run's model on ``split`` (and, with ``plot_dir``, heatmap + curve PNGs)."""
    config, src_tok, tgt_tok, model = load_run(run_dir)
    data = task_data(config)
    pairs = data.splits[split][:limit] if limit else data.splits[split]
    if not pairs:
        raise KerasSeqError(f"split {split!r} of task {config.data} is empty")
    max_bucket = config.max_len if config.data in ("reverse", "copy") else None
    result = evaluate_pairs(model, src_tok, tgt_tok, pairs, beam=beam,
                            length_penalty=length_penalty, max_bucket_len=max_bucket,
                            progress=progress)
    result.update(split=split, beam=beam, run_dir=str(run_dir), attention=config.attention,
                  task=config.data, params=int(model.count_params()),
                  fingerprint={"source_tokenizer": src_tok.fingerprint,
                               "target_tokenizer": tgt_tok.fingerprint,
                               "data_sha256": data.describe()["sha256"]})
    if plot_dir is not None:
        from keras_seq.tasks.seq2seq.plots import length_curve  # lazy: matplotlib to plot

        plot_dir = Path(plot_dir)
        example = max(pairs[:50], key=lambda p: len(p[0]))  # a long, readable example
        plots = {"length_curve": str(length_curve(
            {f"{config.attention} ({Path(run_dir).name})": result["by_length"]},
            plot_dir / "length_curve.png"))}
        if config.attention != "none":
            plots["heatmap"] = str(heatmap_for(model, src_tok, tgt_tok, example[0],
                                               plot_dir / "attention_heatmap.png"))
        result["plots"] = plots
    return result
