"""Shared machinery for the keras-seq recurrent cells and layers.

A cell splits one step into two halves so that every path runs the same math:

- ``project_inputs(x)``: ``x @ kernel + input_bias`` for one step ``(B, D)`` or
  for a whole sequence ``(B, T, D)`` at once;
- ``recurrent_step(x_proj, states, params, rec_mask)``: everything that depends
  on the previous state (one fused recurrent matmul).

Who runs them:

1. ``Cell.call`` chains the two halves for one step; this is what
   ``keras.layers.RNN(cell)`` runs.
2. ``FastRNN.inner_loop`` (the layers) picks one of three paths per call
   (:mod:`keras_seq.layers.dispatch`): the backend's fused cuDNN kernel on a GPU
   (``cudnn_sequence``; LSTM and GRU), the backend's keras-seq fused loop with a
   hand-written gradient (``fused_sequence``; ``_fused.py``, ``_fused_jax.py``,
   ``_fused_torch.py``, found by :func:`fused_kernel`), or a loop over
   ``recurrent_step`` with autodiff (masks, recurrent dropout, custom activations,
   ``unroll=True``).

Everything here computes with ``keras.ops``, so the cells and layers build, train and
save under the TensorFlow, JAX and PyTorch backends; TensorFlow is imported only on
its own paths.
"""

from __future__ import annotations

import functools
import importlib
import warnings

import keras
from keras import activations, constraints, initializers, ops, regularizers
from keras.src.layers.rnn.dropout_rnn_cell import DropoutRNNCell

from keras_seq.layers import dispatch
from keras_seq.layers.quant import (
    ActivationRanges,
    check_qat,
    fake_quant,
    quantize_activation,
    quantize_fixed,
)
from keras_seq.layers.seeds import explicit_seed


def read(variable):
    """A variable's current value as a plain tensor (gradients still reach it).

    On TensorFlow ``ops.convert_to_tensor`` can hand back the ``tf.Variable`` itself,
    which ``tf.custom_gradient`` (the fused loop) refuses; a plain tensor is what it takes.
    """
    value = ops.convert_to_tensor(variable)
    if keras.backend.backend() == "tensorflow":
        # lazy: loads TensorFlow only when this runs
        import tensorflow as tf

        return tf.convert_to_tensor(value)
    return value


#: Per backend, the module of whole-sequence kernels with hand-written gradients
#: (``simple_rnn_sequence``, ``lstm_sequence``, ``gru_sequence``, ``lstmp_sequence``; one
#: contract, see ``_fused.py``). A backend or a kernel missing here runs the step loop.
FUSED_MODULES = {
    "tensorflow": "keras_seq.layers._fused",
    "jax": "keras_seq.layers._fused_jax",
    "torch": "keras_seq.layers._fused_torch",
}


def fused_kernel(name: str, training: bool = False):
    """This backend's whole-sequence kernel ``name`` (e.g. ``"lstm_sequence"``), or None.

    The module is imported by name, only when a layer first asks: each one imports its
    own backend (TensorFlow, JAX or PyTorch). A training call gets the kernels the
    module lists in ``XLA_WHEN_TRAINING`` with their loops compiled by XLA
    (``jit_compile=True``; TensorFlow's LSTM and GRU, measured faster on a CPU); inference keeps
    plain ops, so that SavedModel, TFLite and TF-Serving graphs carry no XLA-only
    function.
    """
    module_name = FUSED_MODULES.get(keras.backend.backend())
    if module_name is None:
        return None
    module = importlib.import_module(module_name)
    kernel = getattr(module, name, None)
    if kernel is not None and training and name in getattr(module, "XLA_WHEN_TRAINING", ()):
        return functools.partial(kernel, jit_compile=True)
    return kernel


