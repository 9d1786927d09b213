"""Sub-commands of ``keras-seq``: one module per command group (see keras_seq.cli)."""
