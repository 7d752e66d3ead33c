"""``pinmon export``: a Prometheus exporter for the live machine or a recording.

A background thread takes a snapshot every ``--interval`` and runs the advisor; each scrape of
``/metrics`` serves the latest cached state (metric list in ``pinmon.export``). ``--once`` prints the
metrics text and exits (for tests and cron). Binds loopback unless told otherwise; ``--tls-cert``
(with ``--tls-key``, ``--tls-client-ca``) serves https (``pinmon.export.tls``). Exit 0 when SIGTERM /
SIGINT stops the server, 130 when SIGINT interrupts ``--once`` (it has printed nothing, and a one-shot
that did not do its job must not look like one that did), 2 for bad arguments, an unreadable
recording, a certificate or key that cannot be used, or a port that cannot be bound. ``--attach``
keeps every CUDA process attached (uprobes, a window per interval; ``--once``: one window over the
interval) and serves per-process copy rates (``export/families/copies.py``).
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

from ...limits import DEFAULT_TOP_PROCESSES as DEFAULT_TOP
from ...units import printable
from ..attaching import ATTACH_HELP
from ..common import UsageError, advise, open_replay, print_notices, speed_arg, top_processes_arg
from ..listen import DEFAULT_LISTEN, parse_listen
from ..options import Settings, shared
from ..parser import Commands

if TYPE_CHECKING:
    import ssl

    from ...attach import Attacher
    from ...collect.attached import AttachedSource, LatestOutcome
    from ...export import ExportState, MetricsServer, Refresher
    from ...export.background_probe import ProbeLoop
    from ...model import ProbeResult, Snapshot
    from ...model.source import Source

# What --probe-every runs: (the latest snapshot or None, a cancel event) -> the probe's result.
ProbeRunner = Callable[["Snapshot | None", threading.Event], "ProbeResult"]


def _listen(text: str) -> tuple[str, int]:
    try:
        host, port = parse_listen(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    # What the resolver would refuse later (a label over 63 characters, a name over 253, control
    # characters) is refused here, in one line, before anything is bound.
    try:
        ok = host.isprintable() and len(host.encode("idna")) <= 253
    except UnicodeError:
        ok = False
    if not ok:
        shown = host if len(host) <= 40 else host[:39] + "…"
        raise argparse.ArgumentTypeError(f"not a host name or address: {shown!r}")
    return host, port


def add_parser(sub: Commands) -> None:
    p = sub.add_parser(
        "export", parents=shared("config", "interval", "max_pinned", "probe_every", "oom_lookback"),
        help="Prometheus exporter: serve /metrics (loopback by default)",
        description="Serve the latest snapshot, the advisor's findings and probe results as Prometheus "
                    "metrics at http://HOST:PORT/metrics (https with --tls-cert). A background thread "
                    "collects every --interval seconds; a scrape never waits for collection. Exit 0 when "
                    "SIGTERM/SIGINT stops the server, 130 when SIGINT interrupts --once (nothing printed), 2 "
                    "for bad arguments, an unreadable recording, unusable TLS files or a port in use.")
    p.add_argument("--listen", type=_listen, default=parse_listen(DEFAULT_LISTEN), metavar="HOST:PORT",
                   help=f"address to serve on (default {DEFAULT_LISTEN}: loopback only, so nothing off this "
                        "machine can scrape it). A wider bind must be asked for explicitly, e.g. "
                        "--listen 0.0.0.0:9477; IPv6 in brackets, e.g. [::1]:9477; port 0 picks a free port")
    p.add_argument("--replay", metavar="FILE",
                   help="serve a recording instead of this machine, at its own pace; at its end the last "
                        "snapshot stays served (pinmon_replay_finished 1)")
    p.add_argument("--speed", type=speed_arg, default=None, metavar="X",
                   help="replay speed factor: 2 plays twice as fast (with --replay; default 1)")
    p.add_argument("--top-processes", type=top_processes_arg, default=DEFAULT_TOP, metavar="N",
                   help=f"per-process series for the N processes with most pinned memory, the rest summed "
                        f"as pid=\"other\" (default {DEFAULT_TOP})")
    p.add_argument("--tls-cert", metavar="FILE", help="serve https with this PEM certificate (chain)")
    p.add_argument("--tls-key", metavar="FILE", help="its PEM private key, unencrypted (default: in --tls-cert's file)")
    p.add_argument("--tls-client-ca", metavar="FILE", help="require client certificates signed by this PEM CA")
    p.add_argument("--attach", action="store_true",
                   help=ATTACH_HELP + "; serves per-process copy rates (live only)")
    p.add_argument("--once", action="store_true",
                   help="print the metrics text to stdout and exit (live: after --interval seconds of "
                        "counting; --replay: the state at the recording's end)")


# An error's text may quote what it failed on (a path under /tmp, a process's name): shown as data.
ERROR_CHARS = 300


def _say(text: str) -> None:
    print(f"pinmon export: {text}", file=sys.stderr, flush=True)


def _report(stage: str, exc: BaseException) -> None:
    text = printable(" ".join(str(exc).split()) or type(exc).__name__, ERROR_CHARS)
    _say(f"{stage} failed ({text}); serving the last good data, counting failures in "
         f"pinmon_collection_errors_total")


def _probe_runner(max_pinned: int | None) -> ProbeRunner:
    from ...probe import run_probe

    def runner(snapshot: Snapshot | None, cancel: threading.Event) -> ProbeResult:
        link: float | None = None
        eff: int | None = None
        if snapshot is not None:
            eff = snapshot.host.effective_mem_limit_bytes
            if snapshot.gpus:
                link = snapshot.gpus[0].link.theoretical_bytes_per_s
        return run_probe("quick", gpu_index=0, max_pinned_bytes=max_pinned, cancel=cancel,
                         link_theoretical_bytes_per_s=link, effective_mem_limit_bytes=eff)
    return runner


def _check_args(args: argparse.Namespace, settings: Settings) -> None:
    if args.speed is not None and not args.replay:
        raise UsageError("--speed needs --replay")
    if settings.probe_every_s is not None and args.replay:
        raise UsageError("--probe-every probes this machine's GPU; it does not combine with --replay")
    if settings.probe_every_s is not None and args.once:
        raise UsageError("--probe-every does not combine with --once (use pinmon check --probe)")
    if (args.tls_key or args.tls_client_ca) and not args.tls_cert:
        raise UsageError("--tls-key and --tls-client-ca need --tls-cert")
    if args.tls_cert and args.once:
        raise UsageError("--tls-cert serves https; --once prints to stdout and serves nothing")
    if args.attach and args.replay:
        raise UsageError("--attach counts this machine's processes; it does not combine with --replay")


def _once(source: Source, refresher: Refresher, interval: float,
          wait: Callable[[float], object] | None = None) -> None:
    if source.live:
        refresher.read()  # starts the PCIe counting interval
        (wait or time.sleep)(interval)
        snap = refresher.read()
        if snap is not None:
            refresher.publish(snap)
    else:
        refresher.drain()


def run(args: argparse.Namespace, settings: Settings) -> int:
    from ...export import ExportState, MetricsServer, Refresher, build_registry, metrics_text

    _check_args(args, settings)
    config = settings.config
    interval = settings.interval_s
    source: Source | None = open_replay(args.replay) if args.replay else None
    state = ExportState(live=source is None)
    registry = build_registry(state, args.top_processes)
    server: MetricsServer | None = None
    attacher: Attacher | None = None
    held: LatestOutcome | None = None
    try:
        if not args.once:
            host, port = args.listen
            tls = _tls_context(args)
            try:
                server = MetricsServer(registry, host, port, tls=tls)  # bind first: a busy port fails before collecting
            except (OSError, UnicodeError, ValueError) as e:  # the resolver may raise any of these
                reason = getattr(e, "strerror", None) or " ".join(str(e).split())
                raise UsageError(f"cannot listen on {_show_listen(host, port)}: {reason}") from None
        if source is None:
            from ...collect.attached import LatestOutcome
            from ...collect.live import LiveCollector
            from ..attaching import continuous

            attached: AttachedSource | None = None
            if args.attach and args.once:
                attached = held = LatestOutcome()   # one window over the --once interval
            elif args.attach:
                attached = attacher = continuous(interval)
            source = LiveCollector(interval_s=interval, oom_lookback_s=settings.oom_lookback_s, attached=attached)
        refresher = Refresher(source, state, lambda h: advise(h, config), interval_s=interval,
                              speed=args.speed or 1.0, on_error=_report, thresholds=config.thresholds)
        if server is None:  # --once
            _once(source, refresher, interval, None if held is None else _attach_window(held))
            sys.stdout.write(metrics_text(registry))
            sys.stdout.flush()
            print_notices(source, "pinmon export")  # a recording that ends early says so
            return 0
        return _serve(args, settings, source, refresher, server)
    finally:
        if server is not None:
            server.stop()
        if attacher is not None:
            attacher.stop()  # the probes out of the targets before pinmon exits
        if source is not None:
            source.close()


def _attach_window(held: LatestOutcome) -> Callable[[float], object]:
    """A wait that spends ``--once``'s interval attached to every CUDA process (``held`` gets the outcome)."""
    from ..attaching import window_or_wait

    def wait(seconds: float) -> None:
        held.set(window_or_wait(seconds)[0])
    return wait


