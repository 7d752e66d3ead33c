"""One module per ``pinmon`` command.

Each module has ``add_parser(sub)``, which adds its parser to the ``pinmon`` parser (``sub`` makes
parsers of ``parser.CliParser``, so a bad argument gets one line; a parser may set its own
``bad_input_code``) with the shared options it uses (``parents=options.shared("config", ...)``) and
one ``add_argument`` per option of its own, and ``run(args, settings) -> int``, which reads the shared
options' values from ``settings`` (``settings.Settings``, settled once), returns the exit code and
raises ``common.UsageError`` for bad input. A command with ``--json`` also names ``JSON_SCHEMA``: the schema
id of its output (None for none), which an error printed as JSON carries too. ``COMMANDS`` lists
them in ``--help`` order; ``Command`` is the type each module has.
"""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Protocol

from . import attach, check, demo, export, pinned, probe, record, replay, trace

if TYPE_CHECKING:
    from ..options import Settings
    from ..parser import Commands


class Command(Protocol):
    """A command module: mypy checks each module of ``COMMANDS`` against it."""

    def add_parser(self, sub: Commands) -> None: ...

    def run(self, args: argparse.Namespace, settings: Settings) -> int: ...


COMMANDS: dict[str, Command] = {"check": check, "pinned": pinned, "record": record, "replay": replay, "demo": demo,
            "probe": probe, "export": export, "trace": trace, "attach": attach}
MODULES = tuple(COMMANDS)
