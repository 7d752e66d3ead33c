"""The tracer's bookkeeping: counters, the table of pinned host ranges, and the per-process figures.

Hooks call the ``record_*`` methods; the report writer calls ``report()`` every half second. Every
method catches its own errors: bookkeeping must never break the traced program. One lock guards the
range table, the allocation counters and the call-site tables; it is held for a few dictionary
updates, never across a CUDA call. Copies, the hottest path, take no lock: each thread adds to its
own list of copy counters (``_tally``) and, for the copies a finding names (pageable, write-combined
readback), to its own call-site table; ``report()`` sums them. A report taken while another thread is inside a copy
may count that one copy's bytes and not yet its count; every copy is in the next report.

What is exact: every call that went through a hooked function (bytes, direction, host memory kind as
this table knows it). What is not seen: allocations and copies made inside CuPy or PyTorch C code,
other libraries' pinned memory, and CPU loads from a write-combined buffer (see ``readbacks``).
"""
from __future__ import annotations

import bisect
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable

from .callsite import call_site

_bisect_right = bisect.bisect_right  # a global lookup, not an attribute lookup, per copy

# Host memory kinds in the range table.
PINNED, WRITE_COMBINED, REGISTERED, POOL, TORCH = "pinned", "write_combined", "registered", "pool", "torch"

# Copy size classes: small copies are latency-bound, bulk ones bandwidth-bound.
SIZE_CLASSES = ((64 << 10, "lt_64k"), (1 << 20, "64k_1m"), (16 << 20, "1m_16m"), (None, "ge_16m"))
RATE_WINDOW_S = 5.0
RECENT_ALLOCS = 4096  # sizes kept for the median
TOP_SITES = 5
MAX_SITES = 1000  # call sites kept per category (and per thread for copies): bounded memory
COPY_SITE_CATEGORIES = ("pageable_copy", "wc_readback")
SITES_BY_CALLS = frozenset({"alloc"})  # categories whose sites rank by calls, not bytes


# The per-thread copy tally: one block of slots per (direction, host memory): bytes, count, then the
# bytes of each size class; then the write-combined counts and bytes per direction and the readbacks.
_CLASS_NAMES = tuple(name for _, name in SIZE_CLASSES)
_BLOCK = 2 + len(_CLASS_NAMES)
_COPY_BASE = {"h2d": 0, "d2h": 2 * _BLOCK}  # + _BLOCK for pageable
_WC_BASE = 4 * _BLOCK                       # + 2 for d2h: count, bytes
_READBACKS = _WC_BASE + 4


def _slot_keys() -> tuple[str, ...]:
    """The counter name of every tally slot, in slot order."""
    keys = []
    for d in ("h2d", "d2h"):
        for mem in ("pinned", "pageable"):
            keys += [f"copy.{d}.{mem}.bytes", f"copy.{d}.{mem}.count"]
            keys += [f"copy.{d}.{mem}.{name}.bytes" for name in _CLASS_NAMES]
    for d in ("h2d", "d2h"):
        keys += [f"copy.{d}.wc.count", f"copy.{d}.wc.bytes"]
    return tuple(keys + ["wc.readbacks"])


SLOT_KEYS = _slot_keys()


class _Owner:
    """Lives in a thread's local storage: when it is gone (the thread ended) its tally is final."""

    __slots__ = ("__weakref__",)


# A thread's copy call sites: category -> site -> [bytes, count].
CopySites = dict[str, dict[str, list[int]]]


class _Local(threading.local):
    """A thread's own copy tally, set on its first copy (until then, reading one raises AttributeError)."""

    owner: _Owner
    tally: list[int]
    sites: CopySites


def size_class(n: int) -> str:
    # An if chain, not a loop over SIZE_CLASSES: it runs on every copy.
    if n < 1 << 20:
        return "lt_64k" if n < 64 << 10 else "64k_1m"
    return "1m_16m" if n < 16 << 20 else "ge_16m"


def pow2_bucket(n: int) -> int:
    """Lower bound of the power-of-two bucket holding ``n`` (0 for 0)."""
    return 1 << (n.bit_length() - 1) if n > 0 else 0


