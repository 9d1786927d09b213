"""A toy task shape for tests/test_task_protocol.py and docs/architecture.md: the parity
of a bit string, read by a GRU. One folder (config, data, task, export, shape) and one row
in ``keras_seq.commands.tasks.SHAPES`` give it ``train``, ``eval``, ``predict`` and
``export`` on the command line."""