def _tls_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    """The TLS settings of --tls-cert/--tls-key/--tls-client-ca; None for plain HTTP."""
    if not args.tls_cert:
        return None
    from ...export.tls import TlsError, server_context

    try:
        return server_context(args.tls_cert, args.tls_key, args.tls_client_ca)
    except TlsError as e:
        raise UsageError(str(e)) from None


def _show_listen(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _serve(args: argparse.Namespace, settings: Settings, source: Source, refresher: Refresher,
           server: MetricsServer) -> int:
    stop = threading.Event()
    previous: dict[signal.Signals, Callable[[int, FrameType | None], object] | int | None] = {}

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread (a test): Ctrl-C still raises
            pass
    prober: ProbeLoop | None = None
    try:
        server.start()
        refresher.start()
        what = f"replay of {printable(args.replay, ERROR_CHARS)}" if args.replay else "live"
        _say(f"serving {server.url} ({what})")
        if settings.probe_every_s is not None:
            prober = _start_prober(settings, source, refresher.state)
        notified = False
        while not stop.wait(0.2):
            if refresher.finished.is_set() and not notified:
                notified = True
                print_notices(source, "pinmon export")
    except KeyboardInterrupt:
        pass
    finally:
        if prober is not None:
            prober.stop()
        refresher.stop()
        for sig, old in previous.items():
            signal.signal(sig, old)
    return 0


def _start_prober(settings: Settings, source: Source, state: ExportState) -> ProbeLoop | None:
    from ...export.background_probe import ProbeLoop, ProbeTarget
    from ...probe import probe_available

    ok, reason = probe_available()
    if not ok:
        _say(f"{printable(reason, ERROR_CHARS)}; serving without probes")
        return None
    every_s = settings.probe_every_s
    if every_s is None:  # no --probe-every: nothing to schedule
        return None
    if not isinstance(source, ProbeTarget):  # a recording takes no results (--replay refuses --probe-every)
        return None
    return ProbeLoop(_probe_runner(settings.max_pinned_bytes), source, state, every_s, on_error=_report).start()
