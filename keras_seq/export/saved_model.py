"""Export a trained language model as a SavedModel with serving signatures.

Signatures (all serving-compatible: tensors in, a dict of tensors out; raw text goes
through the tokenizer's in-graph path, :meth:`Tokenizer.tf_encode`):

* ``score(text: string (B,))`` → ``log_probs (B, L)`` (0 past each row's end),
  ``tokens (B, L)`` strings, ``lengths (B,)``, ``cross_entropy (B,)`` nats/token,
  ``perplexity (B,)``. Every token is scored; the first one given a line start
  (``<eos>``, or ``"\\n"`` for char models), as in training.
* ``next_tokens(text (B,), k: int32 scalar)`` → ``tokens (B, k)``, ``ids (B, k)``,
  ``probs (B, k)``: the most likely next tokens after each text.
* ``generate(prompt (B,), max_tokens, temperature: float32, top_k: int32, seed: int32)``
  → ``text (B,)``, ``ids (B, max_tokens)``: sampled continuations (``top_k`` ≤ 0 means
  the whole vocabulary).
* ``step(token (1,), h0, [c0, h1, …] (1, U))`` → ``logits (1, V)`` and the next states:
  the streaming step at batch 1, state in and out explicitly (an ``lstmp`` layer's ``h``
  is ``(1, proj_units)``).

Weights are plain ``tf.Variable`` copies, so the SavedModel loads with only TensorFlow
(no keras-seq classes). The tokenizer (``tokenizer.json``) and a ``keras_seq.json`` with
its fingerprint are written to ``assets/``.

Example::

    export_saved_model("runs/lstm", "exports/lstm_saved_model")
    m = tf.saved_model.load("exports/lstm_saved_model")
    m.signatures["next_tokens"](text=tf.constant(["the module"]), k=tf.constant(3))
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import keras
import tensorflow as tf

from keras_seq.errors import KerasSeqError
from keras_seq.export.graphs import FrozenWeights, LMGraphs
from keras_seq.export.lm_stack import state_sizes
from keras_seq.export.sources import model_from_args
from keras_seq.tasks.lm.evaluation import load_run

SIGNATURES = ("score", "next_tokens", "generate", "step")
_INPUTS = {
    "score": [tf.TensorSpec([None], tf.string, name="text")],
    "next_tokens": [tf.TensorSpec([None], tf.string, name="text"),
                    tf.TensorSpec([], tf.int32, name="k")],
    "generate": [tf.TensorSpec([None], tf.string, name="prompt"),
                 tf.TensorSpec([], tf.int32, name="max_tokens"),
                 tf.TensorSpec([], tf.float32, name="temperature"),
                 tf.TensorSpec([], tf.int32, name="top_k"),
                 tf.TensorSpec([], tf.int32, name="seed")],
}


class LMServingModule(FrozenWeights):
    """The SavedModel root: frozen weights, the tokenizer's lookup table and vocabulary."""

    def __init__(self, model, tokenizer):
        graphs = LMGraphs(model)  # refuses a model that does not stream, naming the layer
        super().__init__(graphs.model, name="keras_seq_lm")
        if tokenizer is None:
            raise KerasSeqError(
                "the SavedModel's signatures take and return text, so they need the model's "
                "tokenizer: pass tokenizer= (a keras-seq tokenizer, e.g. make_tokenizer('word')"
                ".fit(text) before training, or load_tokenizer('tokenizer.json'))")
        if tokenizer.vocab_size != graphs.vocab_size:
            raise KerasSeqError(
                f"tokenizer has {tokenizer.vocab_size} tokens but the model expects "
                f"{graphs.vocab_size}; export with the run's own tokenizer.json")
        self._graphs = graphs
        self._tokenizer = tokenizer
        self.vocab = tf.constant(tokenizer.vocab)
        self.table = tokenizer._lookup_table()  # tracked, so it is saved with the model
        if tokenizer.kind == "subword":
            self.wordpiece = tokenizer._tokenizer()
        start = tokenizer.eos_id if tokenizer.eos_id is not None else \
            int(tokenizer.encode("\n")[0])
        self.start_id = tf.constant(start, tf.int32)
        self.units = self._graphs.units

    # -- helpers (traced inside the signatures) -------------------------------------------
    def _ids(self, texts):
        """``(B,)`` strings → dense ``(B, 1 + L)`` ids with the start token, and lengths L."""
        ragged = tf.cast(self._tokenizer.tf_encode(texts), tf.int32)  # (B, None)
        batch = tf.shape(texts)[0]
        start = tf.fill([batch, 1], self.start_id)
        ids = tf.concat([start, ragged.to_tensor(default_value=0)], axis=1)  # (B, 1 + L)
        return ids, tf.cast(ragged.row_lengths(), tf.int32)

    def _zero_states(self, batch):
        sizes = {n: shape[1] for n, shape in self._graphs.state_shapes(1).items()}
        return {n: tf.zeros([batch, sizes[n]]) for n in self._graphs.state_names}

    def _run_prefix(self, ids, lengths):
        """Stream ``ids (B, 1+L)`` row by row up to each length: logits after the last real
        token of each row and the states there (rows shorter than the batch hold still)."""
        graphs = self._graphs
        batch, steps = tf.shape(ids)[0], tf.shape(ids)[1]
        states = self._zero_states(batch)
        logits = tf.zeros([batch, graphs.vocab_size])

        def body(t, logits, states):
            out = graphs.step(token=ids[:, t], **states)
            live = (t <= lengths)[:, None]  # position t is the start token or a real token
            new_states = {n: tf.where(live, out[n], states[n]) for n in states}
            return t + 1, tf.where(live, out["logits"], logits), new_states

        _, logits, states = tf.while_loop(lambda t, *_: t < steps, body,
                                          (tf.constant(0), logits, states))
        return logits, states

    def _join(self, ids):
        """Ids ``(B, N)`` → text ``(B,)`` as the tokenizer would print it."""
        tokens = tf.gather(self.vocab, ids)
        kind = self._tokenizer.kind
        if kind == "char":
            return tf.strings.reduce_join(tokens, axis=-1)
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        if kind == "subword":
            text = tf.strings.regex_replace(text, " ##", "")
        text = tf.strings.regex_replace(text, " ?<eos> ?", "\n")
        return text

    # -- signatures -------------------------------------------------------------------------
    def score(self, text):
        ids, lengths = self._ids(text)
        # At least one (padded) target column, so that a batch of texts with no tokens
        # (empty, blank) scores like an empty row in a mixed batch (length 0) instead of
        # failing on a zero-length sequence: a row's answer must not depend on the others.
        ids = tf.pad(ids, [[0, 0], [0, tf.maximum(0, 2 - tf.shape(ids)[1])]])
        logits = self._graphs.sequence_dynamic(ids[:, :-1])  # (B, L, V)
        logp = tf.nn.log_softmax(logits, axis=-1)
        targets = ids[:, 1:]
        token_logp = tf.gather(logp, targets, axis=-1, batch_dims=2)  # (B, L)
        mask = tf.sequence_mask(lengths, tf.shape(targets)[1], dtype=tf.float32)
        token_logp = token_logp * mask
        n = tf.maximum(tf.cast(lengths, tf.float32), 1.0)
        ce = -tf.reduce_sum(token_logp, axis=1) / n
        tokens = tf.where(mask > 0, tf.gather(self.vocab, targets), "")
        return {"log_probs": token_logp, "tokens": tokens, "lengths": lengths,
                "cross_entropy": ce, "perplexity": tf.exp(ce)}

    def next_tokens(self, text, k):
        ids, lengths = self._ids(text)
        logits, _ = self._run_prefix(ids, lengths)
        probs = tf.nn.softmax(logits, axis=-1)
        k = tf.clip_by_value(k, 1, self._graphs.vocab_size)
        top = tf.math.top_k(probs, k=k)
        return {"tokens": tf.gather(self.vocab, top.indices), "ids": top.indices,
                "probs": top.values}

    def generate(self, prompt, max_tokens, temperature, top_k, seed):
        ids, lengths = self._ids(prompt)
        logits, states = self._run_prefix(ids, lengths)
        batch = tf.shape(ids)[0]
        vocab = self._graphs.vocab_size
        k = tf.where(top_k <= 0, vocab, tf.minimum(top_k, vocab))
        temp = tf.maximum(temperature, 1e-6)
        out = tf.TensorArray(tf.int32, size=max_tokens)

        def body(t, logits, states, out):
            scaled = logits / temp
            kth = tf.math.top_k(scaled, k=k).values[:, -1:]  # (B, 1)
            masked = tf.where(scaled >= kth, scaled, -1e9)
            token = tf.random.stateless_categorical(masked, 1, seed=tf.stack([seed, t]),
                                                    dtype=tf.int32)[:, 0]  # (B,)
            res = self._graphs.step(token=token, **states)
            new_states = {n: res[n] for n in states}
            return t + 1, res["logits"], new_states, out.write(t, token)

        _, _, _, out = tf.while_loop(lambda t, *_: t < max_tokens, body,
                                     (tf.constant(0), logits, states, out))
        new_ids = tf.reshape(tf.transpose(out.stack()), [batch, max_tokens])  # (B, N)
        return {"text": self._join(new_ids), "ids": new_ids}


