"""Decoding for :class:`~keras_seq.models.seq2seq.Seq2Seq`: greedy and beam search.

* :func:`greedy_decode` runs the whole loop in one ``tf.function`` (``tf.while_loop``)
  on the TensorFlow backend, batched, stopping when every row has produced ``<eos>``;
  the export reuses it (:func:`greedy_graph`). On other Keras backends the same loop
  runs in Python around a compiled encoder and decoder step (:func:`greedy_steps`).
* :func:`beam_search` keeps ``beam`` hypotheses per source row (the batch is decoded
  together, ``B·beam`` rows per step) and ranks finished ones by
  ``log p / len^length_penalty`` (``len`` counts ``<eos>``; 0 = raw log-probability,
  1 = average per token). An ``<eos>`` ends a hypothesis only when it ranks among the
  ``beam`` best candidates of its step; a row stops once no live hypothesis can beat its
  best finished one (or at ``max_len``). With ``beam=1`` it stops at the first ``<eos>``
  and returns exactly the greedy output.
* :func:`encode_sources` turns raw strings into padded ids with clear errors for empty
  or too long sources; :func:`translate` is strings in, strings out.

Token lists returned here never contain ``bos``/``eos`` or padding.
"""

from __future__ import annotations

import weakref

import numpy as np

from keras_seq.backend import compiled
from keras_seq.data.batching import pad_sequences
from keras_seq.errors import KerasSeqError

_GREEDY_FNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_STEP_FNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def greedy_graph(model, source_ids, max_len):
    """Greedy decoding as TensorFlow graph ops (call inside a ``tf.function``; TensorFlow
    backend).

    Args:
        model: a built :class:`Seq2Seq`.
        source_ids: int32 ``(B, S)``, right-padded with 0.
        max_len: int32 scalar, most tokens to produce (``<eos>`` included).

    Returns:
        ``(tokens, weights)``: int32 ``(B, T)`` — ``eos_id`` ends a row, 0 pads after it —
        and float ``(B, T, S)`` attention weights (zeros for a model without attention).
    """
    # lazy: loads TensorFlow only when this runs
    import tensorflow as tf

    memory, states = model.encode(source_ids)
    batch = tf.shape(source_ids)[0]
    src_len = tf.shape(source_ids)[1]
    eos = tf.constant(model.eos_id, tf.int32)
    prev = tf.fill([batch], tf.constant(model.bos_id, tf.int32))
    finished = tf.zeros([batch], tf.bool)
    tok_ta = tf.TensorArray(tf.int32, size=0, dynamic_size=True)
    w_ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

    def cond(t, prev, finished, tok_ta, w_ta, *states):
        return tf.logical_and(t < max_len, tf.logical_not(tf.reduce_all(finished)))

    def body(t, prev, finished, tok_ta, w_ta, *states):
        logits, new_states, weights = model.decode_step(prev, list(states), memory)
        token = tf.argmax(logits, axis=-1, output_type=tf.int32)  # (B,)
        token = tf.where(finished, tf.zeros_like(token), token)
        if weights is None:
            weights = tf.zeros([batch, src_len], tf.float32)
        tok_ta = tok_ta.write(t, token)
        w_ta = w_ta.write(t, tf.cast(weights, tf.float32))
        finished = tf.logical_or(finished, tf.equal(token, eos))
        return (t + 1, token, finished, tok_ta, w_ta, *new_states)

    out = tf.while_loop(cond, body, (tf.constant(0), prev, finished, tok_ta, w_ta, *states),
                        maximum_iterations=max_len)
    tokens = tf.transpose(out[3].stack(), [1, 0])  # (B, T)
    weights = tf.transpose(out[4].stack(), [1, 0, 2])  # (B, T, S)
    return tokens, weights


