"""Training helpers: Keras metrics and callbacks (these import TensorFlow)."""
