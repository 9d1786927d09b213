"""Keyboard-style next-word suggestions and streaming generation on LiteRT (no TensorFlow).

In a terminal it reads one key at a time (``keys`` mode): completions of the word being
typed after every character, the top next words after every space, Tab takes the top
suggestion, Ctrl-G generates, Ctrl-R starts over, Ctrl-D quits. With ``--lines`` or when
stdin is a pipe (scripts, tests) it reads whole lines instead. Each line is text
"typed" into the running context: the demo feeds it token by token and, after every word
(character, for char models), prints the top-3 next tokens and the step's latency. If a
line starts with ``?``, the rest is a word being typed and the top-3 completions of that
prefix are shown instead. Commands::

    /gen [N]     stream N generated tokens from the current context (default 20)
    /reset       start a new context
    /quit        leave (end of input does too)

Example (scripted)::

    printf 'the module\\n/gen 5\\n' | keras-seq demo --model demo/step_dynamic.tflite
"""

from __future__ import annotations

import sys
import termios
import tty

import numpy as np

from keras_seq.errors import KerasSeqError
from keras_seq.runtime.litert import LiteRTLM
from keras_seq.sampling import TopKSampler


def _fmt_weights(spec) -> str:
    return ", ".join(f"{source} {weight:.2f}" for source, weight in spec.weights.items()
                     if weight > 0)


def _fmt(suggestions) -> str:
    return ", ".join(f"{tok!r} {p:.2f}" for tok, p in suggestions) or "(none)"


KEYS_HELP = ("keys: type; after each character the line shows completions of the word "
             "being typed, after each space the top next words. Tab = take the top "
             "suggestion, Ctrl-G = generate, Ctrl-R = new context, Ctrl-D = quit.")


def _keys_mode(lm: LiteRTLM, top: int, max_tokens: int, sampler, seed, stdin, out) -> int:
    """Keystroke mode for a real terminal (cbreak: one key at a time, no Enter needed)."""
    tok = lm.tokenizer
    fd = stdin.fileno()
    saved = termios.tcgetattr(fd)
    typed, partial, last_us = "", "", 0.0

    def status(text):
        out.write("\r\x1b[K" + text)
        out.flush()

    def show():
        if partial and tok.kind == "word":
            hint = f"{partial!r}… → {_fmt(lm.suggest(top, prefix=partial.lower()))}"
        else:
            hint = f"next → {_fmt(lm.suggest(top))}  [{last_us:.0f} µs]"
        status(f"{typed[-40:]}{partial}  |  {hint}")

    def feed(text):
        nonlocal last_us
        ids = tok.encode(text)
        if len(ids):
            last_us = lm.feed_ids([int(i) for i in ids])[-1]

    print(KEYS_HELP, file=out, flush=True)
    try:
        tty.setcbreak(fd)
        show()
        while True:
            ch = stdin.read(1)
            if ch in ("", "\x04"):  # Ctrl-D
                break
            if ch == "\x12":  # Ctrl-R
                lm.reset()
                lm.step(lm.start_id())
                typed, partial = "", ""
            elif ch == "\x07":  # Ctrl-G: generate from here
                if partial:
                    feed(partial)
                    typed, partial = typed + partial + " ", ""
                out.write("\n")
                ids, micros = lm.continue_(max_tokens, sampler, seed,
                                           on_token=lambda t, us: out.write(lm.token_text(t)))
                m = np.asarray(micros)
                out.write(f"\n[{len(ids)} tokens, p50 {np.percentile(m, 50):.0f} µs/token]\n")
                typed = ""
            elif ch == "\t":  # take the top suggestion
                best = lm.suggest(1, prefix=partial.lower() if tok.kind == "word" else "")
                if best:
                    word = best[0][0]
                    feed(word if tok.kind == "char" else word + " ")
                    typed, partial = typed + word + ("" if tok.kind == "char" else " "), ""
            elif ch in ("\x7f", "\b"):
                partial = partial[:-1]
            elif tok.kind == "char" and (ch.isprintable() or ch == "\n"):
                feed(ch)
                typed += ch if ch != "\n" else "⏎"
            elif ch in (" ", "\n"):
                if partial:
                    feed(partial + (" " if ch == " " else "\n"))
                    typed, partial = typed + partial + " ", ""
            elif ch.isprintable():
                partial += ch
            show()
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        out.write("\n")
    return 0