def _greedy_fn(model):
    """``(source_ids, max_len) -> (tokens, weights)`` as numpy, for the running backend."""
    fn = _GREEDY_FNS.get(model)
    if fn is None:
        # lazy: Keras is imported once the backend is chosen
        import keras

        if keras.backend.backend() == "tensorflow":
            # lazy: loads TensorFlow only when this runs
            import tensorflow as tf

            graph = tf.function(
                lambda ids, n: greedy_graph(model, ids, n),
                input_signature=[tf.TensorSpec([None, None], tf.int32),
                                 tf.TensorSpec([], tf.int32)],
            )

            def fn(ids, n):
                tokens, weights = graph(tf.constant(ids), tf.constant(n, tf.int32))
                return tokens.numpy(), weights.numpy()
        else:
            def fn(ids, n):
                return greedy_steps(model, ids, n)
        _GREEDY_FNS[model] = fn
    return fn


def _decode_fns(model):
    """Compiled ``encode(ids) -> (memory, states)`` and ``step(prev, states, memory) ->
    (logits, log_probs, new_states, weights)`` of ``model`` (numpy in and out)."""
    fns = _STEP_FNS.get(model)
    if fns is None:
        # lazy: Keras is imported once the backend is chosen
        from keras import ops

        def step(prev, states, memory):
            logits, new_states, weights = model.decode_step(prev, list(states), memory)
            logits = ops.cast(logits, "float32")
            return logits, ops.log_softmax(logits, axis=-1), tuple(new_states), weights

        fns = (compiled(model, lambda ids: model.encode(ids)), compiled(model, step))
        _STEP_FNS[model] = fns
    return fns


def greedy_steps(model, source_ids, max_len: int):
    """Greedy decoding step by step in Python: what :func:`greedy_graph` computes, for any
    Keras backend (the encoder and each decoder step are compiled).

    Returns ``(tokens (B, T), weights (B, T, S))`` as numpy, like :func:`greedy_graph`.
    """
    encode, step = _decode_fns(model)
    source_ids = np.asarray(source_ids, np.int32)
    batch, src_len = source_ids.shape
    memory, states = encode(source_ids)
    prev = np.full(batch, model.bos_id, np.int32)
    finished = np.zeros(batch, bool)
    tokens, weights = [], []
    while len(tokens) < max_len and not finished.all():
        logits, _, states, w = step(prev, tuple(states), memory)
        token = np.where(finished, 0, np.argmax(logits, axis=-1)).astype(np.int32)  # (B,)
        tokens.append(token)
        weights.append(np.zeros((batch, src_len), np.float32) if w is None
                       else np.asarray(w, np.float32))
        finished |= token == model.eos_id
        prev = token
    if not tokens:
        return np.zeros((batch, 0), np.int32), np.zeros((batch, 0, src_len), np.float32)
    return np.stack(tokens, axis=1), np.stack(weights, axis=1)


def strip_tokens(row, eos_id: int) -> list[int]:
    """The ids of one decoded row up to (not including) ``<eos>``, padding dropped."""
    out = []
    for tok in np.asarray(row).tolist():
        if tok == eos_id:
            break
        if tok != 0:
            out.append(int(tok))
    return out


def _progbar(total: int, show: bool):
    if not show:
        return None
    # lazy: Keras is imported once the backend is chosen
    import keras

    return keras.utils.Progbar(total, unit_name="source")


def greedy_decode(model, source_ids, max_len: int | None = None, batch_size: int = 256,
                  return_attention: bool = False, progress: bool = False):
    """Greedy decoding of a batch of padded sources.

    Returns a list of token lists (and, with ``return_attention``, a list of ``(T_i, S_i)``
    weight arrays cut to each row's output length incl. ``<eos>`` and source length).
    ``progress`` shows a Keras progress bar.
    """
    source_ids = np.asarray(source_ids, np.int32)
    max_len = int(max_len or model.max_target_len + 1)
    fn = _greedy_fn(model)
    tokens, attention = [], []
    bar = _progbar(len(source_ids), progress)
    for start in range(0, len(source_ids), batch_size):
        chunk = source_ids[start:start + batch_size]
        chunk = chunk[:, : max(1, int((chunk != 0).sum(1).max()))]  # drop all-pad columns
        toks, weights = fn(chunk, max_len)
        for i, row in enumerate(toks):
            ids = strip_tokens(row, model.eos_id)
            tokens.append(ids)
            if return_attention:
                steps = min(len(ids) + 1, weights.shape[1])
                attention.append(weights[i, :steps, : int((chunk[i] != 0).sum())])
        if bar is not None:
            bar.update(len(tokens))
    return (tokens, attention) if return_attention else tokens


