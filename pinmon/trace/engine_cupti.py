"""The CUPTI engine: copies and pinned allocations of every library in the process, from CUPTI.

``CuptiEngine.arm()`` imports ``cupti-python``, registers the buffer callbacks and enables the
activity kinds MEMCPY, MEMORY2 and CONTEXT, and DRIVER and RUNTIME for the calls that register host
memory only (``_select_api_records``: what tells registered bytes from allocated ones). The tracer
arms it when the program first imports a CUDA library (``CUDA_MODULES``): before the program's CUDA
work, and never in a Python process that does no CUDA. Completed buffers go to
``CuptiFigures.consume`` (sums only); ``flush()`` runs on the report interval, ``close()`` at exit
(forced flush, kinds disabled, so no callback runs while the interpreter shuts down).

Bounded memory: host buffers of ``BUFFER_BYTES``, at most ``MAX_OUTSTANDING`` handed to CUPTI and
not yet completed; past that the request gets no buffer and CUPTI drops records (counted in the
report). CUPTI's own device-side buffers (pinned host memory since CUDA 12.0 Update 1) are capped at
``DEVICE_BUFFER_POOL_LIMIT`` per context.

Both CUPTI majors work, whichever ``cupti-python`` the program's environment has (12.x for CUDA 12,
13.x for CUDA 13): their APIs differ in names only (``activity_attribute``, ``cupti_raw.layouts_of``),
and ``major`` in the report says which ran.

Failure never reaches the program: a missing ``cupti-python``, a missing driver, CUPTI taken by another
tool (Nsight, compute-sanitizer: ``ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED``) leave the engine
``failed`` with a one-line notice, and the tracer's hooks carry on alone. A torch.profiler or
jax.profiler session owns CUPTI while it runs: the engine pauses before it starts and re-arms after
it ends (``watch_profilers``), so the user's profile stays complete.
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from .cupti_figures import KIND_CONTEXT, KIND_MEMCPY, KIND_MEMORY2, CuptiFigures
from .cupti_raw import KIND_DRIVER, KIND_RUNTIME

if TYPE_CHECKING:
    from types import TracebackType

    from .cupti_raw import Parsed, RawCallbacks
    from .cupti_types import CallbackIds, Cupti, Record
    from .hooks_types import JaxTrace, Torch
    from .importhook import OnImport

BUFFER_BYTES = 1 << 20
MAX_OUTSTANDING = 16          # 16 MiB of record buffers at most
DEVICE_BUFFER_POOL_LIMIT = 8  # CUPTI's per-context device buffers (about 3 MB each by default)
KINDS = ("MEMCPY", "MEMORY2", "CONTEXT")
# API records of the calls that register host memory only, which tell a registered range from an
# allocation (cupti_registrations): per API kind, the prefix of the register calls' names in its enum
# of callback ids (cudaHostRegister_v4000; cuMemHostRegister, cuMemHostRegister_v2).
REGISTER_PREFIX = {"RUNTIME": "cudaHostRegister", "DRIVER": "cuMemHostRegister"}
NOT_CALLS = ("INVALID", "SIZE", "FORCE_INT")  # members of the callback id enums that name no call
# Calls of one API kind CUPTI may refuse to switch off (a callback id its library does not know)
# before the kind is given up: each one left on costs a record per call of it, read and ignored.
MAX_SWITCH_REFUSALS = 16
# Imported by programs that do CUDA work: arming on their import comes before that work. numba
# counts only with its CUDA part (plain numba is a CPU compiler). pinmon trace's bootstrap starts the
# tracer on the same list (bootstrap/sitecustomize.py TRIGGERS).
CUDA_MODULES = ("torch", "cupy", "jax", "jaxlib", "numba.cuda", "cuda", "tensorflow", "cudf", "rmm",
                "tensorrt", "pycuda", "triton", "onnxruntime", "paddle", "mxnet", "cuml", "nvidia.dali")

IDLE, ARMING, ARMED, PAUSED, FAILED, FORKED, CLOSED = (
    "idle", "arming", "armed", "paused", "failed", "forked", "closed")


def _status_name(cupti: Cupti | None, e: BaseException) -> str:
    status = getattr(e, "status", None)
    try:
        return cupti.Result(status).name if cupti is not None and status is not None else ""
    except Exception:
        return ""


def describe_error(cupti: Cupti | None, e: BaseException) -> str:
    """One line for the report: what went wrong, in CUPTI's words where it has any."""
    name = _status_name(cupti, e)
    if name == "ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED":
        return "in use by another tool (a profiler or debugger attached to this process)"
    if name == "ERROR_INSUFFICIENT_PRIVILEGES":
        return "needs profiling permission (NVreg_RestrictProfilingToAdminUsers)"
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return f"{type(e).__name__}: {text}"[:200] + (f" [{name}]" if name and name not in text else "")


