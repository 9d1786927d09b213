"""Streaming classification on LiteRT (no TensorFlow): label scores after every token.

The model is the step graph written by ``keras-seq export classifier --tflite``
(:func:`keras_seq.export.classifier_tagger.export_classifier_tflite`): one token and the recurrent
state in, the label scores and the new state out — the keyword-spotting pattern.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from keras_seq.errors import KerasSeqError
from keras_seq.runtime.litert import LiteRTLM


class StreamingClassifier(LiteRTLM):
    """A streaming classifier step model on LiteRT: label scores after every token.

    Loading checks the metadata as :class:`~keras_seq.runtime.litert.LiteRTLM` does (the
    file's hash, the tokenizer fingerprint, the signature's inputs and outputs), and keeps
    its state handling (``reset``, ``states``); its next-token methods (``suggest``,
    ``generate``, ``score_ids``) do not apply to a classifier. Only numpy and
    ``ai_edge_litert`` run here (no TensorFlow), as on a device.

    Example::

        clf = StreamingClassifier("exports/clf/classifier_step_dynamic.tflite")
        clf.stream_text("this was not good")[-1]   # final scores (C,)
        clf.classify("this was not good")          # [("neg", 0.93), ("pos", 0.07)]
    """

    def __init__(self, model_path, tokenizer=None, num_threads: int = 1):
        super().__init__(model_path, tokenizer=tokenizer, num_threads=num_threads)
        if self.meta.get("task") != "classify" or self.graph != "step":
            raise KerasSeqError(f"{self.path.name} is not a streaming classifier step model "
                                f"(task {self.meta.get('task')!r}, graph {self.graph!r}); "
                                "export one with `keras-seq export classifier --tflite`")
        self.labels = list(self.meta["labels"])
        self.max_len = self.meta.get("max_len")

    def reset(self) -> None:
        super().reset()
        self.scores: np.ndarray | None = None

    def step(self, token_id: int) -> np.ndarray:
        """Feed one token id; returns the label scores ``(C,)`` after it."""
        self.scores = self._run_step(token_id, "scores").copy()
        return self.scores

    def encode(self, text: str) -> np.ndarray:
        """Ids as training saw them: words, ``<eos>`` dropped, at most ``max_len``, an
        empty text → ``[<unk>]``."""
        tok = self.tokenizer
        ids = tok.encode(text)
        ids = ids[ids != tok.eos_id][:self.max_len]
        return ids if len(ids) else np.array([tok.unk_id], np.int32)

    def stream_ids(self, ids) -> np.ndarray:
        """A new stream over ``ids``: the scores ``(T, C)`` after each token."""
        self.reset()
        return np.stack([self.step(int(t)) for t in ids])

    def stream_text(self, text: str) -> np.ndarray:
        return self.stream_ids(self.encode(text))

    def classify(self, text: str) -> list[tuple[str, float]]:
        """``(label, score)`` pairs after the whole text, highest first."""
        scores = self.stream_text(text)[-1]
        order = np.argsort(-scores, kind="stable")
        return [(self.labels[i], float(scores[i])) for i in order]


def bench_classifier_step(tflite_path, tokens: int = 200, warmup: int = 20,
                          num_threads: int = 1, seed: int = 0) -> dict:
    """Per-token latency of a streaming classifier step model on LiteRT (one stream, the
    state carried over; random in-vocabulary words). Returns p50/p99 µs and tokens/s."""
    clf = StreamingClassifier(tflite_path, num_threads=num_threads)
    rng = np.random.default_rng(seed)
    low = 3 if clf.vocab_size > 3 else 1  # skip <pad>, <unk>, <eos>
    stream = rng.integers(low, clf.vocab_size, warmup + tokens)
    for token in stream[:warmup]:
        clf.step(int(token))
    micros = np.empty(tokens)
    for i, token in enumerate(stream[warmup:]):
        t0 = time.perf_counter_ns()
        clf.step(int(token))
        micros[i] = (time.perf_counter_ns() - t0) / 1e3
    return {"model": Path(tflite_path).name, "threads": num_threads, "tokens": tokens,
            "p50_us": float(np.percentile(micros, 50)),
            "p99_us": float(np.percentile(micros, 99)),
            "tokens_per_s": float(tokens / (micros.sum() / 1e6))}