def beam_search(model, source_ids, beam: int = 4, length_penalty: float = 1.0,
                max_len: int | None = None, batch_size: int = 64, return_scores: bool = False,
                progress: bool = False):
    """Beam search over a batch of padded sources.

    Args:
        model: a built :class:`Seq2Seq`.
        source_ids: int ``(B, S)``, right-padded with 0.
        beam: hypotheses kept per source (``1`` equals greedy decoding).
        length_penalty: ``α`` in ``score = log p / len^α``; 0 prefers short outputs as raw
            log-probabilities do, 1 ranks by the average log-probability per token.
        max_len: most tokens per output, ``<eos>`` included (default: the model's
            ``max_target_len + 1``).
        batch_size: sources decoded together (each takes ``beam`` rows).
        progress: show a Keras progress bar.

    Returns:
        A list of token lists (best hypothesis per source); with ``return_scores`` also
        their normalised scores.
    """
    if not isinstance(beam, int) or beam < 1:
        raise KerasSeqError(f"beam width must be a positive integer, got {beam!r}; "
                            "use 1 for greedy decoding")
    source_ids = np.asarray(source_ids, np.int32)
    max_len = int(max_len or model.max_target_len + 1)
    results, scores = [], []
    bar = _progbar(len(source_ids), progress)
    for start in range(0, len(source_ids), batch_size):
        chunk = source_ids[start:start + batch_size]
        chunk = chunk[:, : max(1, int((chunk != 0).sum(1).max()))]
        toks, sc = _beam_batch(model, chunk, beam, length_penalty, max_len)
        results += toks
        scores += sc
        if bar is not None:
            bar.update(len(results))
    return (results, scores) if return_scores else results


def _norm(score: float, length: int, alpha: float) -> float:
    return score / (max(length, 1) ** alpha) if alpha else score


def _settled(finished, alive_scores, max_len: int, alpha: float) -> bool:
    """Whether no live hypothesis can still beat the best finished one.

    Log-probabilities only fall as a hypothesis grows, so a live score ``s < 0`` ends at
    most at ``s / max_len^α`` after normalisation (``s`` itself for ``α = 0``).
    """
    best_done = max(score for score, _ in finished)
    bound = float(np.max(alive_scores)) / (max_len ** alpha if alpha else 1.0)
    return best_done >= bound