def _gen_command(lm: LiteRTLM, command: str, max_tokens: int, sampler, seed, out):
    """``/gen [N]``: stream N generated tokens (default ``max_tokens``) with their latency
    summary, or print the usage on a bad N. Returns the seed for the next ``/gen``."""
    parts = command.split()
    try:
        n = int(parts[1]) if len(parts) > 1 else max_tokens
    except ValueError:
        print(f"usage: /gen N (N a whole number), got {parts[1]!r}", file=out)
        return seed
    if n < 1:
        print("usage: /gen N with N ≥ 1", file=out)
        return seed

    def show(token, micros):
        out.write(lm.token_text(token))
        out.flush()

    ids, micros = lm.continue_(n, sampler, seed, on_token=show)
    m = np.asarray(micros)
    print(f"\n[{len(ids)} tokens, per token p50 {np.percentile(m, 50):.0f} µs, "
          f"p95 {np.percentile(m, 95):.0f} µs, {len(m) / (m.sum() / 1e6):,.0f} "
          "tokens/s]", file=out, flush=True)
    return None if seed is None else seed + 1


def _feed_line(lm: LiteRTLM, text: str, top: int, out) -> None:
    """Feed ``text`` token by token, printing each token's top next tokens and latency."""
    tok = lm.tokenizer
    try:
        ids = tok.encode(text)
    except KerasSeqError as err:
        print(f"error: {err}", file=out)
        return
    if len(ids) == 0:
        print("(no tokens in that line)", file=out)
        return
    for token in ids:
        micros = lm.feed_ids([int(token)])[0]
        print(f"{tok.vocab[token]!r:>16} → {_fmt(lm.suggest(top))}   [{micros:.0f} µs]",
              file=out, flush=True)


def run_demo(model_path, tokenizer=None, threads: int = 1, top: int = 3,
             max_tokens: int = 20, top_k: int = 10, temperature: float = 1.0,
             seed: int | None = 0, stdin=None, stdout=None, keys: bool | None = None,
             mix=None) -> int:
    """Run the demo; ``keys`` (default: when stdin is a terminal) reads one key at a time,
    otherwise whole lines (pipes, tests). ``mix``: a ``mix.json``
    (:class:`~keras_seq.runtime.mixture.MixedLM`: the model mixed with an n-gram and a
    cache of what is typed)."""
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    if mix is not None:
        # lazy: the mixture imports the n-gram package; the plain demo starts without it
        from keras_seq.runtime.mixture import MixedLM

        lm = MixedLM(model_path, mix, tokenizer=tokenizer, num_threads=threads)
    else:
        lm = LiteRTLM(model_path, tokenizer=tokenizer, num_threads=threads)
    tok = lm.tokenizer
    sampler = TopKSampler(top_k, temperature)
    rng_seed = seed
    interactive = hasattr(stdin, "isatty") and stdin.isatty()
    if keys is None:
        keys = interactive
    print(f"keras-seq demo: {lm.meta['cell']} {lm.meta['num_layers']}×{lm.meta['units']} "
          f"({lm.meta['graph']}, {lm.meta['variant']}), {tok.kind} vocabulary "
          f"{tok.vocab_size:,}, {threads} thread(s)"
          + (f"; mixed: {_fmt_weights(lm.spec)}" if mix is not None else "")
          + ". Type text; /gen [N], /reset, /quit.",
          file=out, flush=True)
    lm.reset()
    lm.step(lm.start_id())
    if keys:
        return _keys_mode(lm, top, max_tokens, sampler, seed, stdin, out)
    print(f"start → {_fmt(lm.suggest(top))}", file=out, flush=True)
    while True:
        if interactive:
            out.write("> ")
            out.flush()
        line = stdin.readline()
        if not line:
            break
        text = line.rstrip("\n")
        command = text.strip()
        if command in ("/quit", "/exit"):
            break
        if command == "/reset":
            lm.reset()
            lm.step(lm.start_id())
            print(f"(new context) → {_fmt(lm.suggest(top))}", file=out, flush=True)
            continue
        if command.startswith("/gen"):
            rng_seed = _gen_command(lm, command, max_tokens, sampler, rng_seed, out)
            continue
        if command.startswith("/"):
            print(f"unknown command {command!r}; use /gen [N], /reset or /quit", file=out)
            continue
        if not command:
            print("(empty line: type some text)", file=out, flush=True)
            continue
        if command.startswith("?"):  # "?pre": complete a word being typed
            prefix = command[1:].strip().lower()
            print(f"  {prefix!r}… → {_fmt(lm.suggest(top, prefix=prefix))}", file=out,
                  flush=True)
            continue
        _feed_line(lm, text, top, out)
    return 0