class CuptiEngine:
    """One per process. Thread-safe; no method raises."""

    def __init__(self, loader: Callable[[], tuple[Cupti, str | None]] | None = None,
                 clock_ns: Callable[[], int] | None = None):
        self._loader = loader or _load_cupti
        self._clock_ns = clock_ns
        self.cupti: Cupti | None = None
        self.version: str | None = None
        self.major: int | None = None      # 12 or 13: which cupti-python the program's environment has
        self.state = IDLE
        self.notice: str | None = None
        self.figures: CuptiFigures | None = None
        self.paused_by: str | None = None
        self._pause_depth = 0
        self._lock = threading.RLock()        # arm / pause / resume / close
        self._buf_lock = threading.Lock()     # buffer accounting (CUPTI's threads)
        self.outstanding = 0
        self.buffers = 0
        self.refused = 0
        self.dropped = 0
        self.flushes = 0
        self.flush_errors = 0
        self.attributes: dict[str, object] = {}
        self.devices: dict[int, str | None] = {}  # CUDA device ordinal -> PCI bus id (or None)
        self.enabled: list[str] = []          # activity kinds enabled, by name
        # How records are read: "raw" (cupti_raw: libcupti's buffers, struct unpack) or "objects"
        # (cupti-python's record objects, slow: about 4 µs a field); None until armed.
        self.record_path: str | None = None
        self.raw_error: str | None = None
        self._raw: RawCallbacks | None = None
        # Why registered ranges are not told apart (then registered bytes stay the hooks'), or None;
        # and what is told apart only in part (an API kind that did not work, calls left on).
        self.registrations_error: str | None = None
        self.registrations_notes: list[str] = []
        self._raw_enabled: set[str] = set()  # API kinds turned on through libcupti (cupti-python 12.8)

    # --- arming ---------------------------------------------------------------------------

    def arm(self) -> bool:
        """Enable the activities once; True when CUPTI records are being collected."""
        with self._lock:
            if self.state in (ARMED, PAUSED):
                return True
            if self.state != IDLE:
                return False  # failed, closed, or arming already (cupti-python's own imports land here)
            self.state = ARMING
            try:
                c, self.version = self._loader()
            except ImportError as e:
                if e.name in (None, "cupti", "cupti.cupti"):
                    return self._fail(f"cupti-python is not installed ({e.name or e})")
                return self._fail(f"cupti-python does not load: {e.name} is missing")
            except Exception as e:
                return self._fail(f"cupti-python does not load: {describe_error(None, e)}")
            self.cupti = c
            self.major = cupti_major(c, self.version)
            try:
                ak = c.ActivityKind
                if (int(ak.MEMCPY), int(ak.MEMORY2), int(ak.CONTEXT)) != (KIND_MEMCPY, KIND_MEMORY2, KIND_CONTEXT):
                    return self._fail("cupti-python's activity kinds have unexpected values")
                self._set_device_buffers(c)
                self.figures = CuptiFigures(started_ns=self._now_ns())
                if self._pause_depth:
                    # A profiler session is running: collection starts when it ends (resume()).
                    self.state = PAUSED
                    self.paused_by = self.paused_by or "a profiler session"
                    return True
                self._enable()
            except Exception as e:
                self._disable()
                self.figures = None
                return self._fail(f"CUPTI did not start: {describe_error(c, e)}")
            self.state = ARMED
            return True

    def _enable(self) -> None:
        c = self.cupti
        if c is None:
            raise RuntimeError("cupti-python is not loaded")
        if self._raw is None and self.record_path != "objects":
            self._raw = self._raw_callbacks(c)
        if self._raw is not None:
            self._raw.register()
        else:
            c.activity_register_callbacks(self._requested, self._completed)
        for name in KINDS:
            c.activity_enable(_kind(c, name))
            self.enabled.append(name)
        self._select_api_records(c)

    def _select_api_records(self, c: Cupti) -> None:
        """Driver and runtime API records of the calls that register host memory, and of no other.

        CUPTI records every call of an enabled API kind but those switched off one by one (the cost of
        the others' records would be one per CUDA call), so each other call is switched off after the
        kind is on. Each kind stands alone: a kind whose switches cannot be set (a cupti-python without
        them, a CUPTI that refuses them) goes off again and is named in ``registrations_notes``, and
        the other kind's register calls are still told apart. A few calls CUPTI will not switch off
        (up to ``MAX_SWITCH_REFUSALS`` a kind: their records come and are ignored) are counted there
        too. Where neither kind works, registered ranges are not told apart (``registrations_error``)
        and the report's registered bytes stay the hooks'."""
        calls: set[tuple[int, int]] = set()
        notes: list[str] = []
        errors: list[str] = []
        for kind_name, kind in (("RUNTIME", KIND_RUNTIME), ("DRIVER", KIND_DRIVER)):
            try:
                found, refused = self._select_kind(c, kind_name, kind)
            except Exception as e:
                self._api_kind_off(c, kind_name)
                errors.append(f"{kind_name.lower()} API: {describe_error(c, e)}")
                continue
            calls |= found
            if refused:
                notes.append(f"{kind_name.lower()} API: {refused} calls' records could not be switched off")
        self.registrations_notes = notes + [f"{e}: its register calls are counted as allocations"
                                            for e in errors] if calls else []
        if not calls:
            self.registrations_error = ("registered ranges not told apart: "
                                        + ("; ".join(errors) or "cupti-python names no call that registers host memory"))
            return
        self.registrations_error = None
        if self.figures is not None:
            self.figures.track_registrations(frozenset(calls))

    def _select_kind(self, c: Cupti, kind_name: str, kind: int) -> tuple[set[tuple[int, int]], int]:
        """One API kind on, its register calls kept and its other calls switched off: (the register
        calls, how many others CUPTI would not switch off). Raises where the kind cannot be used."""
        ids: CallbackIds = c.runtime_api_trace_cbid if kind_name == "RUNTIME" else c.driver_api_trace_cbid
        switch: Callable[[int, int], None] = (c.activity_enable_runtime_api if kind_name == "RUNTIME"
                                              else c.activity_enable_driver_api)
        if int(_kind(c, kind_name)) != kind:
            raise ValueError(f"ActivityKind.{kind_name} is not {kind}")
        raw = self._raw
        try:
            c.activity_enable(kind)
        except NotImplementedError:
            # cupti-python 12.8 enables only the kinds it has record objects for; the raw path reads
            # API records itself, so libcupti is asked directly, and the per-call switches with it.
            if raw is None:
                raise
            raw.enable_kind(kind)
            self._raw_enabled.add(kind_name)
            switch = partial(raw.switch_api_call, kind)
        self.enabled.append(kind_name)
        prefix = REGISTER_PREFIX[kind_name]
        calls: set[tuple[int, int]] = set()
        refused = 0
        for member in ids:
            if member.name.startswith(NOT_CALLS):
                continue
            keep = member.name.startswith(prefix)
            try:
                switch(int(member), 1 if keep else 0)
            except Exception:
                if keep:
                    raise  # the register call itself: this kind tells nothing apart
                refused += 1
                if refused > MAX_SWITCH_REFUSALS:
                    raise
                continue
            if keep:
                calls.add((kind, int(member)))
        if not calls:
            raise LookupError(f"cupti-python names no {kind_name.lower()} call that registers host memory")
        return calls, refused

    def _api_kind_off(self, c: Cupti, kind_name: str) -> None:
        if kind_name in self.enabled:
            self.enabled.remove(kind_name)
            self._kind_off(c, kind_name)

    def _kind_off(self, c: Cupti | None, name: str) -> None:
        """One activity kind off, through libcupti where it was turned on that way."""
        try:
            if name in self._raw_enabled and self._raw is not None:
                self._raw_enabled.discard(name)
                self._raw.disable_kind(KIND_RUNTIME if name == "RUNTIME" else KIND_DRIVER)
            elif c is not None:
                c.activity_disable(_kind(c, name))
        except Exception:
            pass

    def _raw_callbacks(self, c: Cupti) -> RawCallbacks | None:
        """The fast record path (``cupti_raw``), or None (then ``cupti-python``'s record objects)."""
        try:
            from .cupti_raw import RawCallbacks, layouts_of, loaded_libcupti

            path = loaded_libcupti()
            if path is None:
                raise OSError("libcupti is not loaded")
            raw = RawCallbacks(ctypes.CDLL(path), layouts_of(c), self._request_bytes, self._completed_parsed)
            self.record_path = "raw"
            return raw
        except Exception as e:
            self.record_path = "objects"
            self.raw_error = f"{type(e).__name__}: {e}"[:200]
            return None

    def _disable(self) -> None:
        c = self.cupti
        for name in reversed(self.enabled):
            self._kind_off(c, name)
        self.enabled = []

    def _fail(self, notice: str) -> bool:
        self.state = FAILED
        self.notice = notice
        return False

    def _set_device_buffers(self, c: Cupti) -> None:
        """Cap CUPTI's device-side buffer pool, then read back what it uses."""
        try:
            _set_attr(c, activity_attribute(c, "DEVICE_BUFFER_POOL_LIMIT"), DEVICE_BUFFER_POOL_LIMIT)
        except Exception as e:
            self.attributes["set_error"] = describe_error(c, e)
        for key, name in (("device_buffer_bytes", "DEVICE_BUFFER_SIZE"),
                          ("device_buffer_pool_limit", "DEVICE_BUFFER_POOL_LIMIT"),
                          ("device_buffers_preallocated", "DEVICE_BUFFER_PRE_ALLOCATE_VALUE"),
                          ("device_buffers_in_pinned_memory", "MEM_ALLOCATION_TYPE_HOST_PINNED")):
            try:
                self.attributes[key] = _get_attr(c, activity_attribute(c, name))
            except Exception:
                self.attributes[key] = None

    # --- CUPTI's callbacks (CUPTI's threads or the flushing thread) ---------------------------

    def _request_bytes(self) -> int:
        with self._buf_lock:
            if self.outstanding >= MAX_OUTSTANDING or self.state == CLOSED:
                self.refused += 1
                return 0
            self.outstanding += 1
            self.buffers += 1
        return BUFFER_BYTES

    def _requested(self) -> tuple[int, int]:
        return self._request_bytes(), 0

    def _completed_parsed(self, parsed: Parsed) -> None:
        try:
            with self._buf_lock:
                self.outstanding = max(self.outstanding - 1, 0)
            figures = self.figures
            if figures is not None and self.state not in (CLOSED, FORKED):
                figures.consume_parsed(parsed)
        except Exception:
            pass  # never reaches CUPTI's thread

    def _completed(self, activities: Sequence[Record]) -> None:
        try:
            with self._buf_lock:
                self.outstanding = max(self.outstanding - 1, 0)
            figures = self.figures
            if figures is not None and self.state not in (CLOSED, FORKED):
                figures.consume(activities)
        except Exception:
            pass  # a callback that raised would reach CUPTI's thread; nothing here may

    # --- running ------------------------------------------------------------------------------

    def flush(self, forced: bool = False) -> None:
        """Hand completed buffers to ``_completed`` (on this thread). Never hold the figures' lock here."""
        c = self.cupti
        if self.state != ARMED or c is None:
            return
        try:
            c.activity_flush_all(1 if forced else 0)
            self.flushes += 1
        except Exception as e:
            self.flush_errors += 1
            self.notice = f"flush failed: {describe_error(c, e)}"
        try:
            n = ctypes.c_size_t(0)
            c.activity_get_num_dropped_records(0, 0, ctypes.addressof(n))
            self.dropped += int(n.value)
        except Exception:
            pass

    def pause(self, by: str) -> None:
        """Another CUPTI user (a profiler session) starts: deliver ours and step aside."""
        with self._lock:
            self._pause_depth += 1
            if self.paused_by is None:
                self.paused_by = by
            if self.state != ARMED:
                return
            self.flush(forced=True)
            self._disable()
            self.state = PAUSED

    def resume(self) -> None:
        """The profiler session ended: take the callbacks back and enable the kinds again."""
        with self._lock:
            self._pause_depth = max(self._pause_depth - 1, 0)
            if self._pause_depth:
                return
            if self.state != PAUSED:
                self.paused_by = None
                return
            try:
                self._enable()
                self.state = ARMED
                self.paused_by = None
            except Exception as e:
                self._disable()
                self._fail(f"CUPTI could not be re-armed after {self.paused_by}: {describe_error(self.cupti, e)}")

    def close(self) -> None:
        """At exit: the last records, then no more callbacks."""
        with self._lock:
            if self.state == ARMED:
                self.flush(forced=True)
            if self.state in (ARMED, PAUSED):
                self._disable()
                self.state = CLOSED

    def after_fork(self) -> None:
        """CUPTI does not follow a fork: the child reports with the hooks alone."""
        self._lock = threading.RLock()
        self._buf_lock = threading.Lock()
        if self.state in (ARMED, PAUSED):
            self.state = FORKED
            self.notice = "CUPTI is not armed in a forked child; figures come from the hooks"
        self.figures = None

    # --- the report -------------------------------------------------------------------------

    def _now_ns(self) -> int | None:
        try:
            if self._clock_ns is not None:
                return int(self._clock_ns())
            return int(self.cupti.get_timestamp()) if self.cupti is not None else None
        except Exception:
            return None

    def report(self) -> dict | None:
        """The ``cupti`` part of the report, or None while CUPTI never ran in this process."""
        figures = self.figures
        if figures is None:
            return None
        out = figures.report(self._now_ns())
        self._resolve_devices(figures.device_ids())
        out.update(version=self.version, major=self.major, state=self.state, paused_by=self.paused_by,
                   dropped_records=self.dropped, flushes=self.flushes, flush_errors=self.flush_errors,
                   buffers={"bytes": BUFFER_BYTES, "handed_out": self.buffers, "outstanding": self.outstanding,
                            "limit": MAX_OUTSTANDING, "refused": self.refused},
                   device_buffers=dict(self.attributes), record_path=self.record_path,
                   record_path_error=self.raw_error, registrations_error=self.registrations_error,
                   registrations_notes=list(self.registrations_notes),
                   raw_walk_mismatches=None if self._raw is None else self._raw.parser.walk_mismatches,
                   raw_callback_errors=None if self._raw is None else self._raw.callback_errors,
                   devices={str(k): {"pci_bus_id": v} for k, v in sorted(self.devices.items())})
        return out

    def _resolve_devices(self, ids: list[int]) -> None:
        for i in ids:
            if i not in self.devices:
                self.devices[i] = _pci_bus_id(i)


