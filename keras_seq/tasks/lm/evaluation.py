"""Evaluate, load and sample language-model runs (no trainer import: exporters use this).

:func:`evaluate_stream` scores every next token of a token stream with a batch-1 stateful
copy of the model, carrying the state across windows; :func:`generate_tokens` samples.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from keras_seq import runs
from keras_seq.backend import compiled, to_numpy
from keras_seq.data.prepared import PreparedCorpus
from keras_seq.data.tokenizers import EOS, load_tokenizer
from keras_seq.errors import KerasSeqError
from keras_seq.keyboard import KeyboardScorer, word_stream
from keras_seq.layers.state import reset_recurrent_states
from keras_seq.metrics import PerplexityResult
from keras_seq.models import loading
from keras_seq.models.nplm import NPLM
from keras_seq.models.rnn_lm import RecurrentLM
from keras_seq.sampling import Sampler, TopKSampler, special_ids, without_ids
from keras_seq.tasks.lm.config import LMConfig
from keras_seq.tasks.lm.data import corpus_for, has_text, nplm_windows, split_ids


def check_run_dir(run_dir: str | Path) -> Path:
    """The run directory, after checking it holds a `keras-seq train lm` run."""
    return runs.check_run_dir(run_dir, "lm")


def load_run(run_dir: str | Path):
    """``(config, tokenizer, model)`` of a finished or interrupted run (best checkpoint)."""
    run_dir = check_run_dir(run_dir)
    config = LMConfig.load(run_dir / runs.CONFIG)
    tokenizer = load_tokenizer(run_dir)
    return config, tokenizer, loading.load_model(run_dir)


def fingerprint(tokenizer, corpus, split: str) -> dict:
    return {"tokenizer": tokenizer.fingerprint, "split": split, "corpus_sha256": corpus.sha256,
            "corpus": corpus.name, "split_ratio": corpus.split_spec}


def _target_log_probs(logits, targets):
    """``log softmax(logits)`` at ``targets`` (float32): ``(…, V)``, ``(…)`` → ``(…)``."""
    # lazy: Keras is imported once the backend is chosen
    from keras import ops

    logp = ops.log_softmax(ops.cast(logits, "float32"), axis=-1)
    return ops.take_along_axis(logp, ops.expand_dims(ops.cast(targets, "int32"), -1),
                               axis=-1)[..., 0]


def evaluate_windows(model: NPLM, ids, batch_size: int = 512) -> tuple[np.ndarray, int]:
    """Log-probabilities of every next token of ``ids`` under a fixed-window NPLM (the
    same ``len(ids) − 1`` targets :func:`evaluate_stream` scores)."""
    ids = np.asarray(ids, dtype=np.int32)
    if len(ids) < 2:
        raise KerasSeqError(f"need at least 2 tokens to evaluate, got {len(ids)}")
    windows, targets = nplm_windows(ids, model.order - 1), ids[1:]
    log_probs = compiled(model, lambda x, y: _target_log_probs(model(x, training=False), y))
    out = [log_probs(windows[i:i + batch_size], targets[i:i + batch_size])
           for i in range(0, len(targets), batch_size)]
    log_probs_all = np.concatenate(out)
    return log_probs_all, len(log_probs_all)


#: tokens per call of the batch-1 scorer: the state is carried from window to window, so
#: the length changes nothing but the number of calls (windows of bptt = 10 made scoring
#: the 11k tokens of a split take 4.7 s; windows of 256, 0.3 s)
EVAL_WINDOW = 256


def evaluate_stream(model: RecurrentLM, ids, window: int = EVAL_WINDOW) -> tuple[np.ndarray, int]:
    """Log-probabilities of every next token of ``ids``, carrying state through the stream.

    Runs a batch-1 stateful copy of ``model`` over windows of ``window`` tokens, the last
    window possibly shorter, so all ``len(ids) − 1`` predictions are scored; the state
    is carried across windows, so the scores do not depend on ``window``.

    Returns:
        ``(log_probs, n)``: natural-log probabilities ``(n,)`` of the targets.
    """
    ids = np.asarray(ids, dtype=np.int32)
    if len(ids) < 2:
        raise KerasSeqError(f"need at least 2 tokens to evaluate, got {len(ids)}")
    runner = model.clone_for_batch(1, stateful=True)
    window_log_probs = compiled(
        runner, lambda x, y: _target_log_probs(runner(x, training=False), y))  # (1, T)
    reset_recurrent_states(runner)
    out = []
    for start in range(0, len(ids) - 1, window):
        x = ids[start: min(start + window, len(ids) - 1)]
        y = ids[start + 1: start + 1 + len(x)]
        out.append(window_log_probs(x[None], y[None])[0])
    log_probs = np.concatenate(out)
    return log_probs, len(log_probs)


def perplexity_interval(log_probs, window: int, z: float = 1.96) -> dict:
    """Perplexity of a token sample with a normal-approximation confidence interval.

    The sample's ``log_probs`` (natural log, one per scored token, in stream order) are
    cut into consecutive windows of ``window`` tokens (the last may be shorter). The mean
    log-loss ``m = Σ_j L_j / Σ_j n_j`` (``L_j``: window ``j``'s summed loss, ``n_j`` its
    tokens) is a ratio estimator over windows; its standard error is
    ``se = sqrt(k/(k−1) · Σ_j (L_j − m·n_j)²) / Σ_j n_j`` for ``k`` windows (for equal
    windows: the standard deviation of the per-window mean losses over ``√k``). The
    interval ``m ± z·se`` (``z = 1.96``: 95%) is mapped through ``exp`` to perplexity.
    Windows, not tokens, are the units because the losses of neighbouring tokens are
    correlated; windows further apart are treated as independent (an approximation for
    text whose topic drifts slowly).

    Returns ``{"loss", "ppl", "ppl_low", "ppl_high", "se", "tokens", "windows"}``.

    >>> r = perplexity_interval(np.log([0.5, 0.5, 0.25, 0.25]), window=2)
    >>> round(r["ppl"], 3), round(r["ppl_low"], 3), round(r["ppl_high"], 3)
    (2.828, 1.434, 5.579)
    """
    losses = -np.asarray(log_probs, dtype=np.float64).reshape(-1)
    if losses.size < 2 or window < 1:
        raise KerasSeqError(f"need at least 2 scored tokens and a window ≥ 1 for a confidence "
                            f"interval, got {losses.size} token(s), window {window}")
    starts = np.arange(0, losses.size, window)
    sums = np.add.reduceat(losses, starts)  # (k,) L_j
    counts = np.diff(np.append(starts, losses.size)).astype(np.float64)  # (k,) n_j
    mean = float(sums.sum() / counts.sum())
    k = len(sums)
    se = (float(np.sqrt(k / (k - 1) * np.sum((sums - mean * counts) ** 2)) / counts.sum())
          if k > 1 else float("inf"))
    return {"loss": mean, "ppl": float(np.exp(mean)),
            "ppl_low": float(np.exp(mean - z * se)), "ppl_high": float(np.exp(mean + z * se)),
            "se": se, "tokens": int(losses.size), "windows": int(k)}


def perplexity_of_run(run_dir: str | Path, split: str = "val") -> PerplexityResult:
    """Cross-entropy and perplexity of a run's model on ``split`` (state carried)."""
    config, tokenizer, model = load_run(run_dir)
    corpus = corpus_for(config)
    if not has_text(corpus, split):
        raise KerasSeqError(f"split {split!r} of {corpus.name} is empty "
                            f"(split ratio {config.split_ratio})")
    ids = np.asarray(split_ids(corpus, tokenizer, split), np.int32)
    if isinstance(model, NPLM):
        log_probs, _ = evaluate_windows(model, ids)
        name = f"NPLM n={model.order}"
    else:
        log_probs, _ = evaluate_stream(model, ids)
        name = f"{config.cell} LM"
    oov = int((ids[1:] == tokenizer.unk_id).sum())
    return PerplexityResult.from_log_probs(
        log_probs, fingerprint=fingerprint(tokenizer, corpus, split), oov=oov,
        model=f"{name} ({Path(run_dir).name})",
    )


