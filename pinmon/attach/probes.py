"""pinmon's uprobe definitions: named, written, removed, and those of a dead pinmon cleaned up.

Every probe of one pinmon process is in the group ``pinmon_<its pid>``; one event per probed file
(``call_0``, ``call_1``...), a valid tracefs identifier of at most 63 characters, holds that file's
probes, one per function. A definition::

    p:pinmon_123/call_0 /proc/123/fd/7:0x2a1b40 fn=\\41:u16 a0=%di:u64 ... a4=%r8:u64 a5=\\0:u64 ... a8=\\0:u64

A group whose pinmon is gone (SIGKILL leaves its probes behind) is removed by the next attach: its
pid is not running, or is pinmon's own, or is a process that holds no descriptor of the group's
instance (a live attach opens its instance's pipes before it defines a probe). Other tools' groups
are never touched, and neither is anything of a live pinmon.
"""
from __future__ import annotations

import errno
import os
import re
from dataclasses import dataclass

from . import catalog as c
from .arch import arg_register
from .catalog import CATALOG, Entry, Fetch
from .tracefs import Instance, Tracefs

GROUP_PREFIX = "pinmon_"
GROUP_RE = re.compile(r"^pinmon_([0-9]+)$")
NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")

# A file's probes share one event: entry probes whose fields fit nine 64-bit slots (a call's first
# five arguments, a copy descriptor's nine fields, or a batch's count and its first copies). The
# kernel puts probes in one event only where their fields have the same names and types, and it
# disables and removes an event's probes together, waiting for grace periods (tens of ms) per event,
# not per probe: with one event a function, detaching 85 probes took 5 s on the test box. Each probe
# carries its function as an immediate value (``fn``), so the event still says which function fired.
CALL = "call"
CALL_ARGS = 5
SLOTS = 9
FUNCTION_IDS: dict[str, int] = {name: i for i, name in enumerate(sorted(CATALOG))}
ENTRIES_BY_ID: dict[int, Entry] = {i: CATALOG[name] for name, i in FUNCTION_IDS.items()}


def group_name(pid: int) -> str:
    return f"{GROUP_PREFIX}{pid}"


@dataclass(frozen=True)
class Probe:
    event: str
    entry: Entry
    offset: int


def event_name(shape: str, file_index: int) -> str:
    name = f"{shape}_{file_index}"
    if not NAME_RE.match(name):
        raise ValueError(f"not a tracefs event name: {name!r}")
    return name


def fetch_text(name: str, fetch: Fetch, arch: str) -> str:
    reg = arg_register(arch, fetch.arg)
    where = reg if fetch.offset is None else f"+{fetch.offset}({reg})"
    return f"{name}={where}:{fetch.type}"


def fetch_args(entry: Entry, arch: str) -> list[str]:
    """The fetch-args of one probe: its function's id, then the slots ``a0..a8``, each 64 bits. A call
    fills them with its argument registers, a descriptor copy with its fields (in ``DESC_FIELDS``
    order), a batch with its count and the first copies' pointers and sizes (its fields' order);
    ``calls.call_fields`` turns the slots back into named fields cut to their types."""
    out = [f"fn=\\{FUNCTION_IDS[entry.name]}:u16"]
    if entry.kind in c.DESC_KINDS:
        fields = dict(entry.fields)
        slots = [fetch_text(f"a{i}", Fetch(0, "u64", fields[n].offset), arch) if n in fields else f"a{i}=\\1:u64"
                 for i, n in enumerate(c.DESC_FIELDS)]  # a 2D copy has no depth: 1
    elif entry.kind == c.BATCH:
        slots = [fetch_text(f"a{i}", Fetch(f.arg, "u64", f.offset), arch) for i, (_, f) in enumerate(entry.fields)]
        slots += [f"a{i}=\\0:u64" for i in range(len(slots), SLOTS)]
    else:
        slots = [f"a{i}={arg_register(arch, i)}:u64" if i < CALL_ARGS else f"a{i}=\\0:u64" for i in range(SLOTS)]
    if len(slots) != SLOTS:
        raise ValueError(f"{entry.name}: {len(slots)} slots, not {SLOTS}")
    return out + slots


def plan(offsets: dict[str, int], file_index: int, catalog: dict[str, Entry] | None = None) -> list[Probe]:
    """The probes for one file: each catalog function it exports, all in the file's one event."""
    event = event_name(CALL, file_index)
    return [Probe(event, entry, offsets[name]) for name, entry in sorted((catalog or CATALOG).items())
            if name in offsets]


def definition(group: str, probe: Probe, path: str, arch: str) -> str:
    head = f"p:{group}/{probe.event} {path}:0x{probe.offset:x}"
    return " ".join([head] + fetch_args(probe.entry, arch))


def listed_events(fs: Tracefs) -> dict[str, list[str]]:
    """group -> its events, from ``uprobe_events``."""
    out: dict[str, list[str]] = {}
    try:
        text = fs.read("uprobe_events")
    except OSError:
        return out
    for line in text.splitlines():
        head = line.split(" ", 1)[0]
        _, _, name = head.partition(":")
        group, sep, event = name.partition("/")
        if sep:
            out.setdefault(group, []).append(event)
    return out


def remove_events(fs: Tracefs, group: str, events: list[str]) -> list[str]:
    """Remove each event of ``group``; the reasons of those that could not be removed."""
    errors = []
    for event in events:
        try:
            fs.append("uprobe_events", f"-:{group}/{event}")
        except OSError as e:
            if e.errno != errno.ENOENT:
                errors.append(f"{group}/{event}: {os.strerror(e.errno) if e.errno else e}")
    return errors


def holds_instance(pid: int, instance: str, proc_root: str = "/proc") -> bool:
    """Whether process ``pid`` has a descriptor open on a file of tracefs instance ``instance``."""
    fd_dir = os.path.join(proc_root, str(pid), "fd")
    marker = f"/instances/{instance}/"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return False
    for n in names:
        try:
            if marker in os.readlink(os.path.join(fd_dir, n)):
                return True
        except OSError:
            continue
    return False


def _alive(pid: int, proc_root: str) -> bool:
    return os.path.exists(os.path.join(proc_root, str(pid)))


def clean_stale(fs: Tracefs, own_pid: int | None = None, proc_root: str = "/proc") -> tuple[list[str], list[str]]:
    """Remove the groups and instances of pinmon processes that are gone: (removed groups, errors)."""
    own = os.getpid() if own_pid is None else own_pid
    removed: list[str] = []
    errors: list[str] = []
    try:
        instances = [n for n in os.listdir(fs.path("instances")) if GROUP_RE.match(n)]
    except OSError:
        instances = []
    groups = {g: ev for g, ev in listed_events(fs).items() if GROUP_RE.match(g)}
    for name in sorted(set(instances) | set(groups)):
        pid = int(GROUP_RE.match(name).group(1))  # type: ignore[union-attr]
        dead = pid == own or not _alive(pid, proc_root)
        if not dead and (name not in groups or holds_instance(pid, name, proc_root)):
            continue  # a live pinmon's, or an instance whose pinmon may be starting
        if name in instances:  # dead, or stale: its group is there and nobody holds the instance
            inst = Instance(fs, name)
            inst.created = True
            try:
                inst.remove()
            except OSError as e:
                errors.append(f"instance {name}: {os.strerror(e.errno) if e.errno else e}")
        if name in groups:
            errs = remove_events(fs, name, groups[name])
            errors += errs
            if not errs:
                removed.append(name)
    return removed, errors
