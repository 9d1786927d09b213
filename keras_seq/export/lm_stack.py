"""A Keras language model read as what a streaming export runs token by token.

Streaming export (:mod:`keras_seq.export.graphs`) runs a model one token at a time and
carries each recurrent layer's state by hand. :func:`read_lm` reads that structure from
keras-seq's :class:`~keras_seq.models.RecurrentLM` (and the unidirectional
:class:`~keras_seq.models.SequenceClassifier`) or from **your own Keras model**, Sequential
or functional, when it is a chain of:

1. the input: token ids ``(B, T)`` into ``keras.layers.Embedding`` or
   ``keras.layers.ReversibleEmbedding`` (no ``mask_zero``), or one-hot floats ``(B, T, V)``;
2. per-token layers, in any order and number, at least one recurrent: keras-seq's
   ``SimpleRNN``, ``GRU``, ``LSTM`` (CIFG included), ``LSTMP``, Keras's ``SimpleRNN``,
   ``LSTM``, ``GRU`` or ``keras.layers.RNN`` over a cell (``return_sequences=True``, not
   ``go_backwards``), and ``Dense``, ``LayerNormalization``, ``Activation``,
   ``TimeDistributed`` of those, and the layers that do nothing at inference
   (``Dropout`` and its kin);
3. the output layer with ``V`` units: ``Dense``, keras-seq's
   :class:`~keras_seq.layers.TiedLogits`, or the ``ReversibleEmbedding`` of step 1 called
   with ``reverse=True``; its activation (or a ``Softmax``/``Activation`` layer after it)
   linear, ``softmax`` or ``log_softmax``. The export's ``logits`` are always the
   pre-activation values, whose softmax is the model's distribution.

Anything else (a bidirectional layer, a merge or residual, masking, a subclassed model
whose layer order is hidden) is refused with :class:`UnsupportedModelError`, which names
the layer and what is supported.

Example:

>>> import keras, numpy as np
>>> from keras_seq.layers import LSTM
>>> model = keras.Sequential([keras.Input((None,), dtype="int32"),
...                           keras.layers.Embedding(20, 8), LSTM(16, return_sequences=True),
...                           keras.layers.Dense(20, activation="softmax")])
>>> stack = read_lm(model)
>>> stack.vocab_size, stack.activation, [type(s.layer).__name__ for s in stack.stages]
(20, 'softmax', ['LSTM'])
>>> stack.state_layout()
[('h0', 16), ('c0', 16)]
"""

from __future__ import annotations

from dataclasses import dataclass

import keras
import numpy as np
from keras import ops

from keras_seq.cells import spec_of
from keras_seq.errors import KerasSeqError
from keras_seq.layers.state import state_variables, stateful_layers
from keras_seq.layers.tied_logits import TiedLogits
from keras_seq.models import RecurrentLM, SequenceClassifier

#: what :func:`read_lm` accepts, said in every refusal
SUPPORTED = (
    "a chain of: Embedding or ReversibleEmbedding on token ids (or one-hot input); "
    "recurrent layers (keras-seq or Keras SimpleRNN/LSTM/GRU/LSTMP, keras.layers.RNN over a "
    "cell) with return_sequences=True, and per-token Dense/LayerNormalization/Activation/"
    "Dropout layers; then a Dense, TiedLogits or ReversibleEmbedding(reverse=True) output "
    "layer with a linear, softmax or log_softmax activation")

#: layers that compute nothing at inference
IDENTITY_TYPES = (keras.layers.Dropout, keras.layers.SpatialDropout1D,
                  keras.layers.GaussianDropout, keras.layers.GaussianNoise,
                  keras.layers.AlphaDropout, keras.layers.Identity,
                  keras.layers.ActivityRegularization)
#: layers that transform each token's features on their own
POINTWISE_TYPES = (keras.layers.Dense, keras.layers.LayerNormalization,
                   keras.layers.Activation)