def next_pow2(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else max(n, 1)


class TracerState:
    """Everything one traced process has seen. Thread-safe; never raises from ``record_*``."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock
        self.reset()

    def reset(self) -> None:
        """Forget everything, in place: a forked child starts empty, and the hooks keep this object."""
        self.started = self.clock()
        self.lock = threading.Lock()
        self.internal_errors = 0
        self.counters: Counter[str] = Counter()
        # Pinned host ranges: start -> (size, kind, requested, end); _starts is sorted for bisect.
        # The end is stored so that a lookup (every copy) does no arithmetic.
        self._ranges: dict[int, tuple[int, str, int, int]] = {}
        self._starts: list[int] = []
        self.held: Counter[str] = Counter()        # kind -> bytes held now
        self.requested: Counter[str] = Counter()   # kind -> bytes the program asked for, of those held
        self.peak_bytes = 0
        self.recent_sizes: deque[int] = deque(maxlen=RECENT_ALLOCS)
        self.histogram: Counter[int] = Counter()
        self.sites: dict[str, Counter[str]] = {}  # category -> Counter(site -> bytes)
        self.site_counts: dict[str, Counter[str]] = {}
        # (time, counters copy) for the rates; the start is the first baseline.
        self._samples: deque[tuple[float, Counter[str]]] = deque([(self.started, Counter())], maxlen=64)
        self.hooks: dict[str, bool] = {}
        self.missing: list[str] = []
        self.extra: dict[str, Callable[[], dict]] = {}  # name -> stats callable (pool, torch)
        self.held_override: dict[str, Callable[[], int | None]] = {}
        # copies in a direction other than h2d/d2h (none expected): (direction, pinned) -> counter names
        self._copy_keys: dict[tuple[str, bool], tuple[str, str, str]] = {}
        self._local = _Local()
        # (weakref to a thread's _Owner, its tally, its copy call sites), registered under lock
        self._tallies: list[tuple[weakref.ref[_Owner], list[int], CopySites]] = []
        self._folded = [0] * len(SLOT_KEYS)  # the tallies of threads that ended

    # --- the range table -------------------------------------------------------------------

    def _add_range(self, ptr: int, size: int, kind: str, requested: int) -> None:
        old = self._ranges.get(ptr)
        if old is not None:
            self._drop(ptr, old)
        else:
            bisect.insort(self._starts, ptr)
        self._ranges[ptr] = (size, kind, requested, ptr + max(size, 1))
        self.held[kind] += size
        self.requested[kind] += requested
        total = self._held_total()
        if total > self.peak_bytes:
            self.peak_bytes = total

    def _drop(self, ptr: int, entry: tuple[int, str, int, int]) -> None:
        size, kind, requested, _ = entry
        self.held[kind] -= size
        self.requested[kind] -= requested

    def _remove_range(self, ptr: int) -> tuple[int, str, int, int] | None:
        entry = self._ranges.pop(ptr, None)
        if entry is None:
            return None
        i = bisect.bisect_left(self._starts, ptr)
        if i < len(self._starts) and self._starts[i] == ptr:
            del self._starts[i]
        self._drop(ptr, entry)
        return entry

    def _held_total(self) -> int:
        return sum(v for v in self.held.values() if v > 0)

    def lookup(self, ptr: int) -> str | None:
        """The kind of pinned memory holding host address ``ptr``, or None (pageable, as far as known)."""
        # No lock: under the GIL a concurrent insert can at worst give a stale answer, and an
        # index or key error (an entry removed in between) reads as "not pinned".
        try:
            starts = self._starts
            i = _bisect_right(starts, ptr) - 1
            if i < 0:
                return None
            entry = self._ranges[starts[i]]
            return entry[1] if ptr < entry[3] else None
        except Exception:
            return None

    # --- events ----------------------------------------------------------------------------

    def _site(self, category: str, site: str | None, nbytes: int, count: int = 1) -> None:
        if site is None:
            return
        by = self.sites.get(category)
        if by is None:
            by = self.sites[category] = Counter()
            self.site_counts[category] = Counter()
        if site in by or len(by) < MAX_SITES:  # bounded
            by[site] += nbytes
            self.site_counts[category][site] += count

    def record_alloc(self, ptr: int, size: int, kind: str = PINNED, requested: int | None = None,
                     fresh: bool = True, site: str | None = None) -> None:
        """A pinned allocation. ``fresh``: a new driver allocation (not a block reused from a pool)."""
        # try/except in the body, not a decorator: one frame less per allocation.
        try:
            if site is None:
                site = call_site(2)
            req = size if requested is None else requested
            with self.lock:
                if ptr:
                    self._add_range(ptr, size, kind, req)
                c = self.counters
                c["alloc.calls"] += 1
                if fresh:
                    c["alloc.count"] += 1
                    c["alloc.bytes"] += size
                    self.recent_sizes.append(req)
                    self.histogram[pow2_bucket(req)] += 1
                if kind == WRITE_COMBINED:
                    c["alloc.wc.count"] += 1
                self._site("alloc", site, size)
                if size > req:
                    self._site("rounding_waste", site, size - req)
        except Exception:
            self.internal_errors += 1

    def record_free(self, ptr: int) -> None:
        try:
            with self.lock:
                entry = self._remove_range(ptr)
                self.counters["free.count"] += 1
                if entry is not None:
                    self.counters["free.bytes"] += entry[0]
        except Exception:
            self.internal_errors += 1

    def record_register(self, ptr: int, size: int) -> None:
        try:
            site = call_site(2)
            with self.lock:
                self._add_range(ptr, size, REGISTERED, size)
                self.counters["register.count"] += 1
                self._site("register", site, size)
        except Exception:
            self.internal_errors += 1

    def record_unregister(self, ptr: int) -> None:
        try:
            with self.lock:
                self._remove_range(ptr)
                self.counters["unregister.count"] += 1
        except Exception:
            self.internal_errors += 1

    def _tally(self) -> list[int]:
        """This thread's copy tally (made and registered on its first copy)."""
        try:
            return self._local.tally
        except AttributeError:
            pass
        tally, owner = [0] * len(SLOT_KEYS), _Owner()
        sites: CopySites = {category: {} for category in COPY_SITE_CATEGORIES}
        with self.lock:
            self._tallies.append((weakref.ref(owner), tally, sites))
        local = self._local
        local.owner, local.tally, local.sites = owner, tally, sites
        return tally

    def _copy_site(self, category: str, nbytes: int) -> None:
        """Charge a copy to its call site in this thread's table: [bytes, count] per site."""
        site = call_site(3)
        if site is None:
            return
        table = self._local.sites[category]
        entry = table.get(site)
        if entry is None:
            if len(table) >= MAX_SITES:
                return
            entry = table[site] = [0, 0]
        entry[0] += nbytes
        entry[1] += 1

    def record_copy(self, direction: str, nbytes: int, host_kind: str | None) -> None:
        """A host<->device copy; ``host_kind`` from ``lookup`` (None: pageable).

        The hottest path of the tracer (every copy): integer adds to this thread's tally, no lock,
        no allocation; a call-site walk (and the lock) only for a pageable copy or a write-combined
        readback, the slow copies a finding names."""
        try:
            base = _COPY_BASE.get(direction)
            if base is None:
                self._record_other_copy(direction, nbytes, host_kind)
                return
            if host_kind is None:
                base += _BLOCK
            try:
                tally = self._local.tally
            except AttributeError:
                tally = self._tally()
            # The size class by comparisons against constants: cheaper than a loop or a table.
            if nbytes < 1 << 20:  # noqa: SIM108  (two levels of size classes)
                cls = 2 if nbytes < 64 << 10 else 3
            else:
                cls = 4 if nbytes < 16 << 20 else 5
            tally[base] += nbytes
            tally[base + 1] += 1
            tally[base + cls] += nbytes
            if host_kind is None:
                self._copy_site("pageable_copy", nbytes)
            elif host_kind == WRITE_COMBINED:
                wc = _WC_BASE if base == 0 else _WC_BASE + 2
                tally[wc] += 1
                tally[wc + 1] += nbytes
                if wc != _WC_BASE:
                    # A device-to-host copy into write-combined memory exists to be read by the
                    # CPU, and that read is uncached: one readback per copy.
                    tally[_READBACKS] += 1
                    self._copy_site("wc_readback", nbytes)
        except Exception:
            self.internal_errors += 1

    def _record_other_copy(self, direction: str, nbytes: int, host_kind: str | None) -> None:
        """A copy in a direction the tally has no slots for: counted by name, as any counter."""
        pinned = host_kind is not None
        keys = self._copy_keys.get((direction, pinned))
        if keys is None:
            mem = "pinned" if pinned else "pageable"
            keys = self._copy_keys[(direction, pinned)] = (
                f"copy.{direction}.{mem}.bytes", f"copy.{direction}.{mem}.count", f"copy.{direction}.{mem}.")
        site = call_site(3) if not pinned else None
        with self.lock:
            c = self.counters
            c[keys[0]] += nbytes
            c[keys[1]] += 1
            c[f"{keys[2]}{size_class(nbytes)}.bytes"] += nbytes
            if not pinned:
                self._site("pageable_copy", site, nbytes)
            elif host_kind == WRITE_COMBINED:
                c[f"copy.{direction}.wc.count"] += 1
                c[f"copy.{direction}.wc.bytes"] += nbytes

    def _copy_totals(self) -> tuple[list[int], CopySites]:
        """Every thread's tally summed, and the copy call sites of live threads (category -> site
        -> [bytes, count]), under the lock; what ended threads counted is folded in for good."""
        totals = list(self._folded)
        live = []
        live_sites: CopySites = {}
        for owner, tally, sites in self._tallies:
            values = list(tally)  # one read of each slot: the owner may be adding to it
            for i, v in enumerate(values):
                totals[i] += v
            if owner() is None:  # the thread ended: its tables can no longer change
                self._folded = [a + b for a, b in zip(self._folded, values)]
                for category, table in sites.items():
                    for site, (nbytes, count) in table.items():
                        self._site(category, site, nbytes, count)
                continue
            live.append((owner, tally, sites))
            for category, table in sites.items():
                merged = live_sites.setdefault(category, {})
                for site, entry in list(table.items()):  # a snapshot: the owner may be adding
                    nbytes, count = entry[0], entry[1]
                    m = merged.get(site)
                    if m is None:
                        merged[site] = [nbytes, count]
                    else:
                        m[0] += nbytes
                        m[1] += count
        self._tallies = live
        return totals, live_sites

    def record_hook(self, name: str, ok: bool) -> None:
        try:
            self.hooks[name] = ok
            if not ok and name not in self.missing:
                self.missing.append(name)
        except Exception:
            self.internal_errors += 1

    # --- the report ------------------------------------------------------------------------

    def _rates(self, now: float, counters: Counter[str]) -> tuple[dict[str, float], float]:
        """Per-second rates of every counter over the last RATE_WINDOW_S (or since start)."""
        base_t, base = self._samples[0]
        for t, snap in self._samples:  # oldest first: keep the newest at least a window old
            if now - t >= RATE_WINDOW_S:
                base_t, base = t, snap
            else:
                break
        if now - self._samples[-1][0] >= 0.1:  # tests and a final report may come close together
            self._samples.append((now, counters))
        dt = now - base_t
        if dt <= 0:
            return {}, 0.0
        return {k: (v - base.get(k, 0)) / dt for k, v in counters.items()}, dt

    def _top(self, category: str, live: dict[str, list[int]] | None = None) -> list[dict]:
        """The TOP_SITES sites of ``category``: the kept table plus live threads' ``live``. Allocation
        sites rank by calls (what costs is how often a program allocates: one large buffer must not
        hide a loop of small ones), the others by bytes."""
        by = Counter(self.sites.get(category, ()))
        counts = Counter(self.site_counts.get(category, ()))
        for site, (nbytes, count) in (live or {}).items():
            by[site] += nbytes
            counts[site] += count
        ranked = (counts if category in SITES_BY_CALLS else by).most_common(TOP_SITES)
        return [{"site": s, "bytes": by.get(s, 0), "count": counts.get(s, 0)} for s, _ in ranked]

    def report(self, now: float | None = None) -> dict:
        """The figures of the ``pinmon.trace/1`` report (without the identity fields)."""
        now = self.clock() if now is None else now
        with self.lock:
            counters = Counter(self.counters)
            totals, live_sites = self._copy_totals()
            for key, v in zip(SLOT_KEYS, totals):
                if v:
                    counters[key] += v
            held = dict(self.held)
            requested = dict(self.requested)
            sizes = sorted(self.recent_sizes)
            histogram = {str(k): v for k, v in sorted(self.histogram.items())}
            sites = {cat: self._top(cat, live_sites.get(cat)) for cat in {*self.sites, *live_sites}}
            sites = {cat: top for cat, top in sites.items() if top}
            peak = self.peak_bytes
            ranges = len(self._ranges)
        extra = {}
        for name, fn in list(self.extra.items()):
            try:
                extra[name] = fn()
            except Exception:
                self.internal_errors += 1
        for kind, held_fn in list(self.held_override.items()):
            try:
                override = held_fn()
                if override is not None:
                    held[kind] = override
            except Exception:
                self.internal_errors += 1
        rates, window = self._rates(now, counters)
        held_total = sum(v for k, v in held.items() if v > 0 and k != WRITE_COMBINED)
        wc = max(held.get(WRITE_COMBINED, 0), 0)
        req_total = sum(max(requested.get(k, 0), 0) for k in held if k != WRITE_COMBINED)
        waste = max(sum(max(held.get(k, 0), 0) for k in held if k != WRITE_COMBINED) - req_total, 0)
        peak = max(peak, held_total + wc)
        copies: dict[str, dict[str, dict]] = {}
        for d in ("h2d", "d2h"):
            for mem in ("pinned", "pageable"):
                key = f"copy.{d}.{mem}"
                copies.setdefault(d, {})[mem] = {
                    "bytes": counters.get(key + ".bytes", 0), "count": counters.get(key + ".count", 0),
                    "bytes_per_s": rates.get(key + ".bytes", 0.0),
                    "size_classes": {name: {"bytes": counters.get(f"{key}.{name}.bytes", 0),
                                            "bytes_per_s": rates.get(f"{key}.{name}.bytes", 0.0)}
                                     for _, name in SIZE_CLASSES}}
        median = sizes[len(sizes) // 2] if sizes else None
        return {
            "window_s": window,
            "pinned": {
                "bytes": held_total, "peak_bytes": peak, "write_combined_bytes": wc,
                "registered_bytes": max(held.get(REGISTERED, 0), 0),
                "requested_bytes": req_total, "rounding_waste_bytes": waste,
                "by_kind": {k: max(v, 0) for k, v in held.items()}, "ranges": ranges,
            },
            "allocs": {
                "count": counters.get("alloc.count", 0), "calls": counters.get("alloc.calls", 0),
                "bytes": counters.get("alloc.bytes", 0), "frees": counters.get("free.count", 0),
                "per_s": rates.get("alloc.count", 0.0), "frees_per_s": rates.get("free.count", 0.0),
                "calls_per_s": rates.get("alloc.calls", 0.0),
                "median_bytes": median, "histogram": histogram,
                "write_combined": counters.get("alloc.wc.count", 0),
                "registers": counters.get("register.count", 0),
            },
            "copies": copies,
            "pageable_copy_bytes_per_s": rates.get("copy.h2d.pageable.bytes", 0.0)
            + rates.get("copy.d2h.pageable.bytes", 0.0),
            "pinned_copy_bytes_per_s": rates.get("copy.h2d.pinned.bytes", 0.0)
            + rates.get("copy.d2h.pinned.bytes", 0.0),
            "wc": {"readbacks": counters.get("wc.readbacks", 0),
                   "d2h_copies": counters.get("copy.d2h.wc.count", 0),
                   "h2d_copies": counters.get("copy.h2d.wc.count", 0)},
            "call_sites": sites,
            "extra": extra,
            "hooks": dict(self.hooks), "missing_hooks": list(self.missing),
            "internal_errors": self.internal_errors,
        }


_state: TracerState | None = None
_state_lock = threading.Lock()


def get_state() -> TracerState:
    global _state
    with _state_lock:
        if _state is None:
            _state = TracerState()
        return _state


def reset_state() -> None:
    """For tests: forget everything (a new process starts empty anyway)."""
    global _state
    with _state_lock:
        _state = None


