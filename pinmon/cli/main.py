"""``pinmon [COMMAND]``: builds the parser from the command modules, dispatches, maps errors to exit codes.

Exit codes: 0 success; 2 bad input (arguments, config, recording or snapshot files); ``pinmon check``
uses the Nagios convention instead: 0 ok, 1 warning, 2 critical, 3 unknown (could not assess).
Bad input always gets one line on stderr, never a traceback; with ``--json`` also a JSON object on
stdout. Without a command: the live terminal app, or the check report when stdout is not a terminal
(or ``TERM`` is dumb or unset).
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..units import printable
from .attaching import ATTACH_HELP
from .commands import COMMANDS, check
from .common import EXIT_BAD_INPUT, UsageError, dumps, no_app_here, run_app
from .options import Settings, resolve, shared
from .parser import CliParser

if TYPE_CHECKING:
    from ..collect.live import LiveCollector
    from ..tui.view.first_frame import FirstFrame

# The schema of each command's --json output; an error is printed in the same envelope.
JSON_SCHEMAS: dict[str, str | None] = {name: module.JSON_SCHEMA for name, module in COMMANDS.items()
                                       if hasattr(module, "JSON_SCHEMA")}


def build_parser() -> CliParser:
    from .. import __version__
    from ..advise import RULE_DOCS

    rules = "\n".join(f"  {k:<22} {v}" for k, v in RULE_DOCS.items())
    p = CliParser(prog="pinmon", formatter_class=argparse.RawDescriptionHelpFormatter,
                  parents=shared("config", "interval", "max_pinned", "probe_every", "oom_lookback"),
                  description="PCIe traffic and pinned (page-locked) memory monitor for NVIDIA GPU servers.\n"
                              "Without a command: the live terminal app (or the check report when not on a terminal).\n"
                              "The options below also work after a command that uses them.",
                  epilog="advisor rules (ids are stable; filter and alert on them):\n" + rules)
    p.add_argument("--version", action="version", version=f"pinmon {__version__}")
    p.add_argument("--no-probe", action="store_true",
                   help="no automatic probes in the live app (p and s still probe)")
    # Its own dest: a command's --attach default would otherwise overwrite it (``carry_attach``).
    p.add_argument("--attach", dest="app_attach", action="store_true",
                   help="the live app: " + ATTACH_HELP + ", kept on within a budget (before check, record or"
                        " export: theirs)")
    sub = p.add_commands(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(sub)
    return p


def run_default(args: argparse.Namespace, settings: Settings) -> int:
    """No command: the live terminal app, or without a terminal the check report of a live snapshot.
    ``--attach``: every CUDA process kept attached (the check report: over its window); without it the
    app's attach key attaches one process for a window (``cli/attaching.py``)."""
    attach_all = bool(getattr(args, "app_attach", False))
    why = no_app_here()
    if why is not None:
        if why != "stdout is not a terminal":  # a pipe or a file expects the report: no word about it
            print(f"pinmon: {why}: the check report instead", file=sys.stderr)
        return check.report(check.measure(window_s=1.0, oom_lookback=settings.oom_lookback_s, attach=attach_all),
                            settings.config)
    # The app's outline on screen before anything else loads (Textual, the collector's modules).
    from ..tui.view.first_frame import draw_first_frame

    frame = draw_first_frame()
    try:
        return run_live_app(settings, attach_all, frame)
    finally:
        if frame is not None:
            frame.abandon()  # where the app never took the terminal


def run_live_app(settings: Settings, attach_all: bool, frame: FirstFrame | None) -> int:
    """The app on the live collector, opened on its reading thread; ``frame`` the outline on screen."""
    from ..collect.attached import AttachedSource, RequestedWindows
    from ..model.source import OpenedOnFirstRead
    from .attaching import continuous

    # --attach starts before the first frame: the header says ATTACH, the notice bar why nothing is
    # attached. Else the attach key's windows, one at a time, reach the collector through ``requested``.
    attacher = requested = None
    attached: AttachedSource
    if attach_all:
        attached = attacher = continuous(settings.interval_s)
    else:
        attached = requested = RequestedWindows()

    def open_live() -> LiveCollector:
        # On the app's reading thread: NVML's start and the collector's imports do not hold up the
        # first frame, which shows "collecting..." meanwhile.
        from ..collect.live import LiveCollector

        return LiveCollector(interval_s=settings.interval_s, oom_lookback_s=settings.oom_lookback_s,
                             attached=attached)

    source = OpenedOnFirstRead(open_live)
    try:
        return run_app(source, settings, attach_all=attach_all, attach_windows=requested, frame=frame)
    finally:
        if attacher is not None:
            attacher.stop()  # the probes out of the processes before pinmon exits
        source.close()


