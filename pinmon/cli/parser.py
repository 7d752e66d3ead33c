"""``CliParser``: argparse with pinmon's rules for bad input, negative values and a traced command.

- A bad argument is one line on stderr naming the option and pointing to the command's ``--help``,
  and exits with the command's own code (``bad_input_code``: 3 for ``check``, else 2), also where the
  top-level parser finds the fault before it reaches the command word.
- ``--max-pinned -5M``: argparse reads a value that starts with "-" and is not a plain number as an
  option and answers "expected one argument". Before parsing, each parser joins such a value to its
  own option that takes one (``--max-pinned=-5M``), so the value reaches the option's type function
  and its message. Abbreviated options are off (``allow_abbrev=False``), so the option names matched
  here are exactly the ones argparse matches.
- A parser whose last positional takes the rest (``pinmon trace [--] CMD ...``) hands everything from
  the first positional or ``--`` on to it untouched: the traced program's arguments are its own and
  are never parsed by pinmon, whatever argparse version runs.

Only argparse's public API is used: ``add_argument``, ``parse_known_args`` and ``error`` are
overridden, ``parents`` and ``add_subparsers`` are used as documented (``add_commands``).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn, Protocol, TypeVar, overload

from .common import EXIT_BAD_INPUT

_N = TypeVar("_N")


class Commands(Protocol):
    """What ``CliParser.add_commands`` returns (argparse's sub-parsers action): each command module's
    ``add_parser(sub)`` adds its parser with ``sub.add_parser(name, help=..., ...)``."""

    def add_parser(self, name: str, **kwargs: Any) -> CliParser: ...


def looks_negative(token: str) -> bool:
    """A value that starts with "-" and then a digit or a point: a negative number or size."""
    return len(token) > 1 and token[0] == "-" and (token[1].isdigit() or token[1] == ".")


class CliParser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line with its command's exit code, and reads
    negative values and a traced command's arguments as described in the module docstring."""

    bad_input_code = EXIT_BAD_INPUT
    last_error: str | None = None  # the message of the latest error, for --json output

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("allow_abbrev", False)
        self.arguments: list[argparse.Action] = []  # every option and positional, in order
        self.subcommands: dict[str, CliParser] = {}
        self.rest_dest: str | None = None  # the positional that takes the rest, if any
        self._argv: list[str] = []
        super().__init__(*args, **kwargs)  # it adds -h through add_argument
        for parent in kwargs.get("parents", ()):
            # argparse copies a parent's actions without add_argument: take them over by hand.
            for action in getattr(parent, "arguments", ()):
                self._note(action)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self._note(action)
        return action

    def _note(self, action: argparse.Action) -> None:
        self.arguments.append(action)
        if not action.option_strings and action.nargs == argparse.REMAINDER:
            self.rest_dest = action.dest

    def add_commands(self, **kwargs: Any) -> Commands:
        """``add_subparsers(**kwargs)`` making ``CliParser``s, whose commands this parser knows (``split``)."""
        sub = self.add_subparsers(parser_class=CliParser, **kwargs)
        self.subcommands = sub.choices  # filled in as commands are added
        return sub

    @property
    def value_options(self) -> set[str]:
        """The option strings that take exactly one value (``--interval S``)."""
        return {o for a in self.arguments if a.option_strings and a.nargs is None for o in a.option_strings}

    @property
    def option_names(self) -> set[str]:
        return {o for a in self.arguments for o in a.option_strings} - {"-h", "--help"}

    # --- reading the argument vector ----------------------------------------------------------

    def split(self, argv: Sequence[str]) -> tuple[list[str], int | None]:
        """(``argv`` with negative values joined to this parser's own options, the index there of
        its first positional or ``--``, whichever comes first, or None). The joining stops at
        ``--``, and in a parser with commands or a rest positional at the first positional: what
        follows is not this parser's to read."""
        stop = bool(self.subcommands) or self.rest_dest is not None
        values = self.value_options
        out: list[str] = []
        at: int | None = None
        i = 0
        while i < len(argv):
            token = argv[i]
            if token == "--":
                return out + list(argv[i:]), len(out) if at is None else at
            if token in values and i + 1 < len(argv):
                value = argv[i + 1]
                out += [f"{token}={value}"] if looks_negative(value) else [token, value]
                i += 2
                continue
            if token == "-" or not token.startswith("-"):
                at = len(out) if at is None else at
                if stop:
                    return out + list(argv[i:]), at
            out.append(token)
            i += 1
        return out, at

    def command_in(self, argv: Sequence[str]) -> str | None:
        """The command word in ``argv`` (its first positional, where that names a command), or None."""
        argv, at = self.split(argv)
        return argv[at] if at is not None and argv[at] in self.subcommands else None

    # argparse's own overloads: a namespace given is the one filled in and returned.
    @overload
    def parse_known_args(self, args: Iterable[str] | None = None,
                         namespace: None = None) -> tuple[argparse.Namespace, list[str]]: ...

    @overload
    def parse_known_args(self, args: Iterable[str] | None, namespace: _N) -> tuple[_N, list[str]]: ...

    @overload
    def parse_known_args(self, *, namespace: _N) -> tuple[_N, list[str]]: ...

    def parse_known_args(self, args: Iterable[str] | None = None,
                         namespace: object | None = None) -> tuple[object, list[str]]:
        self._argv = list(sys.argv[1:] if args is None else args)
        argv, at = self.split(self._argv)
        if self.rest_dest is None:
            return super().parse_known_args(argv, namespace)
        rest: list[str] = []
        if at is not None:
            argv, rest = argv[:at], argv[at:]
            if rest[0] == "--":
                rest = rest[1:]
        parsed, extra = super().parse_known_args(argv, namespace)
        setattr(parsed, self.rest_dest, rest)
        return parsed, extra

    # --- errors -------------------------------------------------------------------------------

    def error(self, message: str) -> NoReturn:
        code = self.bad_input_code
        if self.subcommands:
            # A global option's fault, found before argparse reached the command word: the
            # command's exit code all the same (check's 3).
            command = self.command_in(self._argv)
            if command is not None:
                code = self.subcommands[command].bad_input_code
        CliParser.last_error = f"{message} (see {self.prog} --help)"
        self.exit(code, f"{self.prog}: error: {CliParser.last_error}\n")