def keyboard_outcomes(run_dir: str | Path, split: str = "val", k: int = 3):
    """:class:`~keras_seq.keyboard.KeyboardOutcomes` of a run's model on ``split``: the
    positions an n-gram predicts (every word of each non-blank line and its end; the
    stream starts after an ``<eos>``, so the first word is predicted too), with the whole
    vocabulary scored at each (state carried, as :func:`evaluate_stream`)."""
    config, tokenizer, model = load_run(run_dir)
    corpus = corpus_for(config)
    if isinstance(corpus, PreparedCorpus):
        raise KerasSeqError(f"{corpus.path} holds ids, in which unknown words are already "
                            "<unk>; keystroke savings need the words: train on the source "
                            "text, or pass --no-keyboard")
    if not has_text(corpus, split):
        raise KerasSeqError(f"split {split!r} of {corpus.name} is empty")
    inputs, targets = word_stream(tokenizer, corpus.text(split))
    scorer = KeyboardScorer.for_tokenizer(tokenizer, k)
    for start, rows in _log_softmax_rows(model, inputs):
        for row, target in zip(rows, targets[start:start + len(rows)]):
            scorer.add(row, target)
    return scorer.outcomes()


def _log_softmax_rows(model, inputs, window: int = EVAL_WINDOW):
    """``(start, log_probs (T, V))`` for windows of ``inputs``: the distribution of the
    token after each input (an NPLM reads its fixed window, a recurrent LM its state)."""
    from keras import ops  # lazy: Keras is imported once the backend is chosen

    if isinstance(model, NPLM):
        # the window before each of inputs[1:] and one more: the context of every target
        windows = nplm_windows(np.append(inputs, 0), model.order - 1)  # (N, n − 1)
        fn = compiled(model, lambda x: ops.log_softmax(
            ops.cast(model(x, training=False), "float32"), axis=-1))
        for start in range(0, len(inputs), window):
            yield start, to_numpy(fn(windows[start:start + window]))
        return
    runner = model.clone_for_batch(1, stateful=True)
    fn = compiled(runner, lambda x: ops.log_softmax(
        ops.cast(runner(x, training=False), "float32"), axis=-1))  # (1, T, V)
    reset_recurrent_states(runner)
    for start in range(0, len(inputs), window):
        yield start, to_numpy(fn(inputs[None, start:start + window]))[0]


