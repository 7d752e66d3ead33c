"""``AttachSession``: uprobes on libcuda for a set of running processes, their calls tallied.

    with AttachSession([pid]) as s:      # attach: probes defined and enabled
        result = s.run(5.0)              # read events for 5 s -> AttachResult
    # detached: probes, instance and group removed

The steps of an attach, each failing with one line (``AttachError``) where attaching cannot work at
all, or a per-file / per-process reason where only part of it cannot: root and lockdown
(``tracefs.preflight``), tracefs found or mounted, uprobe events in the kernel, stale groups of dead
pinmons removed (``probes.clean_stale``), the targets and their libcuda files (``targets.py``), each
file's exported functions (``symbols.py``), a private instance with its pipes opened, the probes
defined, the targets' threads set as the instance's pids (new threads follow), the probes enabled.
Detaching undoes all of it, on a normal exit, an exception, Ctrl-C, SIGTERM and SIGHUP (turned into
``SignalReceived`` while attached).

The window starts when every probe is enabled and ends when the instance stops recording
(``tracing_on``, at once); events are counted by their time on CLOCK_MONOTONIC inside it.

The event budget: above ``Budget.max_events_per_s`` (over one second), events are recorded only
part of each second (``over="sample"``: rates from the enabled time, totals scaled to the window, the
share in ``sampled``) or disabled for the rest of the window (``over="stop"``, ``stopped_early``).
"""
from __future__ import annotations

import atexit
import errno
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..collect.processes.kernel_objects import KernelObjects, learn
from ..units import printable
from . import calls
from .aggregate import ProcessTally, Tally
from .arch import arch_of_kernel
from .catalog import CATALOG, HOST_KINDS
from .classify import MAX_RANGES, IsCuda, ProcessMemory
from .probes import ENTRIES_BY_ID, Probe, clean_stale, definition, group_name, plan, remove_events
from .reader import RawReader, Record, TextReader
from .results import AllocationStats, AttachResult, CopyStats, OtherCopies, ProbedFile, ProcessCopies
from .symbols import SymbolError, read_symbols
from .targets import Targets, comm, find_targets, threads
from .tracefs import Instance, Tracefs, TracefsError, explain_write_error, open_tracefs, preflight

PUMP_INTERVAL_S = 0.1
# The kernel's record of a new task, made in its parent: which process a thread started during the
# attach belongs to, even once it has exited (its /proc entry is gone by the time its events are read).
NEWTASK = ("task", "task_newtask")
CLONE_THREAD = 0x10000
MAX_TID_CACHE = 1 << 16
MAX_DECODED = 4096                 # distinct records kept decoded
SAMPLE_PERIOD_S = 1.0
MIN_DUTY = 0.05
MAX_NOTICES = 32                   # distinct notices kept: a session may run for days (record --attach)


