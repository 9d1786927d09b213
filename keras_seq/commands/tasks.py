"""``keras-seq train|eval SHAPE``, ``predict``/``generate``/``translate`` and ``export
FORMAT`` for every task shape, from one table.

:data:`SHAPES` has one row per shape: its name and the module whose ``SHAPE``
(:class:`~keras_seq.tasks.protocol.TaskShape`) names the rest. The light part (config,
help, flags) is read when the parser is built; the shape's ``task.py`` and exporters are
imported only when a command runs, so ``--help`` stays fast. Nothing here depends on which
shape or data set a command serves: adding a shape is one folder and one row.
"""

from __future__ import annotations

from keras_seq.atomic import json_safe
from keras_seq.commands._common import (
    add_eval_command,
    add_train_command,
    check_run_arg,
    check_task_name,
    check_tokenizer_options,
    check_train_dir,
    config_overrides,
    group_parser,
    print_json,
    print_train_results,
    train_printer,
    use_backend,
)
from keras_seq.tasks.protocol import TaskShape, load_shape, resolve

#: shape name → the module holding its ``SHAPE``. One row per shape; the order is the
#: order of ``--help``.
SHAPES = {
    "lm": "keras_seq.tasks.lm.shape",
    "seq2seq": "keras_seq.tasks.seq2seq.shape",
    "classify": "keras_seq.tasks.classify.shape",
    "tag": "keras_seq.tasks.tag.shape",
    "conditioned": "keras_seq.tasks.conditioned.shape",
}


def shapes() -> dict[str, TaskShape]:
    """``{name: TaskShape}`` of every row of :data:`SHAPES`, checked to agree."""
    out = {}
    for name, path in SHAPES.items():
        shape = load_shape(path)
        if shape.name != name:
            raise ValueError(f"the row {name!r} of SHAPES names {path}, whose SHAPE is "
                             f"{shape.name!r}; make the row's key the shape's name")
        out[name] = shape
    return out


def register(subparsers) -> None:
    table = shapes()
    for shape in table.values():
        p = add_train_command(subparsers, shape.name, shape.train_help, shape.config_cls,
                              run_train, presets=shape.presets,
                              data_is_corpus=shape.data_is_corpus)
        if shape.add_train_args:
            shape.add_train_args(p)
        p = add_eval_command(subparsers, shape.name, shape.eval_help, run_eval,
                             split=shape.eval_split)
        if shape.add_eval_args:
            shape.add_eval_args(p)
    _register_use_commands(subparsers, table)
    _register_exports(subparsers, table)


def _register_use_commands(subparsers, table: dict) -> None:
    """One parser per use command, whose flags its shared record adds once."""
    commands = {}
    for shape in table.values():
        if shape.use is not None:
            commands.setdefault(shape.use.name, shape.use)
    for command in commands.values():
        p = subparsers.add_parser(command.name, help=command.help)
        if command.add_args:
            command.add_args(p)
        p.set_defaults(func=run_use, use_command=command.name)


def _register_exports(subparsers, table: dict) -> None:
    formats = [(shape, command) for shape in table.values() for command in shape.exports]
    export = group_parser(subparsers, "export", "export a trained model: " + ", ".join(
        command.name for _, command in formats), metavar="FORMAT")
    for shape, command in formats:
        p = export.add_parser(command.name, help=command.help)
        if command.add_args:
            command.add_args(p)
        p.set_defaults(func=run_export, export_shape=shape.name, export_format=command.name)


def _shape(name: str) -> TaskShape:
    return load_shape(SHAPES[name])


def config_from_args(shape: TaskShape, args):
    """The config a ``train`` command line asks for: the shape's base values (its config's
    defaults, or a preset's) with every flag given."""
    return shape.config_cls.from_dict(config_overrides(args, shape.config_cls,
                                                       shape.base_config(args)))


def check_config(shape: TaskShape, config):
    """Refuse a bad config before any work: a misspelt ``--data``, the config's own
    checks (the split ratio among them) and the tokenizer's options."""
    if shape.data_names or shape.data_prefixes:
        check_task_name(f"{shape.name} --data", config.data, shape.data_names,
                        shape.data_prefixes)
    config.validate()
    if shape.tokenizer is not None:
        kind, options = shape.tokenizer(config)
        check_tokenizer_options(kind, **options)
    return config


def run_train(args) -> int:
    shape = _shape(args.kind)
    check_train_dir(args.run_dir)
    check_config(shape, config_from_args(shape, args))
    use_backend(args)
    # lazy: keeps `keras-seq --help` fast (loads Keras)
    from keras_seq.training.trainer import format_results, train

    config = config_from_args(shape, args)
    task = shape.task_module().TASK
    results = train(task, config, args.run_dir, resume=args.resume,
                    verbose=2 if args.quiet else 1, printer=train_printer(args))
    print_train_results(args, results, lambda r: format_results(r, task))
    return 0


def run_eval(args) -> int:
    shape = _shape(args.kind)
    check_run_arg(args.run_dir, shape.name)
    module = shape.task_module()
    result = module.evaluate_run(args.run_dir, args.split, **shape.eval_options(args))
    if args.json:
        print_json(json_safe(result))
    else:
        for line in module.eval_lines(result):
            print(line)
    return 0


def run_use(args) -> int:
    """``predict``/``generate``/``translate``: the run's kind picks the shape whose
    ``task.<command>`` runs."""
    table = shapes()
    serving = [name for name, s in table.items() if s.use and s.use.name == args.use_command]
    others: dict[str, list[str]] = {}
    for name, s in table.items():
        if s.use and s.use.name != args.use_command:
            others.setdefault(s.use.name, []).append(name)
    hint = ", ".join(f"{command} for {' and '.join(names)} runs"
                     for command, names in others.items())
    kind = check_run_arg(args.run_dir, *serving, command=args.use_command,
                         hint=f" (use {hint})" if hint else "")
    return getattr(table[kind].task_module(), args.use_command)(args)


def run_export(args) -> int:
    """``export FORMAT``: check the run (and that TensorFlow is Keras's backend: export
    traces TensorFlow graphs; a run trained under any backend loads there), then run the
    shape's exporter."""
    shape = _shape(args.export_shape)
    command = next(c for c in shape.exports if c.name == args.export_format)
    if command.needs_run:
        # lazy: keeps `keras-seq --help` fast
        from keras_seq.backend import require_tensorflow_backend

        if getattr(args, "run_dir", None) is not None:  # else --model FILE.keras
            check_run_arg(args.run_dir, shape.name)
        require_tensorflow_backend("export")
    return resolve(command.run)(args)