def _next_token_fn(runner):
    """``x (1, T) -> (1, V)``: logits of the token after ``x``, compiled; the stateful
    runner carries its state from call to call."""
    return compiled(runner, lambda x: runner(x, training=False)[:, -1, :], autograph=False)


def generate_tokens(model: RecurrentLM, tokenizer, prompt: str, max_tokens: int,
                    sampler: Sampler | None = None, seed: int | None = None, on_token=None,
                    runner: RecurrentLM | None = None) -> list[int]:
    """Sample ``max_tokens`` ids after ``prompt``; ``on_token(id)`` is called as each arrives."""
    if max_tokens < 0:
        raise KerasSeqError(f"max_tokens must be ≥ 0, got {max_tokens}")
    sampler = sampler or TopKSampler(10)
    rng = np.random.default_rng(seed)
    prompt_ids = tokenizer.encode(prompt) if prompt else np.array([], np.int32)
    if prompt and (len(prompt_ids) == 0 or (prompt_ids == tokenizer.unk_id).all()):
        raise KerasSeqError(
            f"the prompt {prompt!r} has only unknown tokens for this {tokenizer.kind} "
            "vocabulary; use words the model was trained on"
        )
    if len(prompt_ids) == 0:  # start at a line boundary
        start = tokenizer.eos_id if tokenizer.eos_id is not None else tokenizer.encode("\n")[0]
        prompt_ids = np.array([start], np.int32)
    if isinstance(model, NPLM):  # a fixed window slides over what was generated
        context = model.order - 1
        history = [0] * context + prompt_ids.tolist()

        def step(x):
            history.extend(x.reshape(-1).tolist())
            del history[:-context]
            return to_numpy(model(np.array([history], np.int32), training=False))  # (1, V)
        x = np.zeros((1, 0), np.int32)
    else:
        if runner is None:
            runner = model.clone_for_batch(1, stateful=True)
            step = _next_token_fn(runner)
        else:  # a caller's runner, reused (the trainer's sampler): compile its step once
            step = getattr(runner, "_keras_seq_next_token", None)
            if step is None:
                step = _next_token_fn(runner)
                object.__setattr__(runner, "_keras_seq_next_token", step)  # not a weight
        reset_recurrent_states(runner)
        x = prompt_ids[None]

    logits = np.asarray(step(x))[0]
    banned = special_ids(tokenizer)  # never <pad> or <unk>
    out = []
    for _ in range(max_tokens):
        token = sampler(without_ids(logits, banned), rng)
        out.append(token)
        if on_token is not None:
            on_token(token)
        logits = np.asarray(step(np.array([[token]], np.int32)))[0]
    return out


def stream_to_stdout(tokenizer):
    """An ``on_token`` callback that prints tokens as they arrive."""
    sep = "" if tokenizer.kind == "char" else " "

    def emit(token_id: int):
        tok = tokenizer.vocab[token_id]
        if tokenizer.kind == "subword" and tok.startswith("##"):
            sys.stdout.write(tok[2:])
        elif tok == EOS:
            sys.stdout.write("\n")
        else:
            sys.stdout.write(tok if sep == "" else sep + tok)
        sys.stdout.flush()

    return emit

