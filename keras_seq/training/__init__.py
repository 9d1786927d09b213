"""Training helpers: the shared trainer, its config, callbacks and TensorBoard summaries."""