def _beam_batch(model, source_ids, K, alpha, max_len):
    B = len(source_ids)
    encode, step = _decode_fns(model)
    memory, states = encode(np.asarray(source_ids, np.int32))
    memory = {k: np.repeat(v, K, axis=0) for k, v in memory.items() if v is not None}
    states = tuple(np.repeat(s, K, axis=0) for s in states)
    eos, V = model.eos_id, model.output_vocab
    alive_scores = np.full((B, K), -np.inf)
    alive_scores[:, 0] = 0.0  # one live hypothesis to start with
    alive_tokens = np.zeros((B, K, 0), np.int64)
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(B)]
    done = np.zeros(B, bool)
    prev = np.full(B * K, model.bos_id, np.int32)
    for _ in range(max_len):
        _, logp, states, _ = step(prev, states, memory)
        cand = alive_scores[:, :, None] + logp.reshape(B, K, V).astype(np.float64)
        flat = cand.reshape(B, K * V)
        top = np.argsort(-flat, axis=1, kind="stable")[:, : 2 * K]
        origin = np.zeros((B, K), np.int64)
        new_tok = np.zeros((B, K), np.int64)
        new_scores = np.full((B, K), -np.inf)
        for b in range(B):
            if done[b]:
                continue
            n_alive = 0
            for rank, idx in enumerate(top[b]):
                score = flat[b, idx]
                if not np.isfinite(score):
                    break
                k, v = divmod(int(idx), V)
                if v == eos:
                    # Only an <eos> that ranks among the K best candidates ends a hypothesis;
                    # otherwise improbable early stops would fill the finished pool.
                    if rank < K:
                        hyp = alive_tokens[b, k].tolist()
                        finished[b].append((_norm(score, len(hyp) + 1, alpha), hyp))
                else:
                    origin[b, n_alive], new_tok[b, n_alive] = k, v
                    new_scores[b, n_alive] = score
                    n_alive += 1
                if n_alive == K:
                    break
            if n_alive == 0 or (finished[b] and (K == 1 or _settled(
                    finished[b], new_scores[b, :n_alive], max_len, alpha))):
                done[b] = True
        if done.all():
            break
        alive_scores = new_scores
        alive_tokens = np.concatenate(
            [np.take_along_axis(alive_tokens, origin[:, :, None], axis=1), new_tok[:, :, None]],
            axis=2)
        gather = (np.arange(B)[:, None] * K + origin).reshape(-1)
        states = tuple(s[gather] for s in states)
        prev = new_tok.reshape(-1).astype(np.int32)
    best_tokens, best_scores = [], []
    for b in range(B):
        pool = finished[b]
        if not pool:  # nothing reached <eos> within max_len: take the best live hypothesis
            pool = [(_norm(alive_scores[b, k], alive_tokens.shape[2], alpha),
                     alive_tokens[b, k].tolist()) for k in range(K)
                    if np.isfinite(alive_scores[b, k])]
        score, hyp = max(pool, key=lambda p: p[0])
        best_tokens.append([int(x) for x in hyp])
        best_scores.append(float(score))
    return best_tokens, best_scores


# ----------------------------------------------------------------------------------------
# Strings in, strings out


def encode_sources(tokenizer, texts, max_source_len: int, on_unknown=None) -> np.ndarray:
    """Padded ``(N, S)`` source ids of ``texts`` with the errors users need to see.

    Raises:
        KerasSeqError: an empty source, or one longer than ``max_source_len`` tokens.

    Characters/words outside the vocabulary become ``<unk>``; ``on_unknown(i, count)`` is
    called for each text that has some.
    """
    rows = []
    for i, text in enumerate(texts):
        text = " ".join(str(text).split("\n")).strip()
        ids = tokenizer.encode(text) if text else np.array([], np.int32)
        if len(ids) == 0:
            raise KerasSeqError(
                f"source {i} is empty ({texts[i]!r}); expected at least one "
                f"{'character' if tokenizer.kind == 'char' else 'token'}"
            )
        if len(ids) > max_source_len:
            raise KerasSeqError(
                f"source {i} has {len(ids)} {tokenizer.kind} tokens, more than this model's "
                f"maximum of {max_source_len}; shorten it (or split it) to at most "
                f"{max_source_len} tokens"
            )
        unknown = int((ids == tokenizer.unk_id).sum())
        if unknown and on_unknown is not None:
            on_unknown(i, unknown)
        rows.append(ids)
    return pad_sequences(rows, pad_id=0)[0]


def decode_targets(tokenizer, token_lists) -> list[str]:
    """Target-tokenizer text of each token list (ids ≥ the vocabulary are dropped)."""
    vocab = tokenizer.vocab_size
    drop = {0, tokenizer.eos_id}  # padding, and a line-break token inside one output
    return [tokenizer.decode([t for t in toks if t < vocab and t not in drop])
            for toks in token_lists]


def translate(model, source_tokenizer, target_tokenizer, texts, beam: int = 1,
              length_penalty: float = 1.0, on_unknown=None) -> list[str]:
    """Translate raw strings (greedy with ``beam=1``, else beam search)."""
    ids = encode_sources(source_tokenizer, texts, model.max_source_len, on_unknown=on_unknown)
    if beam == 1:
        tokens = greedy_decode(model, ids)
    else:
        tokens = beam_search(model, ids, beam=beam, length_penalty=length_penalty)
    return decode_targets(target_tokenizer, tokens)
