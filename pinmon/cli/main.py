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
from typing import Optional, Sequence

from ..limits import MAX_INTERVAL_S, MIN_INTERVAL_S
from ..units import printable
from .commands import COMMANDS, check
from .common import (
    EXIT_BAD_INPUT,
    UsageError,
    dumps,
    interval_arg,
    load_config,
    no_app_here,
    probe_every_arg,
    run_app,
    size_arg,
)

# The schema of each command's --json output; an error is printed in the same envelope.
JSON_SCHEMAS = {name: module.JSON_SCHEMA for name, module in COMMANDS.items() if hasattr(module, "JSON_SCHEMA")}


class CliParser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line, with the command's own exit code and a
    pointer to that command's --help, and remembers which options take a value (see main)."""

    bad_input_code = EXIT_BAD_INPUT
    last_error: Optional[str] = None  # the message of the latest error, for --json output

    def __init__(self, *args, **kwargs):
        self.value_options: set[str] = set()
        self.takes_remainder = False
        self.arguments: list[argparse.Action] = []  # what add_argument returned, in order
        super().__init__(*args, **kwargs)  # it adds -h through add_argument

    def add_argument(self, *args, **kwargs):  # type: ignore[override]
        action = super().add_argument(*args, **kwargs)
        self.arguments.append(action)
        if action.option_strings and action.nargs is None:
            self.value_options.update(action.option_strings)
        if action.nargs == argparse.REMAINDER:
            self.takes_remainder = True
        return action

    def error(self, message: str):  # type: ignore[override]
        CliParser.last_error = f"{message} (see {self.prog} --help)"
        self.exit(self.bad_input_code, f"{self.prog}: error: {CliParser.last_error}\n")


