"""One module per ``pinmon`` command.

Each module has ``add_parser(sub)``, which adds its parser to the ``pinmon`` parser (``sub`` makes
parsers of ``parser.CliParser``, so a bad argument gets one line; a parser may set its own
``bad_input_code``) with the shared options it uses (``parents=options.shared("config", ...)``) and
one ``add_argument`` per option of its own, and ``run(args, settings) -> int``, which reads the shared
options' values from ``settings`` (``options.Settings``, settled once), returns the exit code and
raises ``common.UsageError`` for bad input. A command with ``--json`` also names ``JSON_SCHEMA``: the schema
id of its output (None for none), which an error printed as JSON carries too. ``COMMANDS`` lists
them in ``--help`` order.
"""
from . import check, demo, export, pinned, probe, record, replay, trace

COMMANDS = {"check": check, "pinned": pinned, "record": record, "replay": replay, "demo": demo,
            "probe": probe, "export": export, "trace": trace}
MODULES = tuple(COMMANDS)
