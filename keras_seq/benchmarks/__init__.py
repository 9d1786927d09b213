"""Benchmarks behind ``keras-seq bench ...``; each module imports TensorFlow lazily."""