def build_parser() -> CliParser:
    from .. import __version__
    from ..advise import RULE_DOCS

    rules = "\n".join(f"  {k:<22} {v}" for k, v in RULE_DOCS.items())
    p = CliParser(prog="pinmon", formatter_class=argparse.RawDescriptionHelpFormatter,
                  description="PCIe traffic and pinned (page-locked) memory monitor for NVIDIA GPU servers.\n"
                              "Without a command: the live terminal app (or the check report when not on a terminal).",
                  epilog="advisor rules (ids are stable; filter and alert on them):\n" + rules)
    p.add_argument("--version", action="version", version=f"pinmon {__version__}")
    p.add_argument("--interval", type=interval_arg, default=None, metavar="S",
                   help=f"refresh interval in seconds, {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}"
                        " (default 1, or the config file's)")
    p.add_argument("--config", metavar="FILE", help="TOML config (default: the user config dir's pinmon/config.toml)")
    p.add_argument("--no-probe", action="store_true", help="no automatic probe in the live app")
    p.add_argument("--probe-every", type=probe_every_arg, default=60.0, metavar="S",
                   help="seconds between automatic quick probes in the live app (default 60)")
    p.add_argument("--max-pinned", type=size_arg, default=None, metavar="SIZE",
                   help="cap on pinned bytes a probe may allocate (default 256M, never over 5%% of available RAM)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=CliParser)
    p.subcommands = sub.choices  # type: ignore[attr-defined]
    for module in COMMANDS.values():
        module.add_parser(sub)
    return p


def run_default(args) -> int:
    """No command: the live terminal app, or without a terminal the check report of a live snapshot."""
    config = load_config(args.config)
    why = no_app_here()
    if why is not None:
        if why != "stdout is not a terminal":  # a pipe or a file expects the report: no word about it
            print(f"pinmon: {why}: the check report instead", file=sys.stderr)
        return check.report(check.measure(window_s=1.0), config)
    from ..model.source import OpenedOnFirstRead

    interval_s = args.interval or config.interval_s

    def open_live():
        # On the app's reading thread: NVML's start and the collector's imports do not hold up the
        # first frame, which shows "collecting…" meanwhile.
        from ..collect.live import LiveCollector

        return LiveCollector(interval_s=interval_s)

    source = OpenedOnFirstRead(open_live)
    try:
        return run_app(source, config, args)
    finally:
        source.close()


# --- argument vector -------------------------------------------------------------------------------

def _command_index(argv: Sequence[str], parser: CliParser) -> Optional[int]:
    """Where the command word sits in ``argv`` (the first word that is neither an option nor the
    value of a global option), or None."""
    skip = False
    for i, token in enumerate(argv):
        if skip:
            skip = False
        elif token == "--":
            return i + 1 if i + 1 < len(argv) else None
        elif token.startswith("-"):
            skip = token in parser.value_options
        else:
            return i
    return None


def _looks_negative(token: str) -> bool:
    return len(token) > 1 and token[0] == "-" and (token[1].isdigit() or token[1] == ".")


def _attach_negative_values(argv: list[str], parser: CliParser, command_at: Optional[int]) -> list[str]:
    """``--max-pinned -5M`` -> ``--max-pinned=-5M``: argparse reads a value that starts with "-"
    as an option (and answers "expected one argument"); attached, it reaches the option's own
    check, which says what is wrong with it. Arguments of a command run by ``trace`` are left alone."""
    out: list[str] = []
    sub = parser.subcommands.get(argv[command_at]) if command_at is not None else None  # type: ignore[attr-defined]
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return out + argv[i:]
        in_command = command_at is not None and i > command_at
        if in_command and (sub is None or (sub.takes_remainder and not token.startswith("-"))):
            return out + argv[i:]
        options = sub.value_options if in_command else parser.value_options
        if token in options and i + 1 < len(argv) and _looks_negative(argv[i + 1]):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _option_names(p: CliParser) -> set[str]:
    return {o for a in p.arguments for o in a.option_strings} - {"-h", "--help"}


def _misplaced(extra: Sequence[str], parser: CliParser, command: Optional[str]) -> Optional[str]:
    """Where an option that argparse did not take belongs, when it is pinmon's own option given after
    the command, or the command's given before it; None for an option known nowhere."""
    sub = parser.subcommands.get(command) if command else None  # type: ignore[attr-defined]
    for token in extra:
        name = token.split("=", 1)[0]
        if not name.startswith("-"):
            continue
        if name in _option_names(parser):
            where = f"{name} is an option of pinmon itself: put it before the command (pinmon {name} ... {command})"
            if command == "check" and name == "--interval":
                where += "; check counts PCIe traffic over --window S"
            return where
        if sub is not None and name in _option_names(sub):
            return f"{name} is an option of pinmon {command}: put it after the command (pinmon {command} {name} ...)"
    return None


def _json_error(command: Optional[str], message: str) -> None:
    """With --json, an error is also a JSON object on stdout, so a script reading it gets a reason."""
    doc: dict = {}
    if JSON_SCHEMAS.get(command):
        doc["schema"] = JSON_SCHEMAS[command]
    # check's status words are Nagios's: bad input leaves the state unknown.
    doc.update(status="unknown" if command == "check" else "error", reason=message)
    print(dumps(doc, indent=1))


def _wants_json(argv: Sequence[str], command: Optional[str]) -> bool:
    if command not in JSON_SCHEMAS:
        return False
    head = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in head


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    at = _command_index(argv, parser)
    command = argv[at] if at is not None else None
    # argparse reports global options and unknown arguments from the top-level parser: keep the
    # command's exit code there too.
    bad_code = getattr(parser.subcommands.get(command), "bad_input_code", EXIT_BAD_INPUT)  # type: ignore[attr-defined]
    parser.bad_input_code = bad_code
    argv = _attach_negative_values(argv, parser, at)
    wants_json = _wants_json(argv, command)
    CliParser.last_error = None
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            owner = parser.subcommands.get(args.command, parser)  # type: ignore[attr-defined]
            owner.error(_misplaced(extra, parser, args.command) or f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:
        if e.code not in (0, None) and wants_json and CliParser.last_error:
            _json_error(command, CliParser.last_error)
        raise
    command = args.command
    run = COMMANDS[command].run if command is not None else run_default
    try:
        # Every command validates the config, so a bad file is an error wherever it is named; a
        # default file that was ignored is said once, here.
        for note in load_config(getattr(args, "sub_config", None) or args.config).notices:
            print(f"pinmon: {printable(note, 1000)}", file=sys.stderr)
        return run(args)
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
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
