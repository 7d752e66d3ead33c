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

EXIT_BAD_INPUT = 2
EXIT_CHECK_UNKNOWN = 3


class UsageError(Exception):
    """Bad input; the message is one line for the user."""


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line and with the command's own exit code."""

    bad_input_code = EXIT_BAD_INPUT

    def error(self, message: str):  # type: ignore[override]
        self.exit(self.bad_input_code, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (v > 0) or v == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return v


def _pid(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {text!r}") from None
    if v <= 0:
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
    p.add_argument("--interval", type=_positive_float, default=None, metavar="S",
                   help="refresh interval in seconds (default 1, or the config file's)")
    p.add_argument("--config", metavar="FILE", help="TOML config (default: the user config dir's pinmon/config.toml)")
    p.add_argument("--no-probe", action="store_true", help="no automatic probe in the live app")
    p.add_argument("--probe-every", type=_positive_float, default=60.0, metavar="S",
                   help="seconds between automatic quick probes in the live app (default 60)")
    p.add_argument("--max-pinned", type=_size, default=None, metavar="SIZE",
                   help="cap on pinned bytes a probe may allocate (default 256M, never over 5%% of available RAM)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    c = sub.add_parser("check", help="one snapshot, the advisor's findings; exit 0 ok, 1 warning, 2 critical, 3 unknown",
                       description="Take one snapshot (or read a saved one), run the advisor, print a report. "
                                   "Exit 0 ok, 1 warning, 2 critical, 3 unknown (could not assess).")
    c.bad_input_code = EXIT_CHECK_UNKNOWN
    c.add_argument("--json", action="store_true", help='print {"schema": "pinmon.check/1", "status", "snapshot", "findings"}')
    c.add_argument("--snapshot", metavar="FILE", help="assess a saved snapshot (--json output or a recording's last line)")
    c.add_argument("--config", metavar="FILE", dest="sub_config", help="TOML config")
    c.add_argument("--window", type=_positive_float, default=1.0, metavar="S",
                   help="seconds of PCIe counting before the snapshot (default 1)")
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
    r.add_argument("-o", "--output", required=True, metavar="FILE")
    r.add_argument("--interval", type=_positive_float, default=None, metavar="S", dest="sub_interval")
    r.add_argument("--duration", type=_positive_float, default=None, metavar="S", help="stop after S seconds (default: until Ctrl-C)")

    rp = sub.add_parser("replay", help="play a recording in the terminal app", description="Play a recording in the terminal app.")
    rp.add_argument("file", metavar="FILE")
    rp.add_argument("--speed", type=_positive_float, default=1.0, help="playback speed (default 1)")
    rp.add_argument("--json", action="store_true", help="print the recording's snapshots with findings as JSON lines instead")

    d = sub.add_parser("demo", help="play the bundled recording made on an NVIDIA H200",
                       description="Play the bundled recording made on an NVIDIA H200 (PCIe Gen5 x16) in the terminal app.")
    d.add_argument("--speed", type=_positive_float, default=1.0)
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

    return json.dumps({"schema": CHECK_SCHEMA, "status": worst_severity(findings),
                       "snapshot": snapshot.to_dict(), "findings": [f.to_dict() for f in findings]},
                      indent=1)


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
    from .collect.procmaps import estimate_pinned
    from .model import ProcessPinned
    from .outputs.text import process_table

    rows: list[ProcessPinned] = []
    notes: list[str] = []
    for path in args.maps_file or []:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            raise UsageError(f"{path}: cannot read ({e.strerror or e})") from None
        if text.strip() and not any(_looks_like_maps_line(l) for l in text.splitlines()[:50]):
            raise UsageError(f"{path}: not a /proc/PID/maps file (no 'start-end perms offset dev inode' lines)")
        est = estimate_pinned(text)
        rows.append(ProcessPinned(pid=0, name=os.path.basename(path), pinned_bytes=est.pinned_bytes,
                                  write_combined_bytes=est.write_combined_bytes,
                                  pinned_mappings=est.pinned_mappings, source="est."))
        if not est.is_cuda:
            notes.append(f"{path}: no /dev/nvidia* mapping: not a CUDA process, nothing counted")
    if args.pid or not args.maps_file:
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
        if args.pid:
            found = {p.pid for p in rows}
            for pid in args.pid:
                if pid not in found and os.path.exists(f"/proc/{pid}"):
                    notes.append(f"pid {pid}: not a CUDA process (no /dev/nvidia* mapping) or not readable")
                elif not os.path.exists(f"/proc/{pid}"):
                    notes.append(f"pid {pid}: no such process")
    if args.json:
        print(json.dumps({"schema": "pinmon.pinned/1", "processes": [r.to_dict() for r in rows],
                          "total_pinned_bytes": sum(r.pinned_bytes or 0 for r in rows),
                          "total_write_combined_bytes": sum(r.write_combined_bytes or 0 for r in rows),
                          "notices": notes}, indent=1))
    else:
        if rows:
            print("\n".join(process_table(rows, limit=len(rows))))
        else:
            print("no CUDA processes with pinned memory found")
        for n in notes:
            print(f"note: {n}")
        print("pinned = shared /dev/zero mappings, WC = user /dev/nvidiactl mappings (est.;"
              " cudaHostRegister'ed memory is invisible here)")
    return 0


def _looks_like_maps_line(line: str) -> bool:
    from .collect.procmaps import parse_maps

    return bool(parse_maps(line))


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
    try:
        with rec, LiveCollector(interval_s=interval) as col:
            col.snapshot()
            next_t = time.monotonic() + interval
            while args.duration is None or time.monotonic() - start < args.duration:
                time.sleep(max(0.0, next_t - time.monotonic()))
                next_t += interval
                rec.write(col.snapshot())
    except (KeyboardInterrupt, _Stop):
        pass
    except RecordingError as e:
        raise UsageError(str(e)) from None
    print(f"recorded {rec.count} snapshots to {args.output}", file=sys.stderr)
    return 0


def _open_replay(path: str):
    from .collect.replay import ReplaySource
    from .outputs.record import RecordingError

    try:
        return ReplaySource(path)
    except RecordingError as e:
        raise UsageError(str(e)) from None


def _replay_json(source, config) -> int:
    from collections import deque

    history: deque = deque(maxlen=4000)
    while True:
        snap = source.snapshot()
        if snap is None:
            break
        history.append(snap)
        findings = _advise(list(history), config)
        print(json.dumps({"snapshot": snap.to_dict(), "findings": [f.to_dict() for f in findings]}))
    for n in source.notices:
        print(f"pinmon: {n}", file=sys.stderr)
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if next((a for a in argv if not a.startswith("-")), None) == "check":
        # argparse reports unknown arguments from the top-level parser: keep check's exit code 3.
        parser.bad_input_code = EXIT_CHECK_UNKNOWN  # type: ignore[attr-defined]
    args = parser.parse_args(argv)
    command = args.command
    bad_code = EXIT_CHECK_UNKNOWN if command == "check" else EXIT_BAD_INPUT
    run = COMMANDS.get(command)
    if run is None and command is not None:
        run = next(m.run for m in _command_modules() if m.__name__.rsplit(".", 1)[-1] == command)
    try:
        return (run or cmd_default)(args)
    except UsageError as e:
        print(f"pinmon: error: {e}", file=sys.stderr)
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