#: output activations whose pre-activation values are the logits
HEAD_ACTIVATIONS = ("linear", "softmax", "log_softmax")


class UnsupportedModelError(KerasSeqError):
    """A model keras-seq cannot stream token by token; the message names the layer."""


@dataclass
class Stage:
    """One per-token layer: ``kind`` is ``recurrent``, ``pointwise`` or ``identity``."""

    layer: keras.layers.Layer
    kind: str


@dataclass
class LMStack:
    """A language model as input → per-token stages → output layer (see module doc).

    Attributes:
        model: the Keras model read (its weights are the export's).
        vocab_size: ``V``, the token ids read.
        num_outputs: the output layer's units: ``V`` for a language model, the number of
            labels for a classifier.
        embedding: the input embedding layer, or None for one-hot input.
        stages: the per-token layers in order.
        head: the output layer; ``head_call`` how to get its logits (``dense``: the
            kernel and bias without the activation, ``call``: the layer as is,
            ``reverse``: ``head(x, reverse=True)``).
        activation: the model's output activation (``linear``, ``softmax``,
            ``log_softmax``); the logits are the values before it.
        residual: each recurrent layer's input added to its output where the sizes
            match (keras-seq's classifier).
        source: what was read (``RecurrentLM``, ``Sequential``, ``Functional``, …).
    """

    model: keras.Model
    vocab_size: int
    embedding: keras.layers.Layer | None
    stages: list[Stage]
    head: keras.layers.Layer
    head_call: str = "call"
    activation: str = "linear"
    residual: bool = False
    source: str = ""
    num_outputs: int | None = None

    def __post_init__(self):
        if self.num_outputs is None:  # a language model scores its own vocabulary
            self.num_outputs = self.vocab_size

    # -- structure ------------------------------------------------------------------------
    @property
    def recurrent(self) -> list:
        """The recurrent layers, in order."""
        return [s.layer for s in self.stages if s.kind == "recurrent"]

    def state_layout(self) -> list[tuple[str, int]]:
        """``[(name, size)]`` of every carried state: ``h<i>`` (and ``c<i>`` for a layer
        with two states, an LSTM's) of recurrent layer ``i``, in layer order; the names are
        the cell's ``states`` in the registry (``h``, ``c`` for a cell it lacks)."""
        out = []
        for i, rnn in enumerate(self.recurrent):
            spec = spec_of(rnn.cell)
            names = spec.states if spec is not None else ("h", "c")
            out += [(f"{name}{i}", size) for name, size in zip(names, state_sizes(rnn))]
        return out

    @property
    def input_dim(self) -> int:
        """The embedding size (or ``V`` for one-hot input)."""
        if self.embedding is None:
            return self.vocab_size
        return int(self.embedding.output_dim)

    # -- the computation, in Keras ops -------------------------------------------------------
    def pointwise(self, stage: Stage, x):
        """A non-recurrent stage on ``(B, F)`` or ``(B, T, F)`` features."""
        if stage.kind == "identity":
            return x
        layer = stage.layer
        if isinstance(layer, keras.layers.TimeDistributed):
            layer = layer.layer
            if isinstance(layer, IDENTITY_TYPES):
                return x
        if isinstance(layer, keras.layers.Dense) or len(x.shape) == 3:
            return layer(x, training=False)  # Dense works on any rank: 2-D stays 2-D
        return layer(x[:, None], training=False)[:, 0]  # (B, 1, F) → (B, F')

    def table(self):
        """The input embedding table ``(V, E)`` as the model computes with it (rounded
        for a :class:`~keras_seq.layers.QATEmbedding` under ``qat``)."""
        rounded = getattr(self.embedding, "quantized_table", None)
        return rounded() if rounded is not None else self.embedding.embeddings

    def logits(self, x):
        """The output layer's pre-activation values: ``(..., F)`` → ``(..., V)``."""
        head = self.head
        if self.head_call == "dense":
            if isinstance(head, keras.layers.TimeDistributed):
                head = head.layer
            rounded = getattr(head, "quantized_kernel", None)  # a QATDense under qat
            out = ops.matmul(x, rounded() if rounded is not None else head.kernel)
            out = out + head.bias if head.use_bias else out
            quantize = getattr(head, "quantize_output", None)  # full-integer QAT's logits
            return quantize(out) if quantize is not None else out
        if self.head_call == "reverse":
            return head(x, reverse=True)
        return head(x)

    @property
    def qat(self) -> str | None:
        """The model's quantization-aware training mode (``"int8"``, ``"int4"``, None)."""
        modes = {getattr(layer, "qat", None)
                 for layer in self.model._flatten_layers(include_self=True, recursive=True)}
        modes.discard(None)
        if len(modes) > 1:
            raise UnsupportedModelError(
                f"model {self.model.name!r} mixes qat modes {sorted(modes)}; train every "
                "layer for the one TFLite variant it will be exported to")
        return modes.pop() if modes else None

    def describe(self) -> dict:
        """What the export's metadata says about the model."""
        rnns = self.recurrent
        kinds = [cell_kind(rnn) for rnn in rnns]
        out = {"cell": kinds[0] if len(set(kinds)) == 1 else "+".join(kinds),
               "units": int(rnns[0].cell.units) if hasattr(rnns[0].cell, "units")
               else state_sizes(rnns[0])[-1],
               "num_layers": len(rnns), "vocab_size": int(self.vocab_size),
               "embed_dim": self.input_dim, "source": self.source,
               "layers": [f"{type(s.layer).__name__}:{s.layer.name}" for s in self.stages]}
        if self.embedding is None:
            out["input"] = "one_hot"
        if self.activation != "linear":
            out["output_activation"] = self.activation
        if self.qat:
            out["qat"] = self.qat
        return out


