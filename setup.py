"""The one compiled part of keras-seq: Kneser-Ney kernels (keras_seq/ngram/_ngram_c.c).

Everything else is in pyproject.toml. The extension is optional: without a C compiler the
install still succeeds and keras-seq writes ARPA text with its numpy code (the same bytes,
slower; ``keras_seq.ngram.arpa_lines.KERNEL`` says which one runs).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("keras_seq.ngram._ngram_c", ["keras_seq/ngram/_ngram_c.c"],
                             extra_compile_args=["-O2"], optional=True)])
