"""Commands that live in a module of their own.

Each module here has ``add_parser(sub)`` (adds its subparser to the ``pinmon`` parser; ``sub`` makes
parsers of ``cli._Parser`` so bad arguments get one line) and ``run(args) -> int`` (its exit code;
raise ``cli.UsageError`` for bad input). ``MODULES`` lists them in ``--help`` order.
"""
MODULES = ("probe", "export", "trace")