def _load_cupti() -> tuple[Cupti, str | None]:
    """cupti-python's ``cupti.cupti`` from the program's environment, and its version: the one place
    it is imported, untyped (it is no dependency of pinmon), and handed on as ``Cupti``."""
    from cupti import cupti

    try:
        from importlib import metadata
        version = metadata.version("cupti-python")
    except Exception:
        version = None
    return cupti, version


def activity_attribute(cupti: Cupti, name: str) -> int:
    """``cupti.ActivityAttribute`` member ``name`` ("DEVICE_BUFFER_SIZE"): cupti-python 13 spells it
    ``ATTR_DEVICE_BUFFER_SIZE``, 12.x ``DEVICE_BUFFER_SIZE``."""
    attr = cupti.ActivityAttribute
    for spelled in ("ATTR_" + name, name):
        member: int | None = getattr(attr, spelled, None)  # an IntEnum member, looked up by name
        if member is not None:
            return member
    raise AttributeError(f"cupti.ActivityAttribute has no {name}")


def _kind(cupti: Cupti, name: str) -> int:
    """``cupti.ActivityKind`` member ``name`` ("MEMCPY"): one of ``KINDS`` or an API kind."""
    member: int = getattr(cupti.ActivityKind, name)
    return member


def cupti_major(cupti: object, version: str | None) -> int | None:
    """The CUDA major ``cupti-python`` is built for: its version's first number, else what its names
    say (12.x names record dtypes ``c_upti_activity_*``, 13 ``activity_*``)."""
    try:
        return int(str(version).split(".")[0])
    except (TypeError, ValueError):
        pass
    names = dir(cupti)
    if any(n.startswith("c_upti_activity_") for n in names):
        return 12
    if any(n.startswith("activity_") and n.endswith("_dtype") for n in names):
        return 13
    return None