# ----------------------------------------------------------------------------------------
# Recurrent layers


def state_sizes(rnn) -> list[int]:
    """The sizes of a recurrent layer's states (``[h]`` or ``[h, c]``)."""
    sizes = rnn.cell.state_size
    sizes = list(sizes) if isinstance(sizes, (list, tuple)) else [sizes]
    return [int(s) for s in sizes]


def cell_kind(rnn) -> str:
    """The layer's cell as the registry names it (``rnn``, ``gru``, ``lstm``, ``lstmp``…;
    a Keras built-in by the keras-seq cell computing the same), or the cell's class name
    in lower case when no row of :data:`~keras_seq.cells.CELLS` has it."""
    spec = spec_of(rnn.cell)
    if spec is None:
        return type(rnn.cell).__name__.lower()
    return spec.twin or spec.name


def _check_recurrent(layer, last_may_pool: bool = False) -> None:
    """Refuse a recurrent layer whose state cannot be carried token by token
    (``last_may_pool``: a classifier's last recurrent layer may return its last step
    only, which is its output after each token when streamed)."""
    name = f"{type(layer).__name__} layer {layer.name!r}"
    if isinstance(layer.cell, keras.layers.StackedRNNCells):
        raise UnsupportedModelError(
            f"{name} runs stacked cells (StackedRNNCells): stack the recurrent layers "
            "instead (one layer per cell) to export it")
    if not layer.return_sequences and not last_may_pool:
        raise UnsupportedModelError(
            f"{name} has return_sequences=False: it gives one output per sequence (an N→1 "
            "model), a language model needs one per token. Build it with "
            "return_sequences=True (an N→1 classifier streams with "
            "keras_seq.export.export_classifier_tflite)")
    if layer.go_backwards:
        raise UnsupportedModelError(
            f"{name} has go_backwards=True: it reads the sequence from its end, which a "
            "stream has not reached yet. Only forward layers stream")
    if getattr(layer, "return_state", False):
        raise UnsupportedModelError(
            f"{name} has return_state=True; the streaming export carries the state itself: "
            "build it with return_state=False")
    if len(state_sizes(layer)) not in (1, 2):
        raise UnsupportedModelError(
            f"{name} carries {len(state_sizes(layer))} states; the export names one (h) or "
            "two (h, c) per layer")