def _step_signature(module: LMServingModule):
    graphs = module._graphs
    specs = {"token": tf.TensorSpec((1,), tf.int32, name="token")}
    specs.update({n: tf.TensorSpec(shape, tf.float32, name=n)
                  for n, shape in graphs.state_shapes(1).items()})
    fn = tf.function(module.wrap(lambda **kw: graphs.step(**kw)))
    return fn.get_concrete_function(**specs)


def _add_dynamic_sequence(graphs: LMGraphs) -> None:
    """``graphs.sequence_dynamic(tokens (B, T))``: logits from zero state, any B and T,
    through each layer's own loop (the same math as Keras's forward pass)."""

    def sequence_dynamic(tokens):
        stack = graphs.stack
        x = graphs._embed(tokens)  # (B, T, E)
        batch = tf.shape(x)[0]
        for stage in stack.stages:
            if stage.kind != "recurrent":
                x = stack.pointwise(stage, x)  # (B, T, F)
                continue
            init = [tf.zeros([batch, s]) for s in state_sizes(stage.layer)]
            _, h, _ = stage.layer.inner_loop(x, init, None, training=False)  # (B, T, U)
            x = graphs._layer_output(x, h)
        return stack.logits(x)  # (B, T, V)

    graphs.sequence_dynamic = sequence_dynamic