class AttachError(Exception):
    """Attaching cannot work here; the text is one line for the user. ``fatal``: waiting does not
    change it (not root, no uprobes, lockdown, tracefs); else (no CUDA process yet) a later try may work."""

    def __init__(self, message: str, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


class SignalReceived(BaseException):
    """SIGTERM or SIGHUP arrived while attached (the session detaches on its way out)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


@dataclass(frozen=True)
class Budget:
    max_events_per_s: float = 50_000.0
    over: str = "sample"          # "sample" or "stop"
    buffer_kb_per_cpu: int = 1024
    # No host link moves more than this (PCIe 6.0 x16 is 128 GB/s, NVLink-C2C 900 GB/s): a process that
    # calls libcuda with made-up sizes claims more, and its figures are held to this.
    max_copy_bytes_per_s: float = 1e12


@dataclass
class _File:
    key: tuple[int, int]
    path: str
    pids: list[int]
    probes: list[Probe]
    refused: str | None = None


class AttachSession:
    def __init__(self, pids: list[int] | None = None, *, budget: Budget = Budget(), reader: str = "raw",
                 proc_root: str = "/proc", is_cuda: IsCuda | None = None,
                 objects: KernelObjects | None = None, tracefs: Tracefs | None = None,
                 euid: int | None = None, lockdown_path: str = "/sys/kernel/security/lockdown",
                 handle_signals: bool = True, clock: Callable[[], float] = time.monotonic) -> None:
        self.pids = None if pids is None else list(dict.fromkeys(pids))
        self.budget, self.reader_kind, self.proc_root = budget, reader, proc_root
        self.is_cuda, self.objects, self.fs = is_cuda, objects, tracefs
        self.euid, self.lockdown_path = euid, lockdown_path
        self.handle_signals, self.clock = handle_signals, clock
        self.own_pid = os.getpid()
        self.group = group_name(self.own_pid)
        self.instance: Instance | None = None
        self.reader: RawReader | TextReader | None = None
        self.targets: Targets | None = None
        self.files: list[_File] = []
        self.events: set[str] = set()             # the events defined (one a file)
        self.defined: list[str] = []
        self.tallies: dict[int, ProcessTally] = {}
        self.names: dict[int, str | None] = {}     # pid -> its comm when attached
        self.failed: dict[int, str] = {}
        self.notices: list[str] = []
        self.attach_s: float | None = None
        self.detach_s: float | None = None     # until the probes are gone from the targets
        self.cleanup_s: float | None = None    # then pinmon's instance removed
        self.window_start: float | None = None
        self.window_end: float | None = None
        self.mono_clock = False
        self.enabled = False
        self._enabled_since = 0.0
        self._enabled_total = 0.0
        self._events_read = 0
        self._lost = 0
        self._bad_pages = 0
        self._unattributed = 0
        self._overrun_base = 0
        self._tgids: dict[int, int | None] = {}
        self._decoded: dict[bytes, tuple | None] = {}
        self._rate_slot = (0.0, 0)
        self._duty: float | None = None
        self._stopped = False
        self._toggle_at = 0.0
        self._old_handlers: dict[int, object] = {}
        self._atexit = False
        self._lock = threading.Lock()

    # --- attach -----------------------------------------------------------------------------------

    def __enter__(self) -> AttachSession:
        self.attach()
        return self

    def __exit__(self, *exc: object) -> None:
        self.detach()

    def attach(self) -> None:
        t0 = time.monotonic()
        why = preflight(self.euid, self.lockdown_path)
        if why:
            raise AttachError(why, fatal=True)
        if self.fs is None:
            try:
                self.fs = open_tracefs()
            except TracefsError as e:
                raise AttachError(str(e), fatal=True) from None
        if not self.fs.has_uprobes:
            raise AttachError("this kernel has no uprobe events (CONFIG_UPROBE_EVENTS)", fatal=True)
        kernel_arch = arch_of_kernel(os.uname().machine)
        if kernel_arch is None:
            raise AttachError(f"no argument registers known for this CPU ({printable(os.uname().machine, 20)})",
                              fatal=True)
        self._install_signals()
        try:
            self._attach(kernel_arch)
        except BaseException:
            self.detach()
            raise
        self.attach_s = time.monotonic() - t0

    def _attach(self, kernel_arch: str) -> None:
        fs = self.fs
        assert fs is not None
        removed, errors = clean_stale(fs, self.own_pid, self.proc_root)
        if removed:
            self.notices.append(f"removed probes left by a pinmon that was killed ({', '.join(removed)})")
        self.notices += [f"could not remove stale probes: {e}" for e in errors[:3]]
        self.targets = find_targets(self.pids, self.proc_root, self.own_pid)
        self.failed.update(self.targets.failed)
        if not self.targets.files:
            detail = "; ".join(f"{p}: {w}" for p, w in list(self.failed.items())[:3])
            raise AttachError("no process that maps libcuda to attach to" + (f" ({detail})" if detail else ""))
        for index, (key, lib) in enumerate(sorted(self.targets.files.items())):
            f = _File(key, lib.path, list(lib.pids), [])
            self.files.append(f)
            try:
                syms = read_symbols(lib.fd, CATALOG)
            except SymbolError as e:
                f.refused = f"its exported functions cannot be read: {e}"
                continue
            if syms.arch != kernel_arch:
                f.refused = f"built for {syms.machine}, not this CPU"
                continue
            f.probes = plan(syms.offsets, index)
            if not f.probes:
                f.refused = "it exports none of the copy or pinned-memory functions"
        if self.objects is None:
            self.objects = learn()
        self.instance = Instance(fs, self.group)
        try:
            self.instance.create(self.budget.buffer_kb_per_cpu, record_tgid=self.reader_kind == "text")
        except OSError as e:
            raise AttachError(explain_write_error(e, "cannot make a trace instance")) from None
        self.mono_clock = self.instance.clock() == "mono"
        # Pipes first: they mark this instance as a live pinmon's for another pinmon's clean-up.
        self.reader = RawReader(self.instance) if self.reader_kind == "raw" else TextReader(self.instance)
        for f in self.files:
            if not f.refused:
                self._define(f, kernel_arch)
        missing = self.reader.learn(self.group, self.defined)
        if missing:
            self.notices.append(f"{len(missing)} probes' event layouts could not be read: their calls are not counted")
        live = [f for f in self.files if not f.refused]
        for f in self.files:
            if f.refused:
                for pid in f.pids:
                    self.failed[pid] = f"its libcuda ({f.path}): {f.refused}"
        if not live:
            raise AttachError(next(iter(self.failed.values()), "nothing could be probed"))
        owner = {t: pid for f in live for pid in f.pids for t in (threads(pid, self.proc_root) or [pid])}
        try:
            self.instance.set("set_event_pid", " ".join(str(t) for t in sorted(owner)))
        except OSError as e:
            raise AttachError(explain_write_error(e, "cannot set the instance's pids")) from None
        self._tgids.update(owner)
        if self.instance.set(os.path.join("events", *NEWTASK, "enable"), "1", optional=True):
            self.reader.learn(NEWTASK[0], [NEWTASK[1]])
        for f in live:
            self._enable(f)
        live = [f for f in self.files if not f.refused]
        for f in self.files:
            if f.refused:
                for pid in f.pids:
                    self.failed.setdefault(pid, f"its libcuda ({f.path}): {f.refused}")
        if not live:
            raise AttachError(next(iter(self.failed.values()), "nothing could be probed"))
        for f in live:
            for pid in f.pids:
                memory = ProcessMemory(pid, self.objects, self.proc_root, self.is_cuda)
                self.tallies[pid] = ProcessTally(pid, memory)
                self.names[pid] = comm(pid, self.proc_root)
        now = self.clock()
        self.window_start = self._enabled_since = self._toggle_at = now
        self._rate_slot = (now, 0)
        self.enabled = True

    def _define(self, f: _File, arch: str) -> None:
        assert self.fs is not None and self.targets is not None
        fd = self.targets.files[f.key].fd
        path = f"/proc/{self.own_pid}/fd/{fd}"
        done: list[Probe] = []
        for probe in f.probes:
            try:
                self.fs.append("uprobe_events", definition(self.group, probe, path, arch))
            except OSError as e:
                if not done:
                    f.refused = self._refusal(e, "defining a probe")
                    return
                self.notices.append(f"{probe.event}: not probed ({os.strerror(e.errno) if e.errno else e})")
                continue
            done.append(probe)
            if probe.event not in self.events:
                self.defined.append(probe.event)
                self.events.add(probe.event)
        f.probes = done

    def _enable(self, f: _File) -> None:
        assert self.instance is not None
        for i, event in enumerate(dict.fromkeys(p.event for p in f.probes)):
            try:
                self.instance.set(os.path.join("events", self.group, event, "enable"), "1")
            except OSError as e:
                if i == 0:
                    f.refused = self._refusal(e, "enabling a probe")
                    self._forget(f)
                    return
                self.notices.append(f"{event}: not enabled ({os.strerror(e.errno) if e.errno else e})")

    def _forget(self, f: _File) -> None:
        assert self.fs is not None
        names = list(dict.fromkeys(p.event for p in f.probes))
        remove_events(self.fs, self.group, names)
        self.events.difference_update(names)
        self.defined = [d for d in self.defined if d not in set(names)]
        f.probes = []

    @staticmethod
    def _refusal(e: OSError, what: str) -> str:
        if e.errno == errno.EINVAL:
            return (f"the kernel refused uprobes on this file ({what}: EINVAL); its file system may not "
                    "support them (squashfs): copy libcuda to a local disk and load it from there")
        return explain_write_error(e, what)

    # --- reading ----------------------------------------------------------------------------------

    def pump(self) -> int:
        """Read and tally what the kernel has; the number of events read.

        Calls that change what a pointer is (allocations, registrations, frees) and new threads are
        applied in order; copies between two of them are counted by their
        record's bytes first (a loop of equal copies: equal records) and applied once with a count."""
        if self.reader is None:
            return 0
        read_at = self.clock()
        batch = self.reader.read()
        for t in self.tallies.values():
            if t.memory.pending:
                t.memory.batch_read(read_at)
        self._lost += batch.lost
        self._bad_pages += batch.bad_pages
        start = self.window_start if self.mono_clock else -1.0
        end = self.window_end if self.window_end is not None and self.mono_clock else float("inf")
        pending: dict = {}
        for rec in batch.records:
            if batch.raw:
                ts, data = rec
                d = self._decoded.get(data)
                if d is None:
                    d = self._decode(self.reader.decode(data))  # type: ignore[union-attr]
                    if len(self._decoded) >= MAX_DECODED:
                        self._decoded.clear()
                    self._decoded[data] = d
                key = data
            else:
                ts, d, key = rec.ts, self._decode(rec), None
            if d is None:
                continue
            if d[0] == NEWTASK[1]:
                self._flush(pending)
                self._new_task(d[1], d[3])
                continue
            if not start <= ts <= end:
                continue
            if key is None or d[4]:
                self._flush(pending)
                self._apply(d, 1)
            else:
                got = pending.get(key)
                if got is None:
                    pending[key] = [1, d]
                else:
                    got[0] += 1
        self._flush(pending)
        n = len(batch.records)
        self._events_read += n
        self._budget(n)
        return n

    def _decode(self, rec: Record | None) -> tuple | None:
        """(event name or NEWTASK's, thread id, tgid, fields, in order?, entry) of a record."""
        if rec is None:
            return None
        if rec.event == NEWTASK[1]:
            return (NEWTASK[1], rec.tid, rec.tgid, rec.fields, True, None)
        entry = ENTRIES_BY_ID.get(rec.fields.get("fn", -1)) if rec.event in self.events else None
        if entry is None:
            return None
        return (rec.event, rec.tid, rec.tgid, calls.call_fields(entry, rec.fields), entry.kind in HOST_KINDS, entry)

    def _flush(self, pending: dict) -> None:
        for count, d in pending.values():
            self._apply(d, count)
        pending.clear()

    def _apply(self, d: tuple, times: int) -> None:
        _, tid, tgid, fields, _, entry = d
        pid = tgid if tgid in self.tallies else self._tgid(tid)
        tally = self.tallies.get(pid) if pid is not None else None
        if tally is None:
            self._unattributed += times
            return
        calls.apply(entry, fields, tally, times)

    def _new_task(self, parent_tid: int, fields: dict) -> None:
        child, flags = fields.get("pid"), fields.get("clone_flags")
        if not isinstance(child, int) or not isinstance(flags, int):
            return
        if len(self._tgids) >= MAX_TID_CACHE:
            self._tgids.clear()
        self._tgids[child] = self._tgid(parent_tid) if flags & CLONE_THREAD else child

    def _tgid(self, tid: int) -> int | None:
        if tid in self.tallies:
            return tid
        if tid in self._tgids:
            return self._tgids[tid]
        tgid = None
        try:
            with open(os.path.join(self.proc_root, str(tid), "status"), "rb") as f:
                for line in f.read(4096).splitlines():
                    if line.startswith(b"Tgid:"):
                        tgid = int(line.split()[1])
                        break
        except (OSError, ValueError, IndexError):
            tgid = None
        if len(self._tgids) >= MAX_TID_CACHE:
            self._tgids.clear()
        if tgid is not None:
            self._tgids[tid] = tgid  # a thread that is gone is asked again (None is not kept)
        return tgid

    def _note(self, text: str) -> None:
        """A notice once, and at most ``MAX_NOTICES`` of them (one that repeats every second is said once)."""
        if text not in self.notices and len(self.notices) < MAX_NOTICES:
            self.notices.append(text)

    def _set_enabled(self, on: bool) -> None:
        """Record events or not: the instance's own ``tracing_on``, which takes effect at once (the
        probes stay in place; disabling them waits for the kernel's grace periods)."""
        if self.instance is None or on == self.enabled:
            return
        now = self.clock()
        try:
            self.instance.set("tracing_on", "1" if on else "0")
        except OSError as e:
            self._note(explain_write_error(e, "toggling the probes"))
            return
        if on:
            self._enabled_since = now
        else:
            self._enabled_total += now - self._enabled_since
        self.enabled = on
        self._toggle_at = now

    def _budget(self, n: int) -> None:
        now = self.clock()
        slot_start, count = self._rate_slot
        count += n
        if now - slot_start >= SAMPLE_PERIOD_S:
            enabled_share = 1.0 if self._duty is None else self._duty
            rate = count / max(now - slot_start, 1e-9) / enabled_share
            self._rate_slot = (now, 0)
            if rate > self.budget.max_events_per_s and not self._stopped:
                if self.budget.over == "stop":
                    self._stopped = True
                    self._set_enabled(False)
                    if self.instance is not None:  # and the probes out of the targets' way
                        self.instance.set(os.path.join("events", self.group, "enable"), "0", optional=True)
                    return
                self._duty = max(MIN_DUTY, min(1.0, self.budget.max_events_per_s / rate * enabled_share))
        else:
            self._rate_slot = (slot_start, count)
        if self._duty is not None and not self._stopped:
            on_s = self._duty * SAMPLE_PERIOD_S
            if self.enabled and now - self._toggle_at >= on_s:
                self._set_enabled(False)
            elif not self.enabled and now - self._toggle_at >= SAMPLE_PERIOD_S - on_s:
                self._set_enabled(True)

    def _pump_for(self, seconds: float | None, stop: threading.Event | None) -> None:
        end = None if seconds is None else self.clock() + seconds
        while True:
            now = self.clock()
            if (end is not None and now >= end) or (stop is not None and stop.is_set()):
                break
            self.pump()
            wait = PUMP_INTERVAL_S if end is None else min(PUMP_INTERVAL_S, max(0.0, end - self.clock()))
            if stop is not None:
                stop.wait(wait)
            else:
                time.sleep(wait)

    def run(self, seconds: float | None, stop: threading.Event | None = None) -> AttachResult:
        """Tally events for ``seconds`` (or until ``stop`` is set), then end the window."""
        self._pump_for(seconds, stop)
        return self.finish()

    def run_window(self, seconds: float, stop: threading.Event | None = None) -> AttachResult:
        """Tally events for ``seconds`` (or until ``stop`` is set), then ``cut``: the probes stay."""
        self._pump_for(seconds, stop)
        return self.cut()

    def finish(self) -> AttachResult:
        """End the window: the probes disabled, what is left in the buffer read, the result."""
        if self.window_end is None and self.window_start is not None:
            self.window_end = self.clock()
            self._set_enabled(False)
            self.pump()
        return self.result()

    def cut(self) -> AttachResult:
        """The result of the window so far, and a new window from now, the probes left in place (a
        monitor's rolling windows). What the buffer holds is read into the window that ends; a call
        made while it is read counts there too (microseconds of the next window's)."""
        if self.window_start is None or self.window_end is not None:
            return self.result()
        now = self.clock()
        self.pump()
        result = self.result(end=now)
        gone = [pid for pid in self.tallies if not os.path.exists(os.path.join(self.proc_root, str(pid)))]
        for pid in gone:
            del self.tallies[pid]
        for pid, t in self.tallies.items():
            self.tallies[pid] = ProcessTally(pid, t.memory)
        self.window_start = now
        if self.enabled:
            self._enabled_since = now
        self._enabled_total = 0.0
        self._events_read = self._lost = self._bad_pages = self._unattributed = 0
        self._overrun_base = self._overrun(relative=False)
        return result

    # --- the result -------------------------------------------------------------------------------

    def result(self, end: float | None = None) -> AttachResult:
        start = self.window_start or self.clock()
        if end is None:
            end = self.window_end if self.window_end is not None else self.clock()
        window = max(end - start, 1e-9)
        enabled = self._enabled_total + (end - self._enabled_since if self.enabled else 0.0)
        enabled = max(min(enabled, window), 1e-9)
        partial = self._duty is not None or self._stopped
        scale = window / enabled if partial else 1.0
        lost = self._lost + self._overrun()
        notices = list(self.notices)
        if lost:
            notices.append(f"the kernel lost {lost} events (its buffer was full): figures are low")
        if self._unattributed:
            notices.append(f"{self._unattributed} events of threads that had exited could not be given a process")
        if self._bad_pages:
            notices.append(f"{self._bad_pages} event pages could not be read")
        if not self.mono_clock and self.instance is not None:
            notices.append("the instance's clock is not CLOCK_MONOTONIC: events of the first moments may count")
        if self._duty is not None:
            notices.append(f"over {self.budget.max_events_per_s:.0f} events/s: probes sampled, "
                           f"enabled {enabled / window:.0%} of the window; totals scaled")
        if self._stopped:
            notices.append(f"over {self.budget.max_events_per_s:.0f} events/s: probes stopped after {enabled:.1f} s")
        procs = {pid: _process(t, window, enabled, scale, self.budget.max_copy_bytes_per_s, self.names.get(pid))
                 for pid, t in self.tallies.items()}
        files = tuple(ProbedFile(f.path, f.key[0], f.key[1], len(f.probes), tuple(f.pids), f.refused)
                      for f in self.files)
        return AttachResult(window, enabled, procs, dict(self.failed), files, self._events_read, lost,
                            sampled=(enabled / window) if self._duty is not None else None,
                            stopped_early=self._stopped, attach_s=self.attach_s, started_mono=self.window_start,
                            notices=tuple(notices))

    def _overrun(self, relative: bool = True) -> int:
        """Events the kernel lost in pinmon's buffer (since the window began, where ``relative``)."""
        if self.instance is None or not self.instance.created:
            return 0
        total = sum(s.get("overrun", 0) + s.get("dropped events", 0) for s in self.instance.cpu_stats().values())
        return max(0, total - self._overrun_base) if relative else total

    # --- detach -----------------------------------------------------------------------------------

    def detach(self) -> None:
        """Remove everything the attach made; safe to call twice, and from any failure point.

        The probes go first (disabled, then deleted: the targets run untouched from then on, which
        ``detach_s`` times), pinmon's own instance and its buffers after (``cleanup_s``: removing an
        instance waits for the kernel's grace periods, and touches no target)."""
        with self._lock:
            t0 = time.monotonic()
            if self.instance is not None and self.instance.created:
                try:
                    self.instance.set(os.path.join("events", self.group, "enable"), "0", optional=True)
                except OSError:
                    pass
            if self.enabled:
                self._enabled_total += self.clock() - self._enabled_since
                self.enabled = False
            if self.window_end is None and self.window_start is not None:
                self.window_end = self.clock()
            if self.fs is not None and self.defined:
                errors = remove_events(self.fs, self.group, self.defined)
                self.notices += [f"could not remove a probe: {e}" for e in errors[:3]]
                self.defined = []
            t1 = time.monotonic()
            if self.reader is not None:
                self.reader.close()
                self.reader = None
            if self.instance is not None:
                try:
                    self.instance.remove()
                except OSError as e:
                    self.notices.append(f"could not remove the trace instance: {os.strerror(e.errno) if e.errno else e}")
            if self.targets is not None:
                self.targets.close()
            self._restore_signals()
            if self.window_start is not None and self.detach_s is None:
                self.detach_s = t1 - t0
                self.cleanup_s = time.monotonic() - t1

    def _install_signals(self) -> None:
        if not self._atexit:
            atexit.register(self.detach)
            self._atexit = True
        if not self.handle_signals or threading.current_thread() is not threading.main_thread():
            return

        def on_signal(signum, frame):
            raise SignalReceived(signum)
        for sig in (signal.SIGTERM, signal.SIGHUP):
            try:
                self._old_handlers[sig] = signal.signal(sig, on_signal)
            except (ValueError, OSError):
                pass

    def _restore_signals(self) -> None:
        for sig, handler in self._old_handlers.items():
            try:
                signal.signal(sig, handler)  # type: ignore[arg-type]
            except (ValueError, OSError, TypeError):
                pass
        self._old_handlers.clear()
        if self._atexit:
            atexit.unregister(self.detach)
            self._atexit = False


def _other(t: Tally, enabled: float, scale: float) -> OtherCopies:
    return OtherCopies(round(t.count * scale), round(t.bytes * scale), t.bytes / enabled)


def _process(t: ProcessTally, window: float, enabled: float, scale: float, cap: float,
             name: str | None = None) -> ProcessCopies:
    stats = []
    notes = []
    for (direction, memory), c in sorted(t.copies.items()):
        rate, total = c.bytes / enabled, round(c.bytes * scale)
        if rate > cap:
            notes.append(f"{direction} {memory}: the calls claimed {rate:.3g} B/s, more than any link moves; "
                         f"held to {cap:.3g}")
            rate, total = cap, min(total, round(cap * window))
        stats.append(CopyStats(direction, memory, rate, total, round(c.count * scale),
                               c.sizes.percentile(0.5), c.sizes.percentile(0.9), c.sizes.max or None,
                               c.unknown_size))
    a, r = t.allocations, t.registrations
    allocations = AllocationStats(
        count=round(a.count * scale), per_s=a.count / enabled, frees=round(t.frees * scale),
        frees_per_s=t.frees / enabled, median_bytes=a.sizes.percentile(0.5), size_p90_bytes=a.sizes.percentile(0.9),
        size_max_bytes=a.sizes.max or None, bytes=round(a.bytes * scale), flags=dict(t.alloc_flags),
        registrations=round(r.count * scale), registered_bytes=round(r.bytes * scale),
        registration_median_bytes=r.sizes.percentile(0.5), registration_max_bytes=r.sizes.max or None,
        registration_flags=dict(t.register_flags), unregistrations=round(t.unregistrations * scale))
    if len(t.memory.seen.by_start) >= MAX_RANGES:
        notes.append("too many ranges allocated or registered to follow them all")
    return ProcessCopies(
        pid=t.pid, window_s=window, stats=tuple(stats), peer=_other(t.peer_copies, enabled, scale),
        device=_other(t.device_copies, enabled, scale), host_to_host=_other(t.host_copies, enabled, scale),
        batch_calls=round(t.batch_calls * scale), batch_copies=round(t.batch_copies * scale),
        batch_copies_unmeasured=round(t.batch_copies_unmeasured * scale), batch_ops=round(t.batch_op_count * scale),
        pageable_may_be_registered=t.pageable_seen, allocations=allocations, notes=tuple(notes), name=name)
