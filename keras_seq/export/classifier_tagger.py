"""Export classifiers and taggers: raw-text SavedModels and a streaming TFLite classifier.

SavedModels (weights are plain ``tf.Variable`` copies, as in
:mod:`keras_seq.export.saved_model`, so they load with TensorFlow alone; text goes through
the tokenizer's in-graph path, :meth:`Tokenizer.tf_encode`, which gives the same ids as
the Python path):

* :func:`export_classifier` → ``classify`` and ``serving_default`` (the same function):
  ``inputs: string [N]`` → ``labels: string [N, C]`` and ``scores: float32 [N, C]``, each
  row sorted by score, highest first (ties keep the label order) — the shape of TF
  Serving's Classify result. Tokenization is that of ``keras-seq train classify``: words,
  ``<eos>`` dropped, at most the run's ``max_len``, an empty text reads as one ``<unk>``.
* :func:`export_tagger` → ``tag`` and ``serving_default``: ``inputs: string [N]`` of words
  separated by ASCII whitespace → ``tags: string [N, T]`` (``T`` = most words in the batch,
  padded with ``""``) and ``lengths: int32 [N]``. Words are looked up as they are
  (lower-cased if the tokenizer lower-cases), as :func:`predict_tags` does.

Both write ``assets/tokenizer.json`` and ``assets/keras_seq.json`` (the LM export's
convention) with ``kind``, the labels or tags and the tokenizer fingerprint.

The streaming classifier (:func:`export_classifier_tflite`, the keyword-spotting pattern):
a unidirectional ``pooling="last"`` classifier is a recurrent state machine whose label
scores can be read after every token. Its step model is ``token [1]`` + each layer's state
(``h0``, ``c0`` for LSTMs, …, ``[1, U]``) → ``scores [1, C]`` (softmax) + the new states,
built by :class:`~keras_seq.export.graphs.LMGraphs` with ``output="scores"`` on frozen
weights and converted by :mod:`keras_seq.export.tflite` (float32 / float16 / dynamic).
:class:`StreamingClassifier` runs it on LiteRT. Bidirectional and mean/attention-pooled
classifiers are refused: their score needs the whole sequence.

Example::

    export_classifier("runs/sentiment", "exports/sentiment")
    m = tf.saved_model.load("exports/sentiment")
    m.signatures["classify"](inputs=tf.constant(["not bad at all"]))  # labels, scores
    export_classifier_tflite("runs/sentiment", "exports/sentiment_tflite")
    clf = StreamingClassifier("exports/sentiment_tflite/classifier_step_float32.tflite")
    clf.stream_text("not bad at all")  # (4, C): the scores after each word
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from keras_seq.errors import KerasSeqError
from keras_seq.export.graphs import FrozenWeights, LMGraphs
from keras_seq.export.lm_stack import keras_probs, read_lm
from keras_seq.export.saved_model import prepare_saved_model_dir
from keras_seq.export.tflite import convert, op_list
from keras_seq.models import SequenceClassifier
from keras_seq.runtime.classifier import StreamingClassifier
from keras_seq.runtime.metadata import write_metadata
from keras_seq.tables import print_json
from keras_seq.tasks import Labels
from keras_seq.tasks.classify.data import task_data
from keras_seq.tasks.classify.shape import STEP_VARIANTS
from keras_seq.tasks.classify.task import encode_texts

FORMAT = "keras-seq-saved-model"
STEP_PREFIX = "classifier_step"
_TEXT = [tf.TensorSpec([None], tf.string, name="inputs")]


class _Untracked:
    """Holds the Keras model out of the SavedModel's object graph (its weights are saved
    once, as the :class:`FrozenWeights` copies)."""

    def __init__(self, model):
        self.model = model


def _write_assets(out_dir: Path, tokenizer, meta: dict) -> None:
    assets = out_dir / "assets"
    assets.mkdir(exist_ok=True)
    tokenizer.save(assets / "tokenizer.json")
    (assets / "keras_seq.json").write_text(json.dumps(
        {"format": FORMAT, "tokenizer_fingerprint": tokenizer.fingerprint, **meta}, indent=2,
        default=str))


def _check_tokenizer(tokenizer, model) -> None:
    if tokenizer.kind != "word":
        raise KerasSeqError(f"classifiers and taggers read words; this run has a "
                            f"{tokenizer.kind} tokenizer")
    if tokenizer.vocab_size != model.vocab_size:
        raise KerasSeqError(
            f"tokenizer has {tokenizer.vocab_size} tokens but the model expects "
            f"{model.vocab_size}; export with the run's own tokenizer.json")


# ----------------------------------------------------------------------------------------
# Classifier SavedModel


class ClassifierModule(FrozenWeights):
    """The classifier SavedModel root: frozen weights, the word lookup table, the labels."""

    def __init__(self, model, tokenizer, labels, max_len: int | None = None):
        super().__init__(model, name="keras_seq_classifier")
        _check_tokenizer(tokenizer, model)
        if len(labels) != model.num_classes:
            raise KerasSeqError(f"{len(labels)} labels but the model has {model.num_classes} "
                                "outputs; export with the run's own labels.json")
        self._keras = _Untracked(model)
        self._tokenizer = tokenizer
        self.table = tokenizer._lookup_table()  # tracked, so it is saved with the model
        self.labels = tf.constant(list(labels.list))
        self.max_len = max_len
        self.eos_id = tokenizer.eos_id
        self.unk_id = tokenizer.unk_id

    def ids(self, texts):
        """``(N,)`` strings → ``(N, L + 1)`` padded ids, as :func:`encode_texts` gives them
        (``<eos>`` dropped, at most ``max_len``, an empty text → ``[<unk>]``)."""
        ragged = tf.cast(self._tokenizer.tf_encode(texts), tf.int32)  # (N, None)
        if self.eos_id is not None:
            ragged = tf.ragged.boolean_mask(ragged, tf.not_equal(ragged, self.eos_id))
        if self.max_len:
            ragged = ragged[:, :self.max_len]
        lengths = ragged.row_lengths()  # (N,)
        dense = tf.pad(ragged.to_tensor(default_value=0), [[0, 0], [0, 1]])  # ≥ 1 column
        first = tf.equal(tf.range(tf.shape(dense)[1]), 0)  # (L + 1,)
        empty = tf.logical_and(tf.equal(lengths, 0)[:, None], first[None, :])
        return tf.where(empty, tf.constant(self.unk_id, tf.int32), dense)

    def classify(self, inputs):
        probs = tf.nn.softmax(self._keras.model(self.ids(inputs), training=False), axis=-1)
        order = tf.argsort(probs, axis=-1, direction="DESCENDING", stable=True)  # (N, C)
        return {"labels": tf.gather(self.labels, order),
                "scores": tf.gather(probs, order, batch_dims=1)}


def export_classifier(run_dir, out_dir, printer=print, model=None, tokenizer=None,
                      labels=None, max_len=None) -> Path:
    """Write the classifier of the run in ``run_dir`` as a SavedModel to ``out_dir``
    (replaced if it is a SavedModel). Returns ``out_dir``."""
    if model is None:
        # lazy: the classify and tag tasks' load_run share a name
        from keras_seq.tasks.classify.task import load_run

        config, tokenizer, labels, model = load_run(run_dir)
        max_len = config.max_len
    out_dir = prepare_saved_model_dir(out_dir)
    module = ClassifierModule(model, tokenizer, labels, max_len)
    fn = tf.function(module.wrap(module.classify), input_signature=_TEXT)
    concrete = fn.get_concrete_function()
    tf.saved_model.save(module, str(out_dir),
                        signatures={"classify": concrete, "serving_default": concrete})
    _write_assets(out_dir, tokenizer, {
        "kind": "classifier", "signatures": ["classify", "serving_default"],
        "labels": list(labels.list), "max_len": max_len, "run_dir": str(run_dir),
        "cell": model.cell, "units": int(model.units), "num_layers": int(model.num_layers),
        "bidirectional": bool(model.bidirectional), "pooling": model.pooling,
        "vocab_size": int(model.vocab_size)})
    printer(f"wrote SavedModel {out_dir} (signatures classify, serving_default; "
            f"{len(labels)} labels; tokenizer {tokenizer.fingerprint})")
    return out_dir


# ----------------------------------------------------------------------------------------
# Tagger SavedModel


class TaggerModule(FrozenWeights):
    """The tagger SavedModel root: frozen weights, the word lookup table, the tags."""

    def __init__(self, model, tokenizer, tags):
        super().__init__(model, name="keras_seq_tagger")
        _check_tokenizer(tokenizer, model)
        if len(tags) != model.num_tags:
            raise KerasSeqError(f"{len(tags)} tags but the model has {model.num_tags} "
                                "outputs; export with the run's own labels.json")
        self._keras = _Untracked(model)
        self.table = tokenizer._lookup_table()
        self.tags = tf.constant(list(tags.list))
        self.lower = bool(tokenizer.options.get("lower", True))

    def ids(self, texts):
        """``(N,)`` strings → ``(N, T)`` ids of their whitespace-separated words and the
        word counts ``(N,)`` (as ``tokenizer.encode_tokens(text.split())``)."""
        words = tf.strings.split(texts)  # (N, None)
        if self.lower:
            words = tf.strings.lower(words, encoding="utf-8")
        ragged = tf.cast(self.table.lookup(words), tf.int32)
        return ragged.to_tensor(default_value=0), tf.cast(ragged.row_lengths(), tf.int32)

    def tag(self, inputs):
        ids, lengths = self.ids(inputs)  # (N, T), (N,)
        width = tf.shape(ids)[1]
        padded = tf.pad(ids, [[0, 0], [0, 1]])  # ≥ 1 column even when every text is empty
        logits = self._keras.model(padded, training=False)[:, :width]  # (N, T, K)
        best = tf.argmax(logits, axis=-1, output_type=tf.int32)  # (N, T)
        real = tf.sequence_mask(lengths, width)
        return {"tags": tf.where(real, tf.gather(self.tags, best), ""), "lengths": lengths}


def export_tagger(run_dir, out_dir, printer=print, model=None, tokenizer=None,
                  tags=None) -> Path:
    """Write the tagger of the run in ``run_dir`` as a SavedModel to ``out_dir``."""
    if model is None:
        # lazy: the classify and tag tasks' load_run share a name
        from keras_seq.tasks.tag.task import load_run

        _, tokenizer, tags, model = load_run(run_dir)
    out_dir = prepare_saved_model_dir(out_dir)
    module = TaggerModule(model, tokenizer, tags)
    fn = tf.function(module.wrap(module.tag), input_signature=_TEXT)
    concrete = fn.get_concrete_function()
    tf.saved_model.save(module, str(out_dir),
                        signatures={"tag": concrete, "serving_default": concrete})
    _write_assets(out_dir, tokenizer, {
        "kind": "tagger", "signatures": ["tag", "serving_default"], "tags": list(tags.list),
        "run_dir": str(run_dir), "cell": model.cell, "units": int(model.units),
        "num_layers": int(model.num_layers), "bidirectional": bool(model.bidirectional),
        "vocab_size": int(model.vocab_size)})
    printer(f"wrote SavedModel {out_dir} (signatures tag, serving_default; {len(tags)} tags; "
            f"tokenizer {tokenizer.fingerprint})")
    return out_dir


# ----------------------------------------------------------------------------------------
# Streaming classifier: TFLite step model


def check_streamable(model) -> None:
    """Raise unless ``model`` is a classifier whose score can be updated token by token:
    a unidirectional ``pooling="last"`` :class:`~keras_seq.models.SequenceClassifier`, or
    your own Keras model that :func:`~keras_seq.export.lm_stack.read_lm` reads with
    ``task="classify"`` (embedding → forward recurrent layers, the last one may return
    its last step only → an output layer over the labels)."""
    if not isinstance(model, SequenceClassifier):
        read_lm(model, task="classify")  # refuses what does not stream, naming the layer
        return
    if getattr(model, "bidirectional", False):
        raise KerasSeqError(
            "cannot export a streaming step model of a bidirectional classifier: its backward "
            "layer reads the text from the end, so no score exists until the whole sequence "
            "has arrived. Train a unidirectional classifier (bidirectional false, pooling "
            "last) to stream, or serve this one as a SavedModel (keras-seq export classifier)")
    pooling = getattr(model, "pooling", None)
    if pooling != "last":
        why = {"attention": "attention pooling weighs the states of every step of the whole "
                            "sequence",
               "mean": "mean pooling averages the states of the whole sequence"}.get(
            pooling, f"pooling {pooling!r} is not the last state")
        raise KerasSeqError(
            f"cannot export a streaming step model of a pooling={pooling!r} classifier: {why}, "
            "so its score needs the whole sequence. Only pooling='last' (the recurrent state "
            "after the latest token) streams; serve this one as a SavedModel instead")


def _prefix_probs(model, ids: np.ndarray) -> np.ndarray:
    """Keras probabilities ``(T, C)`` of every prefix ``ids[:t + 1]``: one padded batch for
    a ``SequenceClassifier`` (it masks the padding), else the model called on each prefix
    (your own model may not mask)."""
    steps = len(ids)
    if isinstance(model, SequenceClassifier):
        batch = np.zeros((steps, steps), np.int32)
        for t in range(steps):
            batch[t, :t + 1] = ids[:t + 1]
        return np.asarray(tf.nn.softmax(model(batch, training=False), axis=-1))
    stack = read_lm(model, task="classify")
    rows = [keras_probs(stack, ids[:t + 1]) for t in range(steps)]  # (C,) or (t + 1, C)
    return np.stack([row if row.ndim == 1 else row[-1] for row in rows])


def step_parity(model_path, model, tokenizer, texts, max_len=None) -> dict:
    """The TFLite step model streamed over each text vs Keras.

    ``max_abs_final``: max |Δscores| after the last token vs the Keras model on the whole
    text; ``max_abs_streaming``: the same over the scores after every token (vs Keras on
    each prefix); ``argmax_agreement``: share of texts whose final top label agrees.
    """
    clf = StreamingClassifier(model_path, tokenizer=tokenizer)
    finals, streams, agree, tokens = [], [], 0, 0
    for ids in encode_texts(tokenizer, texts, max_len):
        got = clf.stream_ids(ids)  # (T, C)
        want = _prefix_probs(model, ids)  # (T, C)
        finals.append(float(np.abs(got[-1] - want[-1]).max()))
        streams.append(float(np.abs(got - want).max()))
        agree += int(got[-1].argmax() == want[-1].argmax())
        tokens += len(ids)
    return {"texts": len(finals), "tokens": tokens, "max_abs_final": max(finals),
            "max_abs_streaming": max(streams), "argmax_agreement": agree / len(finals)}


def _parity_texts(config, n: int) -> list[str]:
    splits = task_data(config).splits
    for split in ("test", "val", "train"):
        if splits.get(split):
            return [text for text, _ in splits[split][:n]]
    return []


def _classifier_source(run_dir, model, tokenizer, labels, config) -> tuple:
    """``(origin, config, tokenizer, labels, model)`` of a classifier export: the run in
    ``run_dir``, or the model given (``run_dir`` a Keras model, or ``model=``), checked to
    stream."""
    if model is None and isinstance(run_dir, keras.Model):
        model, run_dir = run_dir, f"{type(run_dir).__name__} {run_dir.name}"
    elif model is None:
        # lazy: the classify and tag tasks' load_run share a name
        from keras_seq.tasks.classify.task import load_run

        config, tokenizer, labels, model = load_run(run_dir)
    check_streamable(model)
    if labels is None or tokenizer is None:
        raise KerasSeqError("a classifier export needs tokenizer= (its keras-seq word "
                            "tokenizer) and labels= (the label names, in output order)")
    labels = labels if isinstance(labels, Labels) else Labels(list(labels))
    return run_dir, config, tokenizer, labels, model


def export_classifier_tflite(run_dir, out_dir, variants=("float32", "dynamic"),
                             parity_texts: int = 16, texts=None, check_parity: bool = True,
                             printer=print, model=None, tokenizer=None, labels=None,
                             config=None) -> dict:
    """Export the streaming step model of a unidirectional ``pooling="last"`` classifier.

    Args:
        run_dir: a ``keras-seq train classify`` run, or a built Keras classifier (yours:
            :func:`check_streamable`) with ``tokenizer`` (keras-seq, word), ``labels`` (the
            names, in output order) and parity ``texts``; or pass ``model``,
            ``tokenizer``, ``labels`` and optionally ``config``.
        variants: a subset of :data:`STEP_VARIANTS`.
        parity_texts: how many texts of the run's test split to compare with Keras.
        texts: compare on these texts instead.

    Writes ``classifier_step_<variant>.tflite`` with its metadata ``.json`` (task
    ``classify``, the labels, the state layout, parity), ``tokenizer.json`` and
    ``manifest.json``; returns the manifest.
    """
    started = time.perf_counter()
    run_dir, config, tokenizer, labels, model = _classifier_source(run_dir, model, tokenizer,
                                                                   labels, config)
    bad = set(variants) - set(STEP_VARIANTS)
    if bad or not variants:
        raise KerasSeqError(f"unknown variant(s) {', '.join(sorted(bad)) or '(none given)'}; "
                            f"the streaming classifier exports {', '.join(STEP_VARIANTS)}")
    graphs = LMGraphs(model, output="scores")
    _check_tokenizer(tokenizer, graphs)
    if len(labels.list) != graphs.stack.num_outputs:
        raise KerasSeqError(f"{len(labels.list)} labels but the model scores "
                            f"{graphs.stack.num_outputs}; pass one label name per output")
    max_len = getattr(config, "max_len", None)
    if check_parity and texts is None:
        texts = _parity_texts(config, parity_texts) if config is not None else []
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(out_dir)
    described = {**graphs.describe(), "num_classes": int(graphs.stack.num_outputs),
                 "pooling": getattr(model, "pooling", "last"), "residual": graphs.residual}
    base_meta = {"task": "classify", "labels": list(labels.list),
                 "tokenizer_fingerprint": tokenizer.fingerprint,
                 "tokenizer_file": "tokenizer.json", "run_dir": str(run_dir),
                 "max_len": max_len, **described}
    manifest = {"run_dir": str(run_dir), "task": "classify",
                "tokenizer_fingerprint": tokenizer.fingerprint, "labels": list(labels.list),
                "model": described, "models": []}
    states = list(graphs.state_names)
    with tempfile.TemporaryDirectory() as tmp:
        saved = Path(tmp) / "saved_model"
        frozen = FrozenWeights(model)
        tf.saved_model.save(frozen, str(saved),
                            signatures={"step": graphs.concrete("step", frozen=frozen)})
        for variant in variants:
            t0 = time.perf_counter()
            flat, note = convert(saved, "step", variant)
            name = f"{STEP_PREFIX}_{variant}"
            path = out_dir / f"{name}.tflite"
            path.write_bytes(flat)
            ops = op_list(flat)
            meta = {**base_meta, "graph": "step", "variant": variant, "signature": "step",
                    "batch": 1, "length": 1, "state_names": states,
                    "state_shapes": graphs.state_shapes(1), "inputs": ["token"] + states,
                    "outputs": ["scores"] + states, "ops": ops, "note": note,
                    "size_bytes": len(flat)}
            write_metadata(path, meta)
            entry = {"name": name, "graph": "step", "variant": variant, "file": path.name,
                     "size_bytes": len(flat), "ops": ops, "note": note,
                     "convert_seconds": time.perf_counter() - t0}
            if check_parity and texts:
                entry["parity"] = meta["parity"] = step_parity(path, model, tokenizer, texts,
                                                               max_len)
                write_metadata(path, meta)
            manifest["models"].append(entry)
            p = entry.get("parity")
            extra = (f"  max|Δscores| final {p['max_abs_final']:.2e}, streaming "
                     f"{p['max_abs_streaming']:.2e} over {p['texts']} texts") if p else ""
            printer(f"  {name:<28} {len(flat) / 1024:8.1f} KiB{extra}")
    manifest["export_seconds"] = time.perf_counter() - started
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, default=str))
    return manifest


def run_classifier(args) -> int:
    """``keras-seq export classifier``: the SavedModel and, with ``--tflite``, the
    streaming step model(s)."""
    # lazy: the classify and tag tasks' load_run share a name
    from keras_seq.tasks.classify.task import load_run

    printer = (lambda msg: print(msg, file=sys.stderr)) if args.json else print
    config, tokenizer, labels, model = load_run(args.run_dir)
    if args.tflite is not None:
        check_streamable(model)  # refuse before writing anything
    out = export_classifier(args.run_dir, args.out, printer=printer, model=model,
                            tokenizer=tokenizer, labels=labels, max_len=config.max_len)
    result = {"saved_model": str(out)}
    if args.tflite is not None:
        tflite_dir = Path(args.tflite) if args.tflite else Path(out) / "tflite"
        result["tflite"] = export_classifier_tflite(
            args.run_dir, tflite_dir, variants=args.variants, check_parity=args.parity,
            printer=printer, model=model, tokenizer=tokenizer, labels=labels, config=config)
        result["tflite_dir"] = str(tflite_dir)
        printer(f"wrote the streaming step model(s) to {tflite_dir} (manifest.json lists "
                "sizes, ops and parity)")
    if args.json:
        print_json(result)
    return 0


def run_tagger(args) -> int:
    """``keras-seq export tagger``."""
    export_tagger(args.run_dir, args.out)
    return 0
