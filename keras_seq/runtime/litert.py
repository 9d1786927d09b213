"""Stream tokens through an exported ``.tflite`` language model with LiteRT — no TensorFlow.

This is the on-device path: ``ai_edge_litert``, numpy, the tokenizer JSON and the numpy
samplers of :mod:`keras_seq.sampling`. Nothing here (or in what it imports) imports
``tensorflow``; a test runs it in a subprocess and checks ``sys.modules``.

Example::

    lm = LiteRTLM("demo/step_dynamic.tflite")        # tokenizer.json + metadata next to it
    lm.feed_text("the module")                       # advance the state over the prompt
    lm.suggest(3)                                    # [("is", 0.12), ...]
    ids, micros = lm.generate("import the", 20, TopKSampler(10), seed=0)

Loading reads the ``.tflite`` once and checks those bytes before the interpreter sees
them: :func:`~keras_seq.runtime.flatbuffer_check.check_tflite` refuses a truncated or
corrupt file (LiteRT would segfault on some), then the metadata written by
:mod:`keras_seq.export.tflite` (``model.json`` next to ``model.tflite``) must match: its
hash (so another model's file is refused), its operators, signature, inputs and outputs
(names, shapes, types), and the tokenizer's fingerprint. The interpreter gets exactly the
checked bytes; its own errors, and NaN or infinite outputs at any step, are raised as
:class:`~keras_seq.errors.KerasSeqError` naming the file.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from keras_seq.data.tokenizers import EOS, load_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.runtime.flatbuffer_check import check_tflite, read_model_file
from keras_seq.runtime.metadata import read_metadata
from keras_seq.sampling import Sampler, TopKSampler, special_ids, without_ids


def _first_line(err: Exception) -> str:
    """The first line of an interpreter error (LiteRT's run on, node after node)."""
    text = str(err).strip()
    return text.splitlines()[0][:300].rstrip(".") if text else type(err).__name__


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64) - logits.max()
    e = np.exp(z)
    return e / e.sum()


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64) - logits.max()
    return z - np.log(np.exp(z).sum())


def largest(values: np.ndarray, k: int, skip: set, erased) -> list[tuple[int, float]]:
    """``(index, value)`` of the ``k`` largest ``values`` whose index is not in ``skip``,
    largest first, ties to the lower index (``argmax`` returns the first), from at most
    ``k + len(skip)`` ``argmax`` passes instead of a sort: each one taken is set to
    ``erased`` (below every value) for the next pass, and all are restored after.

    >>> [(i, float(v)) for i, v in largest(np.array([0.1, 0.5, 0.5, 0.2]), 2, {1}, -1.0)]
    [(2, 0.5), (3, 0.2)]
    """
    out, taken = [], []
    try:
        while len(out) < k and len(taken) < len(values):
            i = int(values.argmax())
            taken.append((i, values[i]))
            values[i] = erased  # restored below
            if i not in skip:
                out.append(taken[-1])
    finally:
        for i, value in taken:
            values[i] = value
    return out


