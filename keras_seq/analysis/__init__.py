"""Measurements behind the textbook claims: gradient decay, memory length, the report.

- :mod:`keras_seq.analysis.gradients`: ‖∂L_T/∂h_k‖ against the distance ``T − k`` for
  SimpleRNN / GRU / LSTM, spectral norms of ``W_hh`` with the Pascanu et al. bound, and
  the exploding-gradient / global-norm-clipping experiment.
- :mod:`keras_seq.analysis.memory`: train each cell on the synthetic tasks of
  :mod:`keras_seq.data.probes` at growing distances and find its effective memory length.
- :mod:`keras_seq.analysis.report`: ``keras-seq report``, one section per claim.

TensorFlow is imported inside functions, so importing this package is cheap.
"""