# ----------------------------------------------------------------------------------------
# Reading a model


def read_lm(model, task: str = "lm") -> LMStack:
    """The :class:`LMStack` of ``model``; :class:`UnsupportedModelError` names what does
    not stream. ``model`` must be built (called once, or made with ``keras.Input``).

    ``task="classify"``: an N→1 classifier instead (the output layer scores labels, and
    the last recurrent layer may have ``return_sequences=False``): streamed, it gives the
    label scores after every token."""
    if isinstance(model, LMStack):
        return model
    if not isinstance(model, keras.Model):
        raise UnsupportedModelError(
            f"received a {type(model).__name__}, expected a keras.Model (or a keras-seq run "
            "directory): load a .keras file with keras.saving.load_model first")
    if not getattr(model, "built", False):
        raise UnsupportedModelError(
            f"model {model.name!r} is not built yet; call it once on token ids (or start it "
            "with keras.Input) before exporting")
    own = _keras_seq_stack(model)
    if own is not None:
        return own
    return _stack_of_chain(model, _chain(model), task)


def _keras_seq_stack(model) -> LMStack | None:
    """keras-seq's own models, read from their attributes (no graph to walk)."""
    if isinstance(model, RecurrentLM):
        rnns, residual = model.rnns, False
    elif isinstance(model, SequenceClassifier):
        rnns, residual = model.rnns, bool(getattr(model, "residual", False))
        if getattr(model, "bidirectional", False):
            raise UnsupportedModelError(
                "a bidirectional classifier reads the text from its end too; no score exists "
                "until the whole sequence has arrived. Train a unidirectional one to stream")
    else:
        return None
    for rnn in rnns:
        if not isinstance(rnn, keras.layers.RNN):
            raise UnsupportedModelError(
                f"layer {rnn.name!r} ({type(rnn).__name__}) is not a recurrent layer with a "
                "cell; only forward recurrent layers stream")
    return LMStack(model=model, vocab_size=int(model.vocab_size), embedding=model.embedding,
                   stages=[Stage(rnn, "recurrent") for rnn in rnns], head=model.head,
                   residual=residual, source=type(model).__name__,
                   num_outputs=int(getattr(model, "num_classes", model.vocab_size)))


def _chain(model) -> list[tuple[keras.layers.Layer, dict]]:
    """``[(layer, call kwargs)]`` from input to output of a Sequential or functional model
    (nested ones flattened); refuses a model that is not one chain."""
    if isinstance(model, keras.Sequential):
        out = []
        for layer in model.layers:
            out += _chain(layer) if isinstance(layer, keras.Model) else [(layer, {})]
        return out
    if not hasattr(model, "_operations") or not getattr(model, "outputs", None):
        raise UnsupportedModelError(
            f"{type(model).__name__} {model.name!r} is a subclassed model: its call() hides "
            "the order of its layers. Build it as keras.Sequential or a functional "
            f"keras.Model, as {SUPPORTED}")
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise UnsupportedModelError(
            f"model {model.name!r} has {len(model.inputs)} inputs and {len(model.outputs)} "
            "outputs; a streaming language model has one of each (token ids in, next-token "
            "scores out)")
    out, tensor = [], model.outputs[0]
    while True:
        layer, node_index, _ = tensor._keras_history
        if isinstance(layer, keras.layers.InputLayer):
            break
        node = layer._inbound_nodes[node_index]
        inputs = node.arguments.keras_tensors
        if len(inputs) != 1:
            raise UnsupportedModelError(
                f"{type(layer).__name__} layer {layer.name!r} takes {len(inputs)} tensors (a "
                "merge, a residual connection or an explicit state); the export streams "
                f"{SUPPORTED}")
        kwargs = {k: v for k, v in node.arguments.kwargs.items()
                  if not isinstance(v, keras.KerasTensor)}
        if isinstance(layer, keras.Model):  # a nested model: its own chain, reversed
            out += _chain(layer)[::-1]
        else:
            out.append((layer, kwargs))
        tensor = inputs[0]
    return out[::-1]