def check_implementation(owner: str, implementation) -> None:
    """Keras's legacy ``implementation`` argument of ``LSTMCell``/``GRUCell``: 2 (its
    default, one matmul for all gates) is what keras-seq always does, and 0 (Keras 1's mode,
    which Keras 3 still takes and runs as 2) is the same; 1 (a matmul per gate, once a
    memory trade-off) gives the same numbers, so it is accepted and said in one line.
    """
    if implementation not in (0, 1, 2) or isinstance(implementation, bool):
        raise ValueError(
            f"{owner}: received implementation={implementation!r}; expected 0, 1 or 2 "
            "(Keras's legacy choice of gate matmuls). Leave it out: keras-seq computes every "
            "gate in one matmul."
        )
    if implementation == 1:
        warnings.warn(
            f"{owner}: implementation=1 changes nothing here (keras-seq computes all gates "
            "in one matmul, Keras's implementation=2, with the same results).",
            UserWarning, stacklevel=3)


def activation_name(fn):
    """``"tanh"`` for ``keras.activations.tanh`` etc.; ``""`` for anything else."""
    return getattr(fn, "__name__", "")


# Constructor arguments serialized with `keras.<kind>.serialize`.
_SERIALIZED = {
    "activation": activations,
    "recurrent_activation": activations,
    "kernel_initializer": initializers,
    "recurrent_initializer": initializers,
    "bias_initializer": initializers,
    "kernel_regularizer": regularizers,
    "recurrent_regularizer": regularizers,
    "bias_regularizer": regularizers,
    "kernel_constraint": constraints,
    "recurrent_constraint": constraints,
    "bias_constraint": constraints,
}