def _set_attr(c: Cupti, attr: int, value: int,
              ctype: type[ctypes.c_size_t] | type[ctypes.c_uint8] = ctypes.c_size_t) -> None:
    """Sets one activity attribute; ``ctype``: its C type (most are size_t, the switches uint8)."""
    v, size = ctype(value), ctypes.c_size_t(ctypes.sizeof(ctype))
    c.activity_set_attribute(attr, ctypes.addressof(size), ctypes.addressof(v))


def _get_attr(c: Cupti, attr: int) -> int:
    v, size = ctypes.c_uint64(0), ctypes.c_size_t(8)
    c.activity_get_attribute(attr, ctypes.addressof(size), ctypes.addressof(v))
    # A one-byte attribute fills the low byte only (little-endian): mask to what was written.
    return int(v.value) & ((1 << (8 * min(int(size.value), 8))) - 1)


def _pci_bus_id(ordinal: int) -> str | None:
    """PCI bus id of CUDA device ``ordinal`` (as CUPTI numbers devices), through cuda-bindings."""
    try:
        from cuda.bindings import driver
        err, dev = driver.cuDeviceGet(ordinal)
        if int(err) != 0:
            return None
        err, bus = driver.cuDeviceGetPCIBusId(32, dev)
        if int(err) != 0:
            return None
        text = bus.split(b"\0")[0].decode("ascii", "replace") if isinstance(bus, (bytes, bytearray)) else str(bus)
        return text.strip() or None
    except Exception:
        return None