class LiteRTLM:
    """A streaming next-token model on the LiteRT interpreter.

    Args:
        model_path: an exported ``step`` or ``step_fused`` ``.tflite`` (``sequence`` models
            load too, for :meth:`score_ids`).
        tokenizer: a tokenizer object or path; default: the ``tokenizer.json`` named by the
            metadata, next to the model. A model exported without a tokenizer runs on
            token ids (:meth:`step`, :meth:`feed_ids`, :meth:`score_ids`); its text
            methods need one passed here.
        num_threads: interpreter threads (LiteRT's default is 1).
        xnnpack: apply LiteRT's default XNNPACK delegate (``False``: builtin kernels only,
            to see which ops XNNPACK accelerates).
        zero_copy: stream a step model through numpy views of its input and output buffers
            (:class:`_StepBuffers`) instead of ``set_tensor``/``get_tensor`` copies: the
            same numbers, ~4 µs less per token. ``states`` are then live views (copy one to
            keep it), and ``interpreter.invoke()`` refuses to run while they exist: step
            with :meth:`step`. ``False``, and any model with a dynamic shape: the copies.

    Example (a model exported by keras-seq; an untrained one here):

    >>> import tempfile, keras
    >>> from keras_seq.data import make_tokenizer
    >>> from keras_seq.export import export_tflite
    >>> from keras_seq.layers import LSTM
    >>> tokenizer = make_tokenizer("word").fit("the cat sat on the mat\\n" * 3)
    >>> V = tokenizer.vocab_size
    >>> model = keras.Sequential([keras.Input((None,), dtype="int32"),
    ...                           keras.layers.Embedding(V, 4), LSTM(6, return_sequences=True),
    ...                           keras.layers.Dense(V)])
    >>> out = tempfile.mkdtemp()
    >>> _ = export_tflite(model, out, variants=["dynamic"], graphs=["step"],
    ...                   tokenizer=tokenizer, check_parity=False, printer=lambda *a: None)
    >>> lm = LiteRTLM(f"{out}/step_dynamic.tflite")   # its metadata and tokenizer.json beside
    >>> micros = lm.feed_text("the cat")              # the start token, then the prompt
    >>> len(lm.history), len(lm.suggest(2)), lm.step(3).shape
    (3, 2, (8,))
    """

    def __init__(self, model_path: str | Path, tokenizer=None, num_threads: int = 1,
                 xnnpack: bool = True, zero_copy: bool = True):
        # lazy: loads LiteRT only when this runs
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        self.path = Path(model_path)
        # Read the file once, check its structure in Python, then hand LiteRT exactly the
        # bytes that were checked and hashed: a corrupt file never reaches the interpreter.
        data = read_model_file(self.path)
        summary = check_tflite(data, self.path.name)
        self.meta = read_metadata(self.path, data)
        self.tokenizer = self._load_tokenizer(tokenizer)
        self._prefix_ids: dict[str, np.ndarray] = {}  # typed prefix → ids it allows
        self.graph = self.meta["graph"]
        self.state_names = list(self.meta.get("state_names", []))
        self.vocab_size = int(self.meta["vocab_size"])
        signature = self.meta["signature"]
        self._check_against_metadata(summary, signature)
        kwargs = {}
        if not xnnpack or "WHILE" in self.meta.get("ops", []):
            # XNNPACK cannot reshape the tensors inside a WHILE body ("failed to reshape
            # runtime"): run such models on the builtin kernels.
            kwargs["experimental_op_resolver_type"] = \
                OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        try:
            self.interpreter = Interpreter(model_content=data, num_threads=num_threads,
                                           **kwargs)
            self.interpreter.allocate_tensors()
            runner = self.interpreter.get_signature_runner(signature)
            inputs, outputs = runner.get_input_details(), runner.get_output_details()
        except (RuntimeError, ValueError) as err:
            raise KerasSeqError(
                f"LiteRT cannot load {self.path.name}: {_first_line(err)}. The file passed "
                "keras-seq's checks but is damaged or was written for another runtime; "
                "re-export it with `keras-seq export tflite`") from None
        del runner
        self._check_io(inputs, outputs)
        self._in = {k: int(d["index"]) for k, d in inputs.items()}
        self._out = {k: int(d["index"]) for k, d in outputs.items()}
        self._in_shape = {k: tuple(int(x) for x in d["shape"]) for k, d in inputs.items()}
        self._token = np.zeros(1, np.int32)  # the step's input, reused token after token
        self._buffers = _StepBuffers.of(self, inputs, outputs) if zero_copy else None
        self.reset()

    # -- loading ----------------------------------------------------------------------
    def _check_against_metadata(self, summary, signature: str) -> None:
        """The metadata's operators, signature, inputs and outputs must be the file's (read
        from the checked flatbuffer, before the interpreter sees it)."""
        ops = self.meta.get("ops")
        if ops is not None and sorted(ops) != summary.ops:
            raise KerasSeqError(
                f"{self.path.name} runs operators {summary.ops}, its metadata lists "
                f"{sorted(ops)}: the file was damaged after export, or the .json belongs to "
                "another model. Re-export it with `keras-seq export tflite`")
        signatures = summary.signatures
        if signature not in signatures:
            raise KerasSeqError(
                f"{self.path.name} has signatures {sorted(signatures)}, its metadata expects "
                f"{signature!r}; the .tflite and .json come from different exports")
        listed = signatures[signature]
        if sorted(listed["inputs"]) != sorted(self.meta["inputs"]) or \
                sorted(listed["outputs"]) != sorted(self.meta["outputs"]):
            raise KerasSeqError(
                f"{self.path.name}: signature inputs {listed['inputs']} / outputs "
                f"{listed['outputs']} differ from the metadata's {self.meta['inputs']} / "
                f"{self.meta['outputs']}; re-export the model")

    def _check_io(self, inputs: dict, outputs: dict) -> None:
        """Shapes and types of the signature's tensors must be the ones the metadata
        describes (a damaged shape would fail later, on the first token)."""
        batch, length = int(self.meta.get("batch", 1)), int(self.meta.get("length", 1))
        step = self.graph.startswith("step")
        lead = (batch,) if step else (batch, length)
        states = {n: (tuple(shape), np.float32)
                  for n, shape in self.meta.get("state_shapes", {}).items()}
        wanted_in = {**states, ("token" if step else "tokens"): (lead, np.int32)}
        wanted_out = {**states, "logits": (lead + (self.vocab_size,), np.float32),
                      "scores": (lead + (len(self.meta.get("labels", [])),), np.float32)}
        for side, details, wanted in (("input", inputs, wanted_in),
                                      ("output", outputs, wanted_out)):
            for name, detail in details.items():
                if name not in wanted:
                    continue
                shape, dtype = tuple(int(x) for x in detail["shape"]), np.dtype(detail["dtype"])
                if (shape, dtype) != (wanted[name][0], np.dtype(wanted[name][1])):
                    raise KerasSeqError(
                        f"{self.path.name}: {side} {name!r} is {dtype.name} {list(shape)}, the "
                        f"metadata describes {np.dtype(wanted[name][1]).name} "
                        f"{list(wanted[name][0])}: the file is damaged or the .json belongs "
                        "to another model. Re-export it with `keras-seq export tflite`")

    def _load_tokenizer(self, tokenizer):
        """The tokenizer, checked against the model's; None for a model exported without
        one (it runs on token ids: :meth:`step`, :meth:`score_ids`, :meth:`feed_ids`)."""
        expected = self.meta.get("tokenizer_fingerprint")
        if tokenizer is None and expected is None and self.meta.get("tokenizer_file") is None:
            return None
        if tokenizer is None or isinstance(tokenizer, (str, Path)):
            path = Path(tokenizer) if tokenizer is not None else \
                self.path.parent / self.meta.get("tokenizer_file", "tokenizer.json")
            tokenizer = load_tokenizer(path)
        if tokenizer.kind == "subword":
            raise KerasSeqError(
                "the LiteRT runtime reads word and char tokenizers without TensorFlow; a "
                "subword (WordPiece) tokenizer needs tensorflow-text. Export a word or char "
                "model for on-device use")
        if expected is None:  # exported on ids: any tokenizer of the same vocabulary size
            if tokenizer.vocab_size != int(self.meta["vocab_size"]):
                raise KerasSeqError(
                    f"the tokenizer has {tokenizer.vocab_size} tokens, the model "
                    f"{self.meta['vocab_size']}: the ids would mean different tokens")
        elif tokenizer.fingerprint != expected:
            raise KerasSeqError(
                f"tokenizer fingerprint {tokenizer.fingerprint} does not match the model's "
                f"{expected}: the ids would mean different tokens. Use the tokenizer.json "
                "exported with this model")
        return tokenizer

    def _text_tokenizer(self, what: str):
        """The tokenizer, or an error saying that ``what`` needs one."""
        if self.tokenizer is None:
            raise KerasSeqError(
                f"{self.path.name} was exported without a tokenizer, so it runs on token ids "
                f"only; {what} needs one: pass tokenizer= (a keras-seq tokenizer or its "
                "tokenizer.json) to LiteRTLM, or export with tokenizer=")
        return self.tokenizer

    # -- streaming ------------------------------------------------------------------------
    def reset(self) -> None:
        """Start a new stream: zero state (explicit) or ``reset_all_variables`` (fused)."""
        if self._buffers is not None:
            self.states = self._buffers.state_in  # the next step's state inputs, in place
            for view in self.states.values():
                view.fill(0.0)
        else:
            self.states = {n: np.zeros(self._in_shape[n], np.float32)
                           for n in self.state_names}
        self.interpreter.reset_all_variables()
        self.logits: np.ndarray | None = None
        self.history: list[int] = []

    def step(self, token_id: int) -> np.ndarray:
        """Feed one token id; returns the next-token logits ``(V,)`` (float32)."""
        if self.graph not in ("step", "step_fused"):
            raise KerasSeqError(f"{self.path.name} is a {self.graph} model; streaming needs a "
                                "step model (step_*.tflite)")
        self.logits = self._run_step(token_id, "logits")
        return self.logits

    def _run_step(self, token_id: int, output: str) -> np.ndarray:
        """Feed one token id through the step graph, carrying the state; returns row 0 of
        the ``output`` tensor (our own copy). With :class:`_StepBuffers` the token and
        states move through views of the tensors, else through ``set_tensor``/``get_tensor``."""
        if not 0 <= token_id < self.vocab_size:
            raise KerasSeqError(f"token id {token_id} is outside the vocabulary "
                                f"(size {self.vocab_size})")
        interp, buffers = self.interpreter, self._buffers
        if buffers is not None:
            buffers.token[0] = token_id
            self._invoke()
            for name in self.state_names:  # this step's state is the next one's input
                np.copyto(buffers.state_in[name], buffers.state_out[name])
            row = buffers.outputs[output][0].copy()
        else:
            self._token[0] = token_id
            interp.set_tensor(self._in["token"], self._token)
            for name in self.state_names:
                interp.set_tensor(self._in[name], self.states[name])
            self._invoke()
            for name in self.state_names:
                self.states[name] = interp.get_tensor(self._out[name])
            row = interp.get_tensor(self._out[output])[0]
        self.history.append(int(token_id))
        return self._finite(row, output)

    def _invoke(self) -> None:
        try:
            if self._buffers is not None:
                # The wrapper's invoke() refuses to run while numpy views of the
                # interpreter's buffers exist, in case a tensor is reallocated under them.
                # _StepBuffers.of only holds views of a graph whose shapes are all static,
                # whose buffers stay where allocate_tensors() put them: run the C++ Invoke.
                self.interpreter._interpreter.Invoke()
            else:
                self.interpreter.invoke()
        except RuntimeError as err:
            raise KerasSeqError(f"LiteRT failed to run {self.path.name}: {_first_line(err)}; "
                                "re-export the model with `keras-seq export tflite`") from None

    def _finite(self, values: np.ndarray, output: str) -> np.ndarray:
        """``values``, after checking the model did not produce NaN or infinity (what a
        damaged weight does, silently, to every later step). One dot product decides for
        finite values (2.0 µs against 5.8 for ``isfinite().all()`` over 6,476 logits); NaN,
        infinity or an overflowing square fall through to the exact check."""
        flat = values.reshape(-1)
        if math.isfinite(flat.dot(flat)):
            return values
        if not np.isfinite(values).all():
            raise KerasSeqError(
                f"{self.path.name} produced {np.isnan(values).sum()} NaN and "
                f"{np.isinf(values).sum()} infinite {output} values: its weights are damaged "
                "or overflow. Re-export the model with `keras-seq export tflite` (a float32 "
                "variant if a quantized one overflows)")
        return values

    def start_id(self) -> int:
        """The id a stream starts from: ``<eos>`` (a line boundary) or ``"\\n"`` for char."""
        tok = self._text_tokenizer("the start of a text stream")
        if tok.eos_id is not None:
            return tok.eos_id
        ids = tok.encode("\n")
        return int(ids[0]) if len(ids) else tok.unk_id

    def encode_prompt(self, text: str) -> np.ndarray:
        """Ids of a prompt; an empty or all-unknown prompt is an error."""
        if text is None or not str(text).strip():
            raise KerasSeqError("the prompt is empty; type at least one word (or character) "
                                "for the model to continue")
        self._text_tokenizer("a text prompt")
        ids = self.tokenizer.encode(text)
        if self.tokenizer.kind == "word" and len(ids) and ids[-1] == self.tokenizer.eos_id \
                and not text.endswith("\n"):
            ids = ids[:-1]
        if len(ids) == 0 or (ids == self.tokenizer.unk_id).all():
            raise KerasSeqError(
                f"the prompt {text!r} has only unknown tokens for this {self.tokenizer.kind} "
                "vocabulary; use words the model was trained on")
        return ids

    def feed_ids(self, ids) -> list[float]:
        """Feed ids one by one (starting a stream with its start token first if none is
        running and the model has a tokenizer; without one, the ids are the whole stream).

        Returns the latency of each step in microseconds.
        """
        if not self.history and self.tokenizer is not None:
            self.step(self.start_id())
        micros = []
        for token in ids:
            t0 = time.perf_counter_ns()
            self.step(int(token))
            micros.append((time.perf_counter_ns() - t0) / 1e3)
        return micros

    def feed_text(self, text: str) -> list[float]:
        return self.feed_ids(self.encode_prompt(text))

    def suggest(self, k: int = 3, prefix: str = "") -> list[tuple[str, float]]:
        """The ``k`` most likely next tokens (optionally starting with ``prefix``)."""
        self._text_tokenizer("suggesting words")
        if self.logits is None:
            self.step(self.start_id())
        skip = {self.tokenizer.pad_id, self.tokenizer.unk_id}
        if not prefix:
            return self._top_k(k, skip)
        ids = self._ids_starting_with(prefix, skip)
        order = ids[np.argsort(-self.logits[ids], kind="stable")[:k]]  # ties: the lower id
        top, total = self._normaliser()
        vocab = self.tokenizer.vocab
        return [(vocab[i], float(np.exp(self.logits[i] - top)) / total) for i in order]

    def _normaliser(self) -> tuple[float, float]:
        """``(max, Σ exp(logits − max))`` in one float32 pass: the softmax of one logit is
        ``exp(logit − max) / Σ``."""
        top = self.logits.max()
        return top, float(np.exp(self.logits - top).sum())

    def _ids_starting_with(self, prefix: str, skip: set) -> np.ndarray:
        """The ids whose entry starts with ``prefix`` (``skip`` left out), increasing; cached
        per prefix, each found among the ids of the prefix one character shorter."""
        cache = self._prefix_ids
        if prefix not in cache:
            vocab = self.tokenizer.vocab
            if prefix == "":
                ids = np.array([i for i in range(len(vocab)) if i not in skip], dtype=np.int64)
            else:
                shorter = self._ids_starting_with(prefix[:-1], skip)
                ids = np.array([i for i in shorter if vocab[i].startswith(prefix)],
                               dtype=np.int64)
            if len(cache) >= 4096:
                cache.clear()
            cache[prefix] = ids
        return cache[prefix]

    def _top_k(self, k: int, skip: set) -> list[tuple[str, float]]:
        """:meth:`suggest` without a prefix, in a few O(V) passes instead of a sort: the same
        words in the same order as sorting the whole softmax (largest first, ties by the
        lower id: ``argmax`` returns the first), from at most ``k + len(skip)`` ``argmax``
        calls; the probabilities from one float32 pass for the softmax's normaliser."""
        top, total = self._normaliser()
        vocab = self.tokenizer.vocab
        return [(vocab[i], float(np.exp(value - top)) / total)
                for i, value in largest(self.logits, k, skip, -np.inf)]

    def generate(self, prompt: str, max_tokens: int, sampler: Sampler | None = None,
                 seed: int | None = None, on_token=None) -> tuple[list[int], list[float]]:
        """Sample ``max_tokens`` ids after ``prompt`` (a new stream).

        ``on_token(id, micros)`` is called as each token arrives. Returns
        ``(ids, per-token latency in µs)`` (the latency of the step that consumed the token).
        """
        if max_tokens < 1:
            raise KerasSeqError(f"max_tokens must be ≥ 1, got {max_tokens}")
        ids = self.encode_prompt(prompt)
        self.reset()
        self.feed_ids(ids)
        return self.continue_(max_tokens, sampler, seed, on_token)

    def continue_(self, max_tokens: int, sampler: Sampler | None = None,
                  seed: int | None = None, on_token=None) -> tuple[list[int], list[float]]:
        """Sample ``max_tokens`` more ids from the current state."""
        self._text_tokenizer("sampling text")
        sampler = sampler or TopKSampler(10)
        rng = np.random.default_rng(seed)
        if self.logits is None:
            self.step(self.start_id())
        banned = special_ids(self.tokenizer)  # never <pad> or <unk>
        out, micros = [], []
        for _ in range(max_tokens):
            token = sampler(without_ids(self.logits, banned), rng)
            t0 = time.perf_counter_ns()
            self.step(token)
            micros.append((time.perf_counter_ns() - t0) / 1e3)
            out.append(token)
            if on_token is not None:
                on_token(token, micros[-1])
        return out, micros

    def score_ids(self, ids) -> np.ndarray:
        """Natural-log probability of every next token of ``ids`` (a new stream, from zero
        state): ``(len(ids) − 1,)``."""
        ids = np.asarray(ids, np.int32)
        if len(ids) < 2:
            raise KerasSeqError(f"need at least 2 tokens to score, got {len(ids)}")
        self.reset()
        if self.graph in ("step", "step_fused"):
            out = np.empty(len(ids) - 1)
            for t in range(len(ids) - 1):
                out[t] = _log_softmax(self.step(int(ids[t])))[ids[t + 1]]
            return out
        return self._score_windows(ids)

    def _score_windows(self, ids: np.ndarray) -> np.ndarray:
        batch, length = self._in_shape["tokens"]
        if batch != 1:
            raise KerasSeqError(f"window scoring streams one sequence; this model has batch "
                                f"{batch}")
        interp, x, y = self.interpreter, ids[:-1], ids[1:]
        out = []
        for start in range(0, len(x), length):
            window = np.zeros((1, length), np.int32)
            chunk = x[start:start + length]
            window[0, :len(chunk)] = chunk
            interp.set_tensor(self._in["tokens"], window)
            for name in self.state_names:
                interp.set_tensor(self._in[name], self.states[name])
            self._invoke()
            for name in self.state_names:
                self.states[name] = interp.get_tensor(self._out[name])
            logits = self._finite(interp.get_tensor(self._out["logits"])[0, :len(chunk)],
                                  "logits")
            z = logits.astype(np.float64)
            z = z - z.max(-1, keepdims=True)
            logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
            out.append(logp[np.arange(len(chunk)), y[start:start + len(chunk)]])
        return np.concatenate(out)

    # -- text ---------------------------------------------------------------------------
    def token_text(self, token_id: int) -> str:
        """How a generated token is printed after the previous one."""
        tok = self.tokenizer.vocab[token_id]
        if self.tokenizer.kind == "char":
            return tok
        if tok == EOS:
            return "\n"
        previous = self.history[-2] if len(self.history) >= 2 else None
        if previous is None or previous == self.tokenizer.eos_id:
            return tok  # the first word of a line: no leading space
        return " " + tok