def prepare_saved_model_dir(out_dir) -> Path:
    """``out_dir`` emptied for a new SavedModel: a missing or empty folder, or an earlier
    SavedModel (removed); anything else is refused, so no other files are lost."""
    out_dir = Path(out_dir)
    if out_dir.exists():
        if not (out_dir / "saved_model.pb").is_file() and any(out_dir.iterdir()):
            raise KerasSeqError(f"{out_dir} exists and is not a SavedModel; choose another "
                                "--out or remove it")
        shutil.rmtree(out_dir)
    return out_dir


def export_saved_model(source, out_dir, printer=print, model=None, tokenizer=None) -> Path:
    """Write the SavedModel of a language model to ``out_dir`` (replaced if present).

    ``source``: a ``keras-seq train lm`` run directory, or a built Keras model (a
    ``RecurrentLM`` or your own Sequential / functional model that
    :func:`~keras_seq.export.lm_stack.read_lm` reads), then with ``tokenizer=`` (the
    signatures take text). With ``model=`` given, ``source`` only names the origin.
    """
    run_dir = source
    if model is None and isinstance(source, keras.Model):
        model, run_dir = source, f"{type(source).__name__} {source.name}"
    elif model is None:
        _, tokenizer, model = load_run(source)
    out_dir = prepare_saved_model_dir(out_dir)
    module = LMServingModule(model, tokenizer)
    _add_dynamic_sequence(module._graphs)
    signatures = {name: tf.function(module.wrap(getattr(module, name)),
                                    input_signature=specs).get_concrete_function()
                  for name, specs in _INPUTS.items()}
    signatures["step"] = _step_signature(module)
    signatures["serving_default"] = signatures["score"]
    tf.saved_model.save(module, str(out_dir), signatures=signatures)
    assets = out_dir / "assets"
    assets.mkdir(exist_ok=True)
    tokenizer.save(assets / "tokenizer.json")
    graphs = module._graphs
    (assets / "keras_seq.json").write_text(json.dumps({
        "format": "keras-seq-saved-model", "tokenizer_fingerprint": tokenizer.fingerprint,
        "signatures": list(SIGNATURES), "run_dir": str(run_dir), **graphs.describe(),
    }, indent=2))
    printer(f"wrote SavedModel {out_dir} (signatures {', '.join(SIGNATURES)}; "
            f"tokenizer {tokenizer.fingerprint})")
    return out_dir


def load_step(saved_dir):
    """The ``step`` signature of an exported SavedModel and its state names (for benches)."""
    loaded = tf.saved_model.load(str(saved_dir))
    meta = json.loads((Path(saved_dir) / "assets" / "keras_seq.json").read_text())
    return loaded, loaded.signatures["step"], meta["state_names"]


def signature_summary(saved_dir) -> dict:
    """``{signature: {"inputs": {name: (dtype, shape)}, "outputs": {...}}}``."""
    loaded = tf.saved_model.load(str(saved_dir))
    out = {}
    for name, fn in loaded.signatures.items():
        inputs = {k: (v.dtype.name, v.shape.as_list())
                  for k, v in fn.structured_input_signature[1].items()}
        outputs = {k: (v.dtype.name, v.shape.as_list()) for k, v in fn.structured_outputs.items()}
        out[name] = {"inputs": inputs, "outputs": outputs}
    return out



def run_saved_model(args) -> int:
    """``keras-seq export saved-model`` (a run, or ``--model FILE.keras --tokenizer``)."""
    source, model, tokenizer = model_from_args(args, need_tokenizer=True)
    export_saved_model(source, args.out, model=model, tokenizer=tokenizer)
    return 0