def _split_head(chain: list) -> tuple[list, tuple, str]:
    """``(body, (head, how), activation)``: the output layer and the activation after it
    taken off the end of the chain."""
    body = list(chain)
    activation = "linear"
    while body and isinstance(body[-1][0], (keras.layers.Softmax, keras.layers.Activation,
                                            *IDENTITY_TYPES)):
        layer, _ = body.pop()
        if isinstance(layer, IDENTITY_TYPES):
            continue
        name = "softmax" if isinstance(layer, keras.layers.Softmax) else \
            getattr(layer.activation, "__name__", str(layer.activation))
        if isinstance(layer, keras.layers.Softmax) and layer.axis not in (-1, [-1]):
            raise UnsupportedModelError(
                f"Softmax layer {layer.name!r} normalises axis {layer.axis}; the output "
                "distribution is over the last axis (the vocabulary)")
        if activation != "linear" or name not in HEAD_ACTIVATIONS:
            raise UnsupportedModelError(
                f"layer {layer.name!r} applies {name} after the output layer; the exported "
                f"model ends in one of {', '.join(HEAD_ACTIVATIONS)}")
        activation = name
    if not body:
        raise UnsupportedModelError(f"the model has no output layer; expected {SUPPORTED}")
    layer, kwargs = body.pop()
    inner = layer.layer if isinstance(layer, keras.layers.TimeDistributed) else layer
    if isinstance(inner, keras.layers.ReversibleEmbedding) and kwargs.get("reverse"):
        return body, (layer, "reverse"), activation
    if isinstance(inner, TiedLogits):
        return body, (layer, "call"), activation
    if isinstance(inner, keras.layers.Dense):
        own = getattr(inner.activation, "__name__", str(inner.activation))
        if own not in HEAD_ACTIVATIONS:
            raise UnsupportedModelError(
                f"output layer {inner.name!r} has activation {own!r}; the exported model's "
                f"output layer has one of {', '.join(HEAD_ACTIVATIONS)} (scores that sum "
                "to one)")
        if own != "linear" and activation != "linear":
            raise UnsupportedModelError(
                f"output layer {inner.name!r} applies {own} and a later layer {activation}; "
                "keep one of them")
        if getattr(inner, "quantization_mode", None):
            raise UnsupportedModelError(
                f"output layer {inner.name!r} is quantized ({inner.quantization_mode}); "
                "export the float model and pick a quantized TFLite variant instead")
        return body, (layer, "dense"), own if own != "linear" else activation
    raise UnsupportedModelError(
        f"the last layer {layer.name!r} ({type(layer).__name__}) is not an output layer "
        f"keras-seq streams; expected {SUPPORTED}")


def _stage(layer, kwargs, last_may_pool: bool = False) -> Stage:
    """The :class:`Stage` of one body layer, or a refusal naming it."""
    if kwargs.get("training"):
        raise UnsupportedModelError(f"layer {layer.name!r} is called with training=True")
    if isinstance(layer, keras.layers.Bidirectional):
        raise UnsupportedModelError(
            f"Bidirectional layer {layer.name!r} reads the sequence from its end too, which "
            "a stream has not reached; only forward recurrent layers stream")
    if isinstance(layer, keras.layers.RNN):
        _check_recurrent(layer, last_may_pool)
        return Stage(layer, "recurrent")
    if isinstance(layer, IDENTITY_TYPES):
        return Stage(layer, "identity")
    inner = layer.layer if isinstance(layer, keras.layers.TimeDistributed) else layer
    if isinstance(inner, IDENTITY_TYPES):
        return Stage(layer, "identity")
    if isinstance(inner, POINTWISE_TYPES):
        if isinstance(inner, keras.layers.Dense) and getattr(inner, "quantization_mode", None):
            raise UnsupportedModelError(
                f"Dense layer {inner.name!r} is quantized; export the float model")
        return Stage(layer, "pointwise")
    if isinstance(layer, keras.layers.Masking):
        raise UnsupportedModelError(
            f"Masking layer {layer.name!r}: a stream has no padding to skip; drop the mask "
            "for the exported model")
    raise UnsupportedModelError(
        f"layer {layer.name!r} ({type(layer).__name__}) is not one keras-seq streams token "
        f"by token; supported: {SUPPORTED}")