# --- profiler sessions ------------------------------------------------------------------------

def watch_profilers(engine: CuptiEngine, when_imported: Callable[[str, OnImport], None]) -> None:
    """Pause the engine while a torch.profiler or jax.profiler session runs (both drive CUPTI)."""
    when_imported("torch", lambda torch: _watch_torch(engine, torch))
    when_imported("jax.profiler", lambda mod: _watch_jax(engine, mod))


Wrapped = Callable[..., object]


def _watch_torch(engine: CuptiEngine, torch: Torch) -> None:
    from .wrap import patch

    try:
        prof = torch.autograd.profiler.profile
    except AttributeError:
        return
    # torch.profiler.profile and the legacy API both drive Kineto through this class: it prepares
    # (and enables CUPTI) in _prepare_trace, or in __enter__ on versions without it, and ends in __exit__.
    start = "_prepare_trace" if hasattr(prof, "_prepare_trace") else "__enter__"

    def make_start(orig: Wrapped) -> Wrapped:
        def wrapper(self: object, *a: object, **k: object) -> object:
            if not getattr(self, "_pinmon_paused", False):
                engine.pause("torch.profiler")
                try:
                    vars(self)["_pinmon_paused"] = True  # a mark on the profiler's own object
                except Exception:
                    pass
            return orig(self, *a, **k)
        return wrapper

    def make_exit(orig: Wrapped) -> Wrapped:
        def wrapper(self: object, *a: object, **k: object) -> object:
            try:
                return orig(self, *a, **k)
            finally:
                if getattr(self, "_pinmon_paused", False):
                    try:
                        vars(self)["_pinmon_paused"] = False
                    except Exception:
                        pass
                    engine.resume()
        return wrapper

    patch(prof, start, make_start)
    patch(prof, "__exit__", make_exit)