class BaseCell(keras.layers.Layer, DropoutRNNCell):
    """Common arguments, dropout masks, weights and config of the keras-seq cells.

    Subclasses set ``ARGS`` (their constructor argument names, in order, as in
    ``get_config``), ``num_gates`` and implement ``recurrent_step``.
    """

    ARGS: tuple[str, ...] = ()

    def __init__(
        self,
        units,
        activation="tanh",
        use_bias=True,
        kernel_initializer="glorot_uniform",
        recurrent_initializer="orthogonal",
        bias_initializer="zeros",
        kernel_regularizer=None,
        recurrent_regularizer=None,
        bias_regularizer=None,
        kernel_constraint=None,
        recurrent_constraint=None,
        bias_constraint=None,
        dropout=0.0,
        recurrent_dropout=0.0,
        seed=None,
        weight_dropout=0.0,
        qat=None,
        **kwargs,
    ):
        if not isinstance(units, int) or isinstance(units, bool) or units <= 0:
            raise ValueError(
                f"{type(self).__name__}: received units={units!r}; expected a positive "
                "integer (the size of the hidden state), e.g. units=128."
            )
        rates = (("dropout", dropout), ("recurrent_dropout", recurrent_dropout),
                 ("weight_dropout", weight_dropout))
        for name, rate in rates:
            if not 0.0 <= float(rate) < 1.0:
                raise ValueError(
                    f"{type(self).__name__}: received {name}={rate!r}; expected a "
                    f"fraction in [0, 1), e.g. {name}=0.2 (0 turns it off)."
                )
        super().__init__(**kwargs)
        self.units = units
        self.activation = activations.get(activation)
        self.use_bias = use_bias
        self.kernel_initializer = initializers.get(kernel_initializer)
        self.recurrent_initializer = initializers.get(recurrent_initializer)
        self.bias_initializer = initializers.get(bias_initializer)
        self.kernel_regularizer = regularizers.get(kernel_regularizer)
        self.recurrent_regularizer = regularizers.get(recurrent_regularizer)
        self.bias_regularizer = regularizers.get(bias_regularizer)
        self.kernel_constraint = constraints.get(kernel_constraint)
        self.recurrent_constraint = constraints.get(recurrent_constraint)
        self.bias_constraint = constraints.get(bias_constraint)
        self.dropout = float(dropout)
        self.recurrent_dropout = float(recurrent_dropout)
        self.weight_dropout = float(weight_dropout)
        self.qat = check_qat(qat, type(self).__name__)
        self.seed = seed
        # explicit_seed: the state SeedGenerator(None) would have, but torch dropout uses it
        self.seed_generator = keras.random.SeedGenerator(seed=explicit_seed(seed))
        self.output_size = units

    # -- weights ---------------------------------------------------------------
    num_gates = 1  # blocks of `units` columns in kernel / recurrent_kernel

    def _bias_shape(self):
        return (self.num_gates * self.units,)

    def _bias_init(self):
        return self.bias_initializer

    def _recurrent_rows(self):
        """Rows of ``recurrent_kernel``: the size of the fed-back ``h``."""
        return self.units

    #: the activation points ``qat="int8"`` rounds in ``recurrent_step`` (each cell's own)
    ACTIVATION_POINTS: tuple[str, ...] = ()

    def activation_points(self) -> tuple[str, ...]:
        """The names of this cell's rounded activations under ``qat="int8"``."""
        return self.ACTIVATION_POINTS

    def _build_activation_ranges(self) -> None:
        """``self.activation_ranges``: an :class:`~keras_seq.layers.quant.ActivationRanges`
        of :meth:`activation_points` for full-integer QAT (``qat="int8"``), else None."""
        self.activation_ranges = None
        if self.qat != "int8":
            return
        names = activation_name(self.activation), activation_name(
            getattr(self, "recurrent_activation", self.activation))
        if names[0] != "tanh" or names[1] not in ("tanh", "sigmoid"):
            raise ValueError(
                f"{type(self).__name__}: qat='int8' rounds activations to the fixed ranges of "
                f"TFLite's int8 tanh and sigmoid kernels; received activation={names[0]!r}, "
                f"recurrent_activation={names[1]!r}. Use the defaults, or qat='int4' (weights "
                "only)")
        self.activation_ranges = ActivationRanges(self, self.activation_points())

    def _aq(self, name: str, x):
        """``x`` rounded at activation point ``name`` (``qat="int8"``), else ``x``."""
        return quantize_activation(getattr(self, "activation_ranges", None), name, x)

    def _aq_fixed(self, kind: str, x):
        """A ``sigmoid``/``tanh`` output rounded to its int8 kernel's fixed range."""
        return quantize_fixed(getattr(self, "activation_ranges", None), kind, x)

    def build(self, input_shape):
        input_dim = input_shape[-1]
        cols = self.num_gates * self.units
        self.kernel = self.add_weight(
            shape=(input_dim, cols),
            name="kernel",
            initializer=self.kernel_initializer,
            regularizer=self.kernel_regularizer,
            constraint=self.kernel_constraint,
        )
        self.recurrent_kernel = self.add_weight(
            shape=(self._recurrent_rows(), cols),
            name="recurrent_kernel",
            initializer=self.recurrent_initializer,
            regularizer=self.recurrent_regularizer,
            constraint=self.recurrent_constraint,
        )
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(
                shape=self._bias_shape(),
                name="bias",
                initializer=self._bias_init(),
                regularizer=self.bias_regularizer,
                constraint=self.bias_constraint,
            )
        self._build_activation_ranges()

    # -- the weights as a step computes with them ------------------------------
    def quantized_kernels(self):
        """``(kernel, recurrent_kernel)`` as tensors: as they are, or with ``qat`` rounded
        to the export grid per output column (:func:`~keras_seq.layers.quant.fake_quant`),
        over ``[kernel; recurrent_kernel]`` stacked for a cell whose exported step
        multiplies them as one matrix (``merges_recurrent_matmul``)."""
        kernel, recurrent = read(self.kernel), read(self.recurrent_kernel)
        if not self.qat:
            return kernel, recurrent
        if self.merges_recurrent_matmul:
            both = fake_quant(ops.concatenate([kernel, recurrent], axis=0), self.qat)
            rows = kernel.shape[0]
            return both[:rows], both[rows:]
        return fake_quant(kernel, self.qat), fake_quant(recurrent, self.qat)

    def _cudnn_kernel(self):
        """``kernel`` for the backend's fused cuDNN kernel: the variable itself, rounded
        under ``qat``."""
        return self.quantized_kernels()[0] if self.qat else self.kernel

    def qat_weights(self) -> list:
        """``[(variable, rounded value)]`` of the weights ``qat`` rounds: what an exporter
        writes (:func:`~keras_seq.layers.quant.baked_values`)."""
        kernel, recurrent = self.quantized_kernels()
        return [(self.kernel, kernel), (self.recurrent_kernel, recurrent)]

    # -- the two halves of a step ----------------------------------------------
    def _input_bias(self):
        return self.bias

    def project_inputs(self, inputs):
        """``inputs @ kernel (+ input bias)``: ``(B, D) -> (B, G·U)``.

        Works for a whole sequence at once too: ``(B, T, D) -> (B, T, G·U)``.
        """
        kernel = self.quantized_kernels()[0] if self.qat else self.kernel
        if len(inputs.shape) == 3:  # one 2-D matmul; a broadcast batch matmul is slower
            batch, steps = ops.shape(inputs)[0], ops.shape(inputs)[1]
            x = ops.matmul(ops.reshape(inputs, (-1, inputs.shape[-1])), kernel)
            x = ops.reshape(x, (batch, steps, x.shape[-1]))
        else:
            x = ops.matmul(inputs, kernel)
        bias = self._input_bias() if self.use_bias else None
        return x if bias is None else ops.add(x, bias)

    def step_params(self, training=False):
        """Tensors the recurrent step needs, read once per sequence (not per step).

        With ``weight_dropout`` and ``training``, the recurrent kernel is DropConnect-ed
        (Wan et al. 2013; Merity et al. 2017's weight-dropped LSTM): one mask over
        ``recurrent_kernel`` per sequence, shared by every timestep and batch row.
        """
        kernel = self.quantized_kernels()[1] if self.qat else read(self.recurrent_kernel)
        if training and self.weight_dropout > 0:
            kernel = kernel * self.get_weight_dropout_mask(kernel.dtype)  # (U, G·U)
        return {"recurrent_kernel": kernel}

    def get_weight_dropout_mask(self, dtype=None):
        """The cached ``recurrent_kernel`` mask (scaled by ``1/(1-rate)``), one per sequence."""
        if getattr(self, "_weight_dropout_mask", None) is None:
            ones = ops.ones(tuple(self.recurrent_kernel.shape),
                            dtype=dtype or self.recurrent_kernel.dtype)
            self._weight_dropout_mask = keras.random.dropout(
                ones, rate=self.weight_dropout, seed=self.seed_generator)
        return self._weight_dropout_mask

    def reset_dropout_mask(self):
        # keras.layers.RNN calls this after each sequence; the weight mask goes with it.
        super().reset_dropout_mask()
        self._weight_dropout_mask = None

    def recurrent_step(self, x_proj, states, params, rec_mask=None):
        """One step from projected inputs ``(B, G·U)``; returns ``(output, new_states)``."""
        raise NotImplementedError

    def supports_fused(self):
        """Whether ``fused_sequence`` handles this cell's settings (activations); never
        under ``qat="int8"``, whose activations are rounded inside every step."""
        return False

    #: ``"lstm"`` or ``"gru"`` for cells with a fused cuDNN kernel (``cudnn_sequence``).
    cudnn_kind = None

    def cudnn_sequence(self, sequences, states, mask, params, return_sequences, go_backwards):
        """The backend's fused cuDNN kernel over ``sequences (B, T, D)`` (Keras's backend
        ``lstm()``/``gru()``, with ``params["recurrent_kernel"]``, already weight-dropped).

        Returns ``(last (B, U), outputs (B, T or 1, U), states)``; raises
        NotImplementedError when the backend declines.
        """
        raise NotImplementedError

    def fused_sequence(self, xs, states, params, training=False):
        """Whole-sequence kernel with a hand-written gradient (:func:`fused_kernel`).

        ``xs``: projected inputs, time-major ``(T, B, G·U)``. Returns
        ``(outputs (T, B, U), final_states)``.
        """
        raise NotImplementedError

    def call(self, inputs, states, training=False):
        if not isinstance(states, (list, tuple)):
            states = [states]
        dp_mask = self.get_dropout_mask(inputs)
        rec_mask = self.get_recurrent_dropout_mask(states[0])
        if training and dp_mask is not None:
            inputs = inputs * dp_mask
        x_proj = self.project_inputs(inputs)  # (B, G·U)
        rec_mask = rec_mask if training else None
        params = self.step_params(training=training)
        return self.recurrent_step(x_proj, list(states), params, rec_mask)

    # Cells whose recurrent term is added to the input projection (z = x·W + h·R + b) set
    # this, and their recurrent_step skips h·R when params["recurrent_kernel"] is None.
    merges_recurrent_matmul = False

    def merged_step(self, inputs, states):
        """One inference step (no dropout) with the input and recurrent matmuls as one:
        ``[x, h_prev] @ [kernel; recurrent_kernel] + bias``, then the cell's gates. The
        same math as ``call(inputs, states)``; an exporter uses it so TFLite gets one
        ``FULLY_CONNECTED`` per step and XNNPACK one partition. ``None`` for cells whose
        recurrent term is not a plain sum (GRU's reset gate acts on it).

        >>> import numpy as np
        >>> from keras_seq.layers.lstm import LSTMCell
        >>> cell = LSTMCell(3); cell.build((None, 2))
        >>> x, states = np.ones((1, 2), "float32"), [np.full((1, 3), 0.5, "float32")] * 2
        >>> np.allclose(cell.merged_step(x, states)[0], cell(x, states)[0], atol=1e-6)
        True
        """
        if not self.merges_recurrent_matmul:
            return None
        params = self.step_params(training=False)
        h_tm1 = states[0]  # (B, P) for lstmp, else (B, U)
        kernel = self.quantized_kernels()[0] if self.qat else read(self.kernel)
        weights = ops.concatenate([kernel, params["recurrent_kernel"]], axis=0)
        z = ops.matmul(ops.concatenate([inputs, h_tm1], axis=-1), weights)  # (B, G·U)
        bias = self._input_bias() if self.use_bias else None
        z = z if bias is None else ops.add(z, bias)
        return self.recurrent_step(z, list(states), {**params, "recurrent_kernel": None})

    def get_initial_state(self, batch_size=None):
        sizes = self.state_size if isinstance(self.state_size, (list, tuple)) else [self.state_size]
        return [ops.zeros((batch_size, size), dtype=self.compute_dtype) for size in sizes]

    # -- config ----------------------------------------------------------------
    def arg_config(self):
        """Constructor arguments only (what a layer adds to its own config)."""
        config = {}
        for name in self.ARGS:
            value = getattr(self, name)
            module = _SERIALIZED.get(name)
            config[name] = module.serialize(value) if module is not None else value
        return config

    def get_config(self):
        return {**super().get_config(), **self.arg_config()}