class _StepBuffers:
    """Numpy views of a step model's input and output tensors, held for the model's life,
    so a step writes the token and copies the states in place (LiteRT's ``set_tensor`` and
    ``get_tensor`` cost 1.4–2.5 µs each, seven of them a token).

    ``token`` (the ``(1,)`` int32 input), ``state_in`` / ``state_out`` (``{name: view}``),
    ``outputs`` (``{name: view}`` of the other outputs). :meth:`of` builds them only where
    that is safe; otherwise it returns ``None`` and the model uses the copies.
    """

    def __init__(self, interpreter, token_index: int, state_in: dict, state_out: dict,
                 outputs: dict):
        def view(index):
            return interpreter.tensor(index)()

        self.token = view(token_index)
        self.state_in = {n: view(i) for n, i in state_in.items()}
        self.state_out = {n: view(i) for n, i in state_out.items()}
        self.outputs = {n: view(i) for n, i in outputs.items()}

    @classmethod
    def of(cls, lm: LiteRTLM, inputs: dict, outputs: dict) -> _StepBuffers | None:
        """The buffers of ``lm``'s step graph, or ``None`` for a sequence graph, a graph
        with control flow (``WHILE``) or any input or output whose shape is not fixed (the
        interpreter may reallocate those), or a LiteRT without the raw ``Invoke``."""
        details = [*inputs.values(), *outputs.values()]
        static = all(list(d.get("shape_signature", d["shape"])) == list(d["shape"])
                     for d in details)
        if (lm.graph not in ("step", "step_fused") or "token" not in inputs or not static
                or "WHILE" in lm.meta.get("ops", [])
                or not hasattr(getattr(lm.interpreter, "_interpreter", None), "Invoke")):
            return None
        names = lm.state_names
        return cls(lm.interpreter, lm._in["token"], {n: lm._in[n] for n in names},
                   {n: lm._out[n] for n in names},
                   {n: i for n, i in lm._out.items() if n not in names})