def _stack_of_chain(model, chain: list, task: str = "lm") -> LMStack:
    """An :class:`LMStack` from the ``(layer, kwargs)`` chain of a user's model."""
    if not chain:
        raise UnsupportedModelError(f"model {model.name!r} has no layers")
    body, (head, head_call), activation = _split_head(chain)
    embedding = None
    if body and isinstance(body[0][0], keras.layers.Embedding):
        embedding, kwargs = body.pop(0)
        if kwargs.get("reverse"):
            raise UnsupportedModelError(
                f"{embedding.name!r} is called with reverse=True before any recurrent layer")
        if embedding.mask_zero:
            raise UnsupportedModelError(
                f"Embedding layer {embedding.name!r} has mask_zero=True: its mask makes the "
                "recurrent layers skip id 0, which a stream does not. Build the exported "
                "model with mask_zero=False (its weights are the same)")
    last_rnn = max((i for i, (layer, _) in enumerate(body)
                    if isinstance(layer, keras.layers.RNN)), default=-1)
    stages = [_stage(layer, kwargs, task == "classify" and i == last_rnn)
              for i, (layer, kwargs) in enumerate(body)]
    if last_rnn < 0:
        raise UnsupportedModelError(
            f"model {model.name!r} has no recurrent layer: nothing carries a state from token "
            f"to token. keras-seq streams {SUPPORTED}")
    outputs = _head_units(head, head_call)
    if task == "classify":
        if embedding is None:
            raise UnsupportedModelError(
                f"classifier {model.name!r} starts with no Embedding; the streaming "
                "classifier reads word ids into an Embedding")
        return LMStack(model=model, vocab_size=int(embedding.input_dim),
                       embedding=embedding, stages=stages, head=head, head_call=head_call,
                       activation=activation, source=type(model).__name__,
                       num_outputs=outputs)
    vocab = outputs
    if head_call == "reverse" and head is not embedding:
        raise UnsupportedModelError(
            f"ReversibleEmbedding {head.name!r} is the output layer but not the input "
            "embedding; tie the same layer, or use a Dense output layer")
    if embedding is None:
        _check_one_hot(model, vocab)
    elif int(embedding.input_dim) != vocab:
        raise UnsupportedModelError(
            f"the embedding reads {embedding.input_dim} token ids but the output layer "
            f"{head.name!r} scores {vocab}; a language model predicts its own vocabulary")
    return LMStack(model=model, vocab_size=vocab, embedding=embedding, stages=stages,
                   head=head, head_call=head_call, activation=activation,
                   source=type(model).__name__)


def _head_units(head, head_call: str) -> int:
    inner = head.layer if isinstance(head, keras.layers.TimeDistributed) else head
    if head_call == "dense":
        return int(inner.units)
    if head_call == "reverse":
        return int(inner.input_dim)
    return int(inner.embedding.input_dim)  # TiedLogits


def _check_one_hot(model, vocab: int) -> None:
    """A model without an embedding must read one-hot rows of the vocabulary."""
    shape = tuple(model.inputs[0].shape) if getattr(model, "inputs", None) else None
    if shape is None or len(shape) != 3 or shape[-1] != vocab:
        raise UnsupportedModelError(
            f"model {model.name!r} starts with no Embedding and its input is {shape}; a "
            f"streaming language model reads token ids into an Embedding, or one-hot rows "
            f"(B, T, {vocab}) of its {vocab}-token vocabulary")