class FastRNN(keras.layers.RNN):
    """``keras.layers.RNN`` whose loop projects all inputs in one matmul.

    Masking, ``return_sequences``, ``return_state``, ``go_backwards``, ``stateful``
    and ``Bidirectional`` come from ``keras.layers.RNN``; only ``inner_loop`` is
    replaced, by one of three paths (:mod:`keras_seq.layers.dispatch`): the backend's
    fused cuDNN kernel on a GPU (LSTM and GRU, ``use_cudnn``), the TensorFlow fused
    loop with a hand-written gradient (``_fused.py``) when there is no mask, no
    recurrent dropout and standard activations, else a step loop (``_fast_rnn.py`` on
    TensorFlow, Keras's backend loop elsewhere). ``last_path`` names the path the
    latest call (or trace) took and ``last_path_reason`` why not the fused kernel (None
    when it ran). Subclasses build their cell and pass it here.
    """

    def __init__(self, cell, use_cudnn="auto", **kwargs):
        super().__init__(cell, **kwargs)
        self.use_cudnn = dispatch.check_use_cudnn(use_cudnn)
        blockers = dispatch.fused_kernel_blockers(self) if use_cudnn is True else []
        if blockers:
            raise ValueError(
                f"{type(self).__name__}: received use_cudnn=True, but this configuration "
                "cannot run the fused cuDNN kernel: " + "; ".join(blockers)
                + ". Change those arguments, or pass use_cudnn='auto'."
            )
        self.input_spec = keras.layers.InputSpec(ndim=3)
        self.last_path = None
        self.last_path_reason = None

    def build(self, sequences_shape, initial_state_shape=None):
        # Keras's own message for this ("the batch size must be static") does not say how.
        if self.stateful and self.states is None and sequences_shape[0] is None:
            raise ValueError(
                f"{self.name}: stateful=True needs a fixed batch size, but the layer received "
                f"inputs of shape {tuple(sequences_shape)} (batch None); give the model a "
                "first keras.Input(shape=(T, ...), batch_size=B) (Sequential or functional), "
                "or call the model once on a (B, T) batch before fit")
        super().build(sequences_shape, initial_state_shape)

    @property
    def variables(self):
        """Keras's, plus a stateful layer's state variables.

        ``keras.layers.RNN`` keeps its states out of every variable list, so JAX's
        ``fit`` (which threads only listed variables through its compiled step) drops
        them: the state is not carried from one batch to the next. Listed here, they
        travel like dropout seeds do: in the training state, not in ``weights`` or
        ``.keras`` files.
        """
        variables = super().variables
        if self.stateful and self.states is not None:
            seen = {id(v) for v in variables}
            variables.extend(v for v in self.states if id(v) not in seen)
        return variables

    def __getattr__(self, name):
        # Under the torch backend a Layer is a torch.nn.Module, whose __getattr__ finds
        # sub-layers (the cell) in its module registry: ask it first.
        try:
            return super().__getattr__(name)
        except AttributeError:
            pass
        # Keras's LSTM/GRU expose the cell's arguments as layer attributes.
        cell = self.__dict__.get("cell") or self.__dict__.get("_modules", {}).get("cell")
        if cell is not None and name in getattr(cell, "ARGS", ()):
            return getattr(cell, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def inner_loop(self, sequences, initial_state, mask, training=False):
        last, seq, states = self._any_loop(sequences, initial_state, mask, training)
        # TensorFlow's while loops lose the static number of timesteps in a graph; Keras's
        # layers keep it, and TimeDistributed after one needs it (with an unknown time
        # axis Keras 3.15 maps over the batch size instead).
        steps = sequences.shape[1] if self.return_sequences else 1
        if steps is not None and seq.shape[1] is None and hasattr(seq, "set_shape"):
            seq.set_shape((seq.shape[0], steps, *seq.shape[2:]))  # (B, T, U)
        return last, seq, states

    def _any_loop(self, sequences, initial_state, mask, training):
        if isinstance(mask, (list, tuple)):
            mask = mask[0]
        cell = self.cell
        # A stateful layer's states arrive as variables that autocast only inside this
        # call: as tensors, a hand-written gradient (run later) sees the compute dtype too.
        initial_state = [read(s) for s in initial_state]
        if self.stateful and keras.backend.backend() == "torch":
            # Keras writes a stateful layer's new states in place (copy_) after the call,
            # which would change tensors autograd saved for the backward pass: copy them.
            initial_state = [ops.copy(s) for s in initial_state]
        if training and cell.dropout > 0:
            # One mask per sequence, as in the per-step path (variational dropout).
            dp_mask = cell.get_dropout_mask(sequences[:, 0, :])  # (B, D)
            sequences = sequences * ops.expand_dims(dp_mask, 1)  # (B, T, D)
        # Weight drop: the recurrent kernel is masked here, once per batch, so that every
        # path (the cuDNN kernel included) runs the same dropped weights.
        params = cell.step_params(training=training)
        use_kernel, why_not = dispatch.decide(self, mask)
        self.last_path_reason = why_not or None
        if use_kernel:
            return self._cudnn_loop(sequences, initial_state, mask, params, training)
        return self._own_loop(sequences, initial_state, mask, params, training)

    def _cudnn_loop(self, sequences, initial_state, mask, params, training):
        """The backend's fused kernel; a run-time check sends a mask TensorFlow's kernel
        would refuse (not right-padded, or an empty row) to the loop instead."""
        if keras.backend.backend() == "tensorflow":
            self.supports_jit = False  # cuDNN ops don't compile under XLA (as Keras's LSTM)

        def kernel():
            return self.cell.cudnn_sequence(
                sequences, list(initial_state), mask, params,
                return_sequences=self.return_sequences, go_backwards=self.go_backwards)

        try:
            if mask is None:
                result = kernel()
                self.last_path = "cudnn"
                return result
            # lazy: loads TensorFlow only when this runs
            import tensorflow as tf  # only the TensorFlow backend reaches here with a mask

            def loop():
                return self._own_loop(sequences, initial_state, mask, params, training)

            result = tf.cond(dispatch.cudnn_mask_ok(mask), kernel, loop)
            self.last_path = "cudnn-or-loop"  # decided per batch by the mask
            return result
        except NotImplementedError as err:  # the backend declined (e.g. an old cuDNN)
            self.last_path_reason = (f"the {keras.backend.backend()} backend declined the "
                                     f"fused kernel: {err or 'no reason given'}")
            if self.use_cudnn is True:
                raise ValueError(
                    f"{self.name}: use_cudnn=True, but the {keras.backend.backend()} "
                    f"backend declined the fused kernel ({err or 'no reason given'}). Pass "
                    "use_cudnn='auto' to run the keras-seq loop instead."
                ) from err
            return self._own_loop(sequences, initial_state, mask, params, training)

    def _own_loop(self, sequences, initial_state, mask, params, training):
        cell = self.cell
        rec_mask = None
        if training and cell.recurrent_dropout > 0:
            rec_mask = cell.get_recurrent_dropout_mask(initial_state[0])  # (B, U)
        tensorflow = keras.backend.backend() == "tensorflow"
        if mask is None and rec_mask is None and not self.unroll and cell.supports_fused():
            self.last_path = "fused-loop"
            # Time-major before projecting: moving (B, T, D) is cheaper than (B, T, G·U).
            seq_t = ops.transpose(sequences, (1, 0, 2))  # (T, B, D)
            if self.go_backwards:
                seq_t = ops.flip(seq_t, 0)
            xs = cell.project_inputs(seq_t)  # (T, B, G·U), one matmul
            hs, states = cell.fused_sequence(xs, list(initial_state), params, bool(training))
            last = hs[-1]  # (B, U)
            seq = ops.transpose(hs, (1, 0, 2)) if self.return_sequences else last[:, None]
            return last, seq, list(states)
        self.last_path = "loop"
        x_proj = cell.project_inputs(sequences)  # (B, T, G·U), one matmul

        def step(x_t, states):
            return cell.recurrent_step(x_t, list(states), params, rec_mask)

        if tensorflow:
            # lazy: loads TensorFlow only when this runs
            from keras_seq.layers._fast_rnn import fast_rnn

            return fast_rnn(
                step, x_proj, list(initial_state), mask=mask,
                go_backwards=self.go_backwards, unroll=self.unroll,
                return_sequences=self.return_sequences,
                zero_output_for_mask=self.zero_output_for_mask,
            )
        # lazy: Keras is imported once the backend is chosen
        from keras.src import backend

        return backend.rnn(
            step, x_proj, list(initial_state), go_backwards=self.go_backwards, mask=mask,
            unroll=self.unroll, input_length=sequences.shape[1],
            return_all_outputs=self.return_sequences,
            zero_output_for_mask=self.zero_output_for_mask,
        )

    def call(self, sequences, initial_state=None, mask=None, training=False):
        return super().call(sequences, initial_state=initial_state, mask=mask, training=training)

    def get_config(self):
        config = super().get_config()
        del config["cell"]
        if getattr(self.cell, "cudnn_kind", None):
            config["use_cudnn"] = self.use_cudnn
        config["activity_regularizer"] = regularizers.serialize(self.activity_regularizer)
        return {**config, **self.cell.arg_config()}

    @classmethod
    def from_config(cls, config):
        return cls(**config)