def _watch_jax(engine: CuptiEngine, mod: object) -> None:
    """``jax.profiler``: ``start_trace``/``stop_trace``, and ``trace`` (a context manager and decorator)."""
    from .wrap import patch

    def make_start(orig: Wrapped) -> Wrapped:
        def start_trace(*a: object, **k: object) -> object:
            engine.pause("jax.profiler")
            try:
                return orig(*a, **k)
            except BaseException:
                engine.resume()
                raise
        return start_trace

    def make_stop(orig: Wrapped) -> Wrapped:
        def stop_trace(*a: object, **k: object) -> object:
            try:
                return orig(*a, **k)
            finally:
                engine.resume()
        return stop_trace

    def make_trace(orig: Callable[..., JaxTrace]) -> Callable[..., JaxTrace]:
        def trace(*a: object, **k: object) -> JaxTrace:
            return _Paused(orig(*a, **k), engine, "jax.profiler")
        return trace

    patch(mod, "start_trace", make_start)
    patch(mod, "stop_trace", make_stop)
    patch(mod, "trace", make_trace)


class _Paused:
    """A profiler's context manager with the engine paused from enter to exit."""

    def __init__(self, cm: JaxTrace, engine: CuptiEngine, by: str):
        self._cm, self._engine, self._by = cm, engine, by

    def __enter__(self) -> object:
        self._engine.pause(self._by)
        try:
            return self._cm.__enter__()
        except BaseException:
            self._engine.resume()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool | None:
        try:
            return self._cm.__exit__(exc_type, exc, tb)
        finally:
            self._engine.resume()

    def __call__(self, fn: Wrapped) -> Wrapped:  # used as a decorator, as the original allows
        decorated = self._cm(fn)
        engine, by = self._engine, self._by

        def traced(*a: object, **k: object) -> object:
            engine.pause(by)
            try:
                return decorated(*a, **k)
            finally:
                engine.resume()
        return traced


def announce(line: str, engine: str | None = None) -> None:
    """One line on stderr, in the first traced process only (``pinmon trace`` asks for it), unless
    ``engine`` is the one ``pinmon trace`` already said the program would get ($PINMON_TRACE_EXPECT)."""
    if os.environ.get("PINMON_TRACE_ANNOUNCE") != "1":
        return
    os.environ["PINMON_TRACE_ANNOUNCE"] = "0"  # children started later stay quiet
    if engine is not None and os.environ.get("PINMON_TRACE_EXPECT") == engine:
        return
    try:
        sys.stderr.write(f"pinmon trace: {line}\n")
        sys.stderr.flush()
    except Exception:
        pass