def carry_attach(args: argparse.Namespace, parser: CliParser) -> None:
    """``pinmon --attach COMMAND``: as ``COMMAND --attach`` where the command takes it (check, record,
    export), as the shared options go; a command that attaches nothing refuses it."""
    if not getattr(args, "app_attach", False) or args.command is None:
        return
    if "--attach" not in parser.subcommands[args.command].option_names:
        raise UsageError(attach_refusal(args.command))
    args.attach = True


def attach_refusal(command: str) -> str:
    return (f"--attach attaches this machine's processes: pinmon {command} does not take it (the live app,"
            " check, record and export do)")


def _misplaced(extra: Sequence[str], parser: CliParser, command: str | None) -> str | None:
    """Where an option that argparse did not take belongs, when it is pinmon's own option given after
    a command that does not use it, or the command's given before it; None for an option known nowhere."""
    sub = parser.subcommands.get(command) if command else None
    for token in extra:
        name = token.split("=", 1)[0]
        if not name.startswith("-"):
            continue
        if name == "--attach" and command is not None and (sub is None or name not in sub.option_names):
            return attach_refusal(command)
        if name in parser.option_names:
            where = f"{name} is an option of pinmon itself: put it before the command (pinmon {name} ... {command})"
            if command == "check" and name == "--interval":
                where += "; check counts PCIe traffic over --window S"
            return where
        if sub is not None and name in sub.option_names:
            return f"{name} is an option of pinmon {command}: put it after the command (pinmon {command} {name} ...)"
    return None


def _json_error(command: str | None, message: str) -> None:
    """With --json, an error is also a JSON object on stdout, so a script reading it gets a reason."""
    doc: dict[str, object] = {}
    schema = JSON_SCHEMAS.get(command) if command is not None else None
    if schema:
        doc["schema"] = schema
    # check's and attach's status words are Nagios's: bad input leaves the state unknown.
    doc.update(status="unknown" if command in ("check", "attach") else "error", reason=message)
    print(dumps(doc, indent=1))


def _wants_json(argv: Sequence[str], command: str | None) -> bool:
    if command not in JSON_SCHEMAS:
        return False
    head = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in head


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # Only to answer an error argparse raises before it has read them: the command's JSON envelope.
    command = parser.command_in(argv)
    wants_json = _wants_json(argv, command)
    CliParser.last_error = None
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            owner = parser.subcommands.get(args.command, parser)
            owner.error(_misplaced(extra, parser, args.command) or f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:
        if e.code not in (0, None) and wants_json and CliParser.last_error:
            _json_error(command, CliParser.last_error)
        raise
    command = args.command
    run = COMMANDS[command].run if command is not None else run_default
    bad_code = parser.subcommands[command].bad_input_code if command is not None else EXIT_BAD_INPUT
    try:
        # Every command validates the config, so a bad file is an error wherever it is named; a
        # default file that was ignored is said once, here.
        carry_attach(args, parser)
        settings = resolve(args)
        for note in settings.config.notices:
            print(f"pinmon: {printable(note, 1000)}", file=sys.stderr)
        return run(args, settings)
    except UsageError as e:
        # The reason may quote a file another user wrote (a recording's keys): shown as data.
        print(f"pinmon: error: {printable(str(e), 2000)}", file=sys.stderr)
        if getattr(args, "json", False) and command in JSON_SCHEMAS:
            _json_error(command, str(e))
        return bad_code
    except KeyboardInterrupt:
        print("pinmon: interrupted", file=sys.stderr)
        if getattr(args, "json", False) and command in JSON_SCHEMAS:
            _json_error(command, "interrupted (Ctrl-C)")
        return 130
    except BrokenPipeError:
        # `pinmon check | head`: the reader left; nothing more to say.
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (stdout from here until the exit)
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
