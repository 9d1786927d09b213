"""Export a seq2seq model as a SavedModel that maps strings to strings (greedy decoding).

The exported :class:`Seq2SeqTranslator` is a ``tf.Module`` whose ``translate`` function
takes a ``tf.string`` batch ``(B,)`` and returns ``(B,)`` strings: in-graph tokenization
(``Tokenizer.tf_encode``), the greedy ``tf.while_loop`` of
:func:`~keras_seq.tasks.seq2seq.decoding.greedy_graph`, and an in-graph vocabulary lookup back
to text. It is also the serving signature ``serving_default`` (input ``text``, output
``translation``).

Sources longer than the model's ``max_source_len`` fail with an ``InvalidArgumentError``
that names the limit; an empty source fails the same way. Unknown characters/words map
to ``<unk>`` as in Python.

Example::

    export_saved_model(model, source_tokenizer, target_tokenizer, "export/dates")
    reloaded = tf.saved_model.load("export/dates")
    reloaded.translate(tf.constant(["3 May 1998"]))   # [b"1998-05-03"]
"""

from __future__ import annotations

from pathlib import Path

import tensorflow as tf

from keras_seq.tasks.seq2seq.decoding import greedy_graph


class Seq2SeqTranslator(tf.Module):
    """``translate(tf.string (B,)) -> tf.string (B,)`` around a :class:`Seq2Seq` model."""

    def __init__(self, model, source_tokenizer, target_tokenizer, name=None):
        super().__init__(name=name)
        self.model = model
        self.source_tokenizer = source_tokenizer
        self.source_table = source_tokenizer._lookup_table()  # tracked: saved with the module
        vocab = list(target_tokenizer.vocab)
        # Output ids: the target vocabulary, then bos/eos (never emitted as text).
        self.target_vocab = tf.constant(vocab + ["", ""])
        self.target_size = len(vocab)
        self.separator = "" if target_tokenizer.kind == "char" else " "
        self.subword = target_tokenizer.kind == "subword"
        self.max_source_len = int(model.max_source_len)
        self.max_steps = int(model.max_target_len) + 1
        self.drop_ids = [i for i in (0, target_tokenizer.eos_id) if i is not None]

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def translate(self, text):
        ids = self.source_tokenizer.tf_encode(text)  # ragged (B, None)
        lengths = tf.cast(ids.row_lengths(), tf.int32)
        tf.debugging.assert_less_equal(
            lengths, self.max_source_len,
            message=f"source longer than this model's maximum of {self.max_source_len} "
                    "tokens; shorten it")
        tf.debugging.assert_positive(lengths, message="empty source; expected at least one "
                                                      "token")
        source = tf.cast(ids.to_tensor(default_value=0), tf.int32)  # (B, S)
        tokens, _ = greedy_graph(self.model, source, tf.constant(self.max_steps, tf.int32))
        keep = tokens < self.target_size  # drops eos/bos
        for i in self.drop_ids:
            keep = tf.logical_and(keep, tf.not_equal(tokens, i))
        words = tf.ragged.boolean_mask(tf.gather(self.target_vocab, tokens), keep)
        out = tf.strings.reduce_join(words, axis=1, separator=self.separator)
        if self.subword:
            out = tf.strings.regex_replace(out, "(^| )##", "")
        return out


def export_saved_model(model, source_tokenizer, target_tokenizer, path) -> Path:
    """Write the string → string SavedModel to ``path`` and return it."""
    path = Path(path)
    module = Seq2SeqTranslator(model, source_tokenizer, target_tokenizer)
    serve = tf.function(lambda text: {"translation": module.translate(text)},
                        input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    signatures = {"serving_default": serve.get_concrete_function()}
    tf.saved_model.save(module, str(path), signatures=signatures)
    return path


def export_run(run_dir, path) -> Path:
    """Export the best checkpoint of a run directory."""
    # lazy: Keras is imported once the backend is chosen
    from keras_seq.tasks.seq2seq.evaluation import load_run

    _, src_tok, tgt_tok, model = load_run(run_dir)
    return export_saved_model(model, src_tok, tgt_tok, path)


def run_export(args) -> int:
    """``keras-seq export seq2seq``."""
    path = export_run(args.run_dir, args.out)
    print(f"wrote SavedModel {path}")
    return 0