# ----------------------------------------------------------------------------------------
# Keras references (what the exported graphs are checked against)


def keras_probs(stack: LMStack, ids) -> np.ndarray:
    """The model's own next-token distribution ``(T, V)`` after each of ``ids``, from the
    zero state (see :func:`keras_outputs`)."""
    return _as_probs(keras_outputs(stack, ids), stack.activation)


def keras_outputs(stack: LMStack, ids) -> np.ndarray:
    """The model's own output ``(T, V)`` (after its activation) for ``ids`` from the zero
    state: ``model(ids)`` itself (a stateful model is called at the batch it was built
    for, its states zeroed first and put back after)."""
    model, ids = stack.model, np.asarray(ids, np.int32)
    batch = 1
    stateful = stateful_layers(model)
    if stateful:
        batch = int(stateful[0].states[0].shape[0])
    saved = [np.asarray(v) for v in state_variables(model)]
    for v in state_variables(model):
        v.assign(np.zeros(v.shape, v.dtype))
    x = np.tile(ids[None], (batch, 1))  # (B, T)
    if stack.embedding is None:
        x = np.eye(stack.vocab_size, dtype="float32")[x]  # (B, T, V)
    try:
        return np.asarray(model(x, training=False), np.float64)[0]  # (T, V)
    finally:
        for v, value in zip(state_variables(model), saved):
            v.assign(value)


def _as_probs(values: np.ndarray, activation: str) -> np.ndarray:
    if activation == "softmax":
        return values
    if activation == "log_softmax":
        return np.exp(values)
    z = values - values.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def keras_stream_log_probs(stack: LMStack, ids, window: int = 256) -> np.ndarray:
    """Natural-log probability of every next token of ``ids`` ``(len(ids) − 1,)``, from the
    zero state with the state carried across windows of ``window`` tokens: the model's
    layers run with their own loops (each recurrent layer's ``inner_loop``, Keras's
    ``Dense`` and the rest as called in the model), independent of the exported step
    graph. Scores a long stream without one ``(T, V)`` output for all of it."""
    # lazy: the export is TensorFlow's; this module's other readers need no TensorFlow
    import tensorflow as tf

    ids = np.asarray(ids, np.int32)
    if len(ids) < 2:
        raise KerasSeqError(f"need at least 2 tokens to score, got {len(ids)}")
    layout = [state_sizes(rnn) for rnn in stack.recurrent]

    @tf.function(reduce_retracing=True, autograph=False)  # plain Python loops over layers
    def window_log_probs(x, y, states):
        # x, y: (1, W) ids and targets; states: one list of (1, S) tensors per layer
        h = ops.one_hot(x, stack.vocab_size) if stack.embedding is None else \
            stack.embedding(x)  # (1, W, E)
        layer_states, new = iter(states), []
        for stage in stack.stages:
            if stage.kind == "identity":
                continue
            if stage.kind == "pointwise":
                h = stage.layer(h, training=False)
                continue
            _, h, carried = stage.layer.inner_loop(h, list(next(layer_states)), None,
                                                   training=False)  # (1, W, U)
            new.append(list(carried))
        logp = tf.nn.log_softmax(tf.cast(stack.logits(h), tf.float32), axis=-1)  # (1, W, V)
        return tf.gather(logp, y, axis=-1, batch_dims=2)[0], new  # (W,)

    states = [[tf.zeros((1, s)) for s in sizes] for sizes in layout]
    window = min(window, len(ids) - 1)
    out = []
    for start in range(0, len(ids) - 1, window):
        x = ids[start: min(start + window, len(ids) - 1)]
        y = ids[start + 1: start + 1 + len(x)]
        n = len(x)  # the last window is padded to the others' length: one trace in all
        x, y = np.pad(x, (0, window - n)), np.pad(y, (0, window - n))
        logp, states = window_log_probs(x[None], y[None], states)
        out.append(np.asarray(logp)[:n])
    return np.concatenate(out)
