"""Command line: ``pinmon [COMMAND]``. Parses arguments, wires sources to outputs, maps errors to exit codes.

Exit codes: 0 success; 2 bad input (arguments, config, recording or snapshot files); ``pinmon check``
uses the Nagios convention instead: 0 ok, 1 warning, 2 critical, 3 unknown (could not assess).
Bad input always gets one line on stderr, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Optional, Sequence

from .limits import (MAX_DURATION_S, MAX_INTERVAL_S, MAX_MAPS_BYTES, MAX_PROBE_EVERY_S, MAX_SPEED,
                     MAX_WINDOW_S, MIN_INTERVAL_S, MIN_PROBE_EVERY_S, MIN_SPEED)

EXIT_BAD_INPUT = 2
EXIT_CHECK_UNKNOWN = 3
MAX_PID = 1 << 22  # the kernel's largest pid_max
# The advisor sees the last 600 snapshots (10 minutes at 1 s), as in the terminal app.
ADVISOR_WINDOW = 600
# The schema of each command's --json output; an error is printed in the same envelope.
JSON_SCHEMAS = {"check": "pinmon.check/1", "pinned": "pinmon.pinned/1", "probe": "pinmon.probe/1",
                "replay": None}


class UsageError(Exception):
    """Bad input; the message is one line for the user."""


class _Parser(argparse.ArgumentParser):
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
        _Parser.last_error = f"{message} (see {self.prog} --help)"
        self.exit(self.bad_input_code, f"{self.prog}: error: {_Parser.last_error}\n")


def _seconds(low: float, high: float, what: str):
    """An argparse type: seconds from ``low`` to ``high`` (the caps in pinmon.limits)."""
    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not low <= v <= high:  # NaN fails too
            raise argparse.ArgumentTypeError(f"{what} must be a positive number of seconds from {low:g}"
                                             f" to {high:g}, got {text!r}")
        return v
    return parse


_interval = _seconds(MIN_INTERVAL_S, MAX_INTERVAL_S, "an interval")
_window = _seconds(MIN_INTERVAL_S, MAX_WINDOW_S, "the window")
_duration = _seconds(MIN_INTERVAL_S, MAX_DURATION_S, "the duration")
_probe_every = _seconds(MIN_PROBE_EVERY_S, MAX_PROBE_EVERY_S, "the probe period")


def _speed(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not MIN_SPEED <= v <= MAX_SPEED:
        raise argparse.ArgumentTypeError(f"speed is a factor (2 plays twice as fast, 0.5 at half speed),"
                                         f" from {MIN_SPEED:g} to {MAX_SPEED:g}, got {text!r}")
    return v


def _pid(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if not 0 < v <= MAX_PID:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}")
    return v


def _size(text: str) -> int:
    from .units import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    from .advise import RULE_DOCS

    rules = "\n".join(f"  {k:<22} {v}" for k, v in RULE_DOCS.items())
    p = _Parser(prog="pinmon", formatter_class=argparse.RawDescriptionHelpFormatter,
                description="PCIe traffic and pinned (page-locked) memory monitor for NVIDIA GPU servers.\n"
                            "Without a command: the live terminal app (or the check report when not on a terminal).",
                epilog="advisor rules (ids are stable; filter and alert on them):\n" + rules)
    from . import __version__

    p.add_argument("--version", action="version", version=f"pinmon {__version__}")
    p.add_argument("--interval", type=_interval, default=None, metavar="S",
                   help=f"refresh interval in seconds, {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}"
                        " (default 1, or the config file's)")
    p.add_argument("--config", metavar="FILE", help="TOML config (default: the user config dir's pinmon/config.toml)")
    p.add_argument("--no-probe", action="store_true", help="no automatic probe in the live app")
    p.add_argument("--probe-every", type=_probe_every, default=60.0, metavar="S",
                   help="seconds between automatic quick probes in the live app (default 60)")
    p.add_argument("--max-pinned", type=_size, default=None, metavar="SIZE",
                   help="cap on pinned bytes a probe may allocate (default 256M, never over 5%% of available RAM)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    p.subcommands = sub.choices  # type: ignore[attr-defined]

    c = sub.add_parser("check", help="one snapshot, the advisor's findings; exit 0 ok, 1 warning, 2 critical, 3 unknown",
                       description="Take one snapshot (or read a saved one), run the advisor, print a report. "
                                   "Exit 0 ok, 1 warning, 2 critical, 3 unknown (could not assess).")
    c.bad_input_code = EXIT_CHECK_UNKNOWN
    c.add_argument("--json", action="store_true", help='print {"schema": "pinmon.check/1", "status", "snapshot", "findings"}')
    c.add_argument("--snapshot", metavar="FILE", help="assess a saved snapshot (--json output or a recording's last line)")
    c.add_argument("--config", metavar="FILE", dest="sub_config", help="TOML config")
    c.add_argument("--window", type=_window, default=1.0, metavar="S",
                   help=f"seconds of PCIe counting before the snapshot, up to {MAX_WINDOW_S:g} (default 1)")
    c.add_argument("--probe", action="store_true", help="include a quick pinned-vs-pageable probe (needs CuPy and a GPU)")
    c.add_argument("--max-pinned", type=_size, default=None, metavar="SIZE", dest="sub_max_pinned",
                   help="cap on pinned bytes the probe may allocate")

    pn = sub.add_parser("pinned", help="per-process pinned memory table (estimated from /proc/PID/maps)",
                        description="Per-process CUDA pinned and write-combined memory, estimated from /proc/PID/maps.")
    pn.add_argument("--pid", type=_pid, action="append", default=None, metavar="PID", help="only this process (repeatable)")
    pn.add_argument("--maps-file", action="append", default=None, metavar="FILE",
                    help="estimate from a saved copy of /proc/PID/maps (repeatable)")
    pn.add_argument("--json", action="store_true", help="print JSON")

    r = sub.add_parser("record", help="write snapshots as JSON lines (gzip for .gz) for replay",
                       description="Record snapshots as JSON lines (gzip when FILE ends in .gz). Never overwrites a file.")
    r.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the new file to write (an existing file is never overwritten); gzip when it ends in .gz")
    r.add_argument("--interval", type=_interval, default=None, metavar="S", dest="sub_interval",
                   help=f"seconds between snapshots, {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g}"
                        " (default 1, or the config file's)")
    r.add_argument("--duration", type=_duration, default=None, metavar="S",
                   help="stop after S seconds, with a last snapshot then (default: until Ctrl-C)")

    rp = sub.add_parser("replay", help="play a recording in the terminal app",
                        description="Play a recording in the terminal app. When stdout is not a terminal,"
                                    " print the check report of the recording's last snapshot instead.")
    rp.add_argument("file", metavar="FILE", help="a recording made by pinmon record (.jsonl or .jsonl.gz)")
    rp.add_argument("--speed", type=_speed, default=1.0, metavar="X",
                    help="playback speed factor: 2 plays twice as fast (default 1)")
    rp.add_argument("--json", action="store_true", help="print the recording's snapshots with findings as JSON lines instead")

    d = sub.add_parser("demo", help="play the bundled recording made on an NVIDIA H200",
                       description="Play the bundled recording made on an NVIDIA H200 (PCIe Gen5 x16) in the"
                                   " terminal app. When stdout is not a terminal, print the check report of"
                                   " its last snapshot instead.")
    d.add_argument("--speed", type=_speed, default=1.0, metavar="X",
                   help="playback speed factor: 2 plays twice as fast (default 1)")
    for module in _command_modules():
        module.add_parser(sub)
    return p


def _command_modules():
    import importlib

    from .commands import MODULES

    return [importlib.import_module(f".commands.{name}", __package__) for name in MODULES]


# --- helpers -------------------------------------------------------------------------------------

def _load_config(path: Optional[str]):
    from .config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as e:
        raise UsageError(str(e)) from None


def _advise(history, config):
    from .advise import advise

    findings = advise(history, config.thresholds)
    if config.disabled_rules:
        findings = [f for f in findings if f.rule not in config.disabled_rules]
    return findings


def _check_json(snapshot, findings) -> str:
    from .model import CHECK_SCHEMA, worst_severity

    return _dumps({"schema": CHECK_SCHEMA, "status": worst_severity(findings),
                   "snapshot": snapshot.to_dict(), "findings": [f.to_dict() for f in findings]}, indent=1)


def _live_snapshot(collector, window_s: float):
    """A snapshot after ``window_s`` of counting, so PCIe rates cover a real interval."""
    collector.snapshot()  # starts the counting interval and the churn baseline
    time.sleep(window_s)
    return collector.snapshot()


def _quick_probe(max_pinned: Optional[int], snapshot=None):
    from .probe import run_probe

    link = None
    if snapshot is not None and snapshot.gpus:
        link = snapshot.gpus[0].link.theoretical_bytes_per_s
    return run_probe("quick", gpu_index=0, max_pinned_bytes=max_pinned, link_theoretical_bytes_per_s=link)


# --- commands ------------------------------------------------------------------------------------

def cmd_check(args) -> int:
    import dataclasses

    from .model import SEVERITY_RANK, worst_severity
    from .outputs.record import RecordingError
    from .outputs.text import format_check

    config = _load_config(args.sub_config or args.config)
    if args.snapshot:
        from .collect.replay import read_snapshot_file

        try:
            snap = read_snapshot_file(args.snapshot)
        except RecordingError as e:
            raise UsageError(str(e)) from None
        snap = dataclasses.replace(snap, source="snapshot")
    else:
        from .collect.collector import LiveCollector

        with LiveCollector(interval_s=args.window, kernel_read_every_s=0.0) as col:
            snap = _live_snapshot(col, args.window)
            if args.probe:
                result = _quick_probe(args.sub_max_pinned or args.max_pinned, snap)
                snap = dataclasses.replace(snap, probe=result)
    findings = _advise([snap], config)
    if args.json:
        print(_check_json(snap, findings))
    else:
        sys.stdout.write(format_check(snap, findings))
    return SEVERITY_RANK[worst_severity(findings)]


def cmd_pinned(args) -> int:
    from .model import ProcessPinned
    from .outputs.text import process_table

    rows: list[ProcessPinned] = []
    files: dict[int, str] = {}  # row index -> the saved maps file it was read from
    notes: list[str] = []
    for path in args.maps_file or []:
        est = _estimate_maps_file(path)
        files[len(rows)] = path
        # pid 0: no process behind a saved file; the output shows the file's name and no pid.
        rows.append(ProcessPinned(pid=0, name=os.path.basename(path), pinned_bytes=est.pinned_bytes,
                                  write_combined_bytes=est.write_combined_bytes,
                                  pinned_mappings=est.pinned_mappings, source="est."))
        if not est.is_cuda:
            notes.append(f"{path}: no /dev/nvidia* mapping: not a CUDA process, nothing counted")
    if args.pid or not args.maps_file:
        for pid in args.pid or []:
            if not os.path.exists(f"/proc/{pid}"):
                raise UsageError(f"pid {pid}: no such process")
        from .collect.processes import ProcessScanner, scan_notice

        scan = ProcessScanner(pids=args.pid).scan()
        from .collect.processes import _describe
        from .collect.traced import merge_traced, read_all

        # A traced process's row carries its in-process tracer's exact figures.
        traced = read_all()
        rows += merge_traced(scan.processes, traced, _describe, args.pid)
        notes += traced.notices
        n = scan_notice(scan)
        if n:
            notes.append(n)
        found = {p.pid for p in rows}
        for pid in args.pid or []:
            if pid not in found:
                notes.append(f"pid {pid}: not a CUDA process (no /dev/nvidia* mapping) or not readable")
    if args.json:
        procs = []
        for i, r in enumerate(rows):
            d = r.to_dict()
            if i in files:
                d.update(pid=None, maps_file=files[i])
            procs.append(d)
        print(_dumps({"schema": "pinmon.pinned/1", "processes": procs,
                      "total_pinned_bytes": sum(r.pinned_bytes or 0 for r in rows),
                      "total_write_combined_bytes": sum(r.write_combined_bytes or 0 for r in rows),
                      "notices": notes}, indent=1))
    else:
        from .units import printable

        if rows:
            print("\n".join(process_table(rows, limit=len(rows))))
        else:
            print("no CUDA processes with pinned memory found")
        for n in notes:
            print(f"note: {printable(n, 2000)}")
        print("pinned = shared /dev/zero mappings, WC = user /dev/nvidiactl mappings (est.;"
              " cudaHostRegister'ed memory is invisible here)")
    return 0


def _estimate_maps_file(path: str):
    """The pinned estimate of a saved /proc/PID/maps file; UsageError for anything else."""
    from .collect.procmaps import estimate_pinned, parse_maps
    from .infile import InputError, read_capped

    try:
        text = read_capped(path, MAX_MAPS_BYTES, "a maps file").decode("utf-8", errors="replace")
    except InputError as e:
        raise UsageError(str(e)) from None
    if not text.strip():
        raise UsageError(f"{path}: empty file, not a /proc/PID/maps file")
    if not any(parse_maps(line) for line in text.splitlines()[:50]):
        raise UsageError(f"{path}: not a /proc/PID/maps file (no 'start-end perms offset dev inode' lines)")
    return estimate_pinned(text)


def _dumps(obj, **kw) -> str:
    """JSON text that is always valid JSON: a NaN or infinity (none should reach here) is refused
    by ``allow_nan=False`` rather than printed bare."""
    return json.dumps(obj, allow_nan=False, **kw)


class _Stop(Exception):
    pass


def _install_stop_signals():
    def handler(signum, frame):
        raise _Stop()

    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):
            pass


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def cmd_record(args) -> int:
    from .collect.collector import LiveCollector
    from .outputs.record import Recorder, RecordingError

    config = _load_config(args.config)
    interval = args.sub_interval or args.interval or config.interval_s
    try:
        rec = Recorder(args.output)
    except RecordingError as e:
        raise UsageError(str(e)) from None
    _install_stop_signals()
    start = time.monotonic()
    deadline = None if args.duration is None else start + args.duration
    try:
        with rec, LiveCollector(interval_s=interval) as col:
            col.snapshot()
            next_t = start + interval
            while True:
                # Sleep to the next snapshot, but never past the end of --duration, where a last
                # snapshot covers the time since the one before (so a --duration shorter than the
                # interval still records one).
                wake = next_t if deadline is None else min(next_t, deadline)
                time.sleep(max(0.0, wake - time.monotonic()))
                now = time.monotonic()
                ended = deadline is not None and now >= deadline
                if now >= next_t or ended:
                    next_t += interval
                    rec.write(col.snapshot())
                if ended:
                    break
    except (KeyboardInterrupt, _Stop):
        pass
    except RecordingError as e:
        raise UsageError(str(e)) from None
    print(f"recorded {_plural(rec.count, 'snapshot')} to {args.output}", file=sys.stderr)
    return 0


def _open_replay(path: str):
    from .collect.replay import ReplaySource
    from .outputs.record import RecordingError

    try:
        return ReplaySource(path)
    except RecordingError as e:
        raise UsageError(str(e)) from None


def _print_notices(source, prefix: str = "pinmon") -> None:
    from .units import printable

    for n in getattr(source, "notices", []):
        print(f"{prefix}: {printable(n, 2000)}", file=sys.stderr)


def _replay_json(source, config) -> int:
    from collections import deque

    history: deque = deque(maxlen=ADVISOR_WINDOW)
    while True:
        snap = source.snapshot()
        if snap is None:
            break
        history.append(snap)
        findings = _advise(list(history), config)
        print(_dumps({"snapshot": snap.to_dict(), "findings": [f.to_dict() for f in findings]}))
    _print_notices(source)
    return 0


def _replay_report(source, config) -> int:
    """Without a terminal: the check report of the recording's last snapshot, advised over the
    snapshots before it as the terminal app would, instead of drawing the app into a file or pipe."""
    from collections import deque

    from .outputs.text import format_check

    history: deque = deque(maxlen=ADVISOR_WINDOW)
    while (snap := source.snapshot()) is not None:
        history.append(snap)
    findings = _advise(list(history), config)
    last = history[-1]  # a source always yields its first snapshot: it was read when it opened
    print(f"pinmon: stdout is not a terminal: the report of the last of"
          f" {_plural(len(history), 'snapshot')} in {source.path}", file=sys.stderr)
    sys.stdout.write(format_check(last, findings))
    _print_notices(source)
    return 0


def demo_path() -> str:
    from importlib import resources

    return str(resources.files("pinmon").joinpath("data/demo.jsonl.gz"))


def run_tui(source, config, args, speed: float = 1.0) -> int:
    try:
        from .tui.app import run_app
    except ImportError as e:  # the app is part of the package; this only guards broken installs
        raise UsageError(f"terminal app unavailable: {e}") from None
    kwargs = {}
    if source.live and not args.no_probe:
        from .probe import probe_available, run_probe

        ok, reason = probe_available()
        if ok:
            def runner(kind="quick", **kw):
                return run_probe(kind, max_pinned_bytes=args.max_pinned, **kw)
            kwargs["probe_runner"] = runner
        kwargs["probe_unavailable_reason"] = reason
        kwargs["probe_every_s"] = args.probe_every
    elif source.live:
        kwargs["probe_unavailable_reason"] = "probe disabled (--no-probe)"
        kwargs["probe_every_s"] = None
    return run_app(source=source, advisor=lambda h: _advise(h, config),
                   interval_s=(args.interval or config.interval_s) if source.live else getattr(source, "interval_s", 1.0),
                   speed=speed, **kwargs) or 0


def cmd_default(args) -> int:
    config = _load_config(args.config)
    if not sys.stdout.isatty():
        args.json = False
        args.snapshot = None
        args.sub_config = None
        args.window = 1.0
        args.probe = False
        args.sub_max_pinned = None
        return cmd_check(args)
    from .collect.collector import LiveCollector

    col = LiveCollector(interval_s=args.interval or config.interval_s)
    try:
        return run_tui(col, config, args)
    finally:
        col.close()


def cmd_replay(args, path: Optional[str] = None) -> int:
    config = _load_config(args.config)
    source = _open_replay(path or args.file)
    try:
        if getattr(args, "json", False):
            return _replay_json(source, config)
        if not sys.stdout.isatty():
            return _replay_report(source, config)
        return run_tui(source, config, args, speed=args.speed)
    finally:
        source.close()


def cmd_demo(args) -> int:
    path = demo_path()
    if not os.path.exists(path):
        raise UsageError("the bundled demo recording is missing from this installation")
    return cmd_replay(args, path)


COMMANDS = {"check": cmd_check, "pinned": cmd_pinned, "record": cmd_record, "replay": cmd_replay,
            "demo": cmd_demo}


# --- argument vector -------------------------------------------------------------------------------

def _command_index(argv: Sequence[str], parser: _Parser) -> Optional[int]:
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


def _attach_negative_values(argv: list[str], parser: _Parser, command_at: Optional[int]) -> list[str]:
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


def _json_error(command: Optional[str], message: str) -> None:
    """With --json, an error is also a JSON object on stdout, so a script reading it gets a reason."""
    doc: dict = {}
    if JSON_SCHEMAS.get(command):
        doc["schema"] = JSON_SCHEMAS[command]
    doc.update(status="unknown" if command == "check" else "error", reason=message)
    print(_dumps(doc, indent=1))


def _wants_json(argv: Sequence[str], command: Optional[str]) -> bool:
    if command not in JSON_SCHEMAS:
        return False
    head = argv[: argv.index("--")] if "--" in argv else argv
    return "--json" in head


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    at = _command_index(argv, parser)  # type: ignore[arg-type]
    command = argv[at] if at is not None else None
    bad_code = EXIT_CHECK_UNKNOWN if command == "check" else EXIT_BAD_INPUT
    # argparse reports global options and unknown arguments from the top-level parser: keep the
    # command's exit code there too.
    parser.bad_input_code = bad_code  # type: ignore[attr-defined]
    argv = _attach_negative_values(argv, parser, at)  # type: ignore[arg-type]
    wants_json = _wants_json(argv, command)
    _Parser.last_error = None
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:
            owner = parser.subcommands.get(args.command, parser)  # type: ignore[attr-defined]
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as e:
        if e.code not in (0, None) and wants_json and _Parser.last_error:
            _json_error(command, _Parser.last_error)
        raise
    command = args.command
    run = COMMANDS.get(command)
    if run is None and command is not None:
        run = next(m.run for m in _command_modules() if m.__name__.rsplit(".", 1)[-1] == command)
    try:
        # Every command validates the config, so a bad file is an error wherever it is named.
        _load_config(getattr(args, "sub_config", None) or args.config)
        return (run or cmd_default)(args)
    except UsageError as e:
        print(f"pinmon: error: {e}", file=sys.stderr)
        if getattr(args, "json", False) and command in JSON_SCHEMAS:
            _json_error(command, str(e))
        return bad_code
    except KeyboardInterrupt:
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
