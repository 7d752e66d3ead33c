"""A stand-in for ``cupti.cupti``: the activity API calls pinmon's CUPTI engine makes, with CUPTI's
buffer protocol (a buffer is requested before records go in; flushing hands filled buffers to the
completion callback), and knobs for tests: ``_emit(record)``, ``fail_enable`` / ``fail_register``
(a ``Result`` status to raise), the env var ``FAKE_CUPTI_FAIL`` (a status raised by activity_enable),
``fail_api_switch`` (a status raised by the per-call switches of API records; ``refuse_api_switch``: the
(kind, cbid) pairs whose switch alone raises; ``unsupported_kinds``: kinds ``activity_enable`` refuses
with NotImplementedError, as cupti-python 12.8 refuses the API kinds).

Driver and runtime API records (kinds DRIVER and RUNTIME) are written while their kind is on, except
for a call switched off with ``activity_enable_driver_api`` / ``activity_enable_runtime_api``; the
callback id enums list a few calls with cupti-python's values.

``MAJOR`` (13 here; ``tests/trace/fakecupti12`` runs this file with 12) picks the names that differ
between cupti-python 13.0 and 12.8: ``ActivityAttribute.ATTR_DEVICE_BUFFER_SIZE`` against
``DEVICE_BUFFER_SIZE``, record dtypes ``activity_memcpy6_dtype`` against ``c_upti_activity_memcpy6_dtype``.
The dtypes are those of cupti-python 13.0.1 and 12.8.0 (the C structs of CUPTI 13.0 and 12.8).
"""
import ctypes
import enum
import os
import time

import numpy as np

MAJOR = globals().get("MAJOR", 13)


class ActivityKind(enum.IntEnum):
    INVALID = 0
    MEMCPY = 1
    MEMSET = 2
    DRIVER = 4
    RUNTIME = 5
    CONTEXT = 9
    MEMORY2 = 49


_PREFIX = "ATTR_" if MAJOR >= 13 else ""
ActivityAttribute = enum.IntEnum("ActivityAttribute", {
    _PREFIX + "DEVICE_BUFFER_SIZE": 0, _PREFIX + "DEVICE_BUFFER_POOL_LIMIT": 2,
    _PREFIX + "DEVICE_BUFFER_PRE_ALLOCATE_VALUE": 6, _PREFIX + "MEM_ALLOCATION_TYPE_HOST_PINNED": 8})

_MEMCPY6 = [("kind", "<i4"), ("copy_kind", "u1"), ("src_kind", "u1"), ("dst_kind", "u1"), ("flags_", "u1"),
            ("bytes", "<u8"), ("start", "<u8"), ("end", "<u8"), ("device_id", "<u4"), ("context_id", "<u4"),
            ("stream_id", "<u4"), ("correlation_id", "<u4"), ("runtime_correlation_id", "<u4"), ("pad", "<u4"),
            ("reserved0", "<i8"), ("graph_node_id", "<u8"), ("graph_id", "<u4"), ("channel_id", "<u4"),
            ("channel_type", "<i4")]
_MEMCPY6 += ([("is_device_launched", "u1"), ("pad2", "u1", (3,))] if MAJOR >= 13 else [("pad2", "<u4")])
_MEMCPY6 += [("copy_count", "<u8")]
_MEMORY4 = [("kind", "<i4"), ("memory_operation_type", "<i4"), ("memory_kind", "<i4"), ("correlation_id", "<u4"),
            ("address", "<u8"), ("bytes", "<u8"), ("timestamp", "<u8"), ("pc", "<u8"), ("process_id", "<u4"),
            ("device_id", "<u4"), ("context_id", "<u4"), ("stream_id", "<u4"), ("name", "<i8"),
            ("is_async", "<u4"), ("pad1", "<u4"),
            ("memory_pool_config", [("memory_pool_type", "<i4"), ("pad2", "<u4"), ("address", "<u8"),
                                    ("release_threshold", "<u8"), ("pool", "<u8"), ("utilized_size", "<u8")]),
            ("source", "<i8")]
_CONTEXT3 = [("kind", "<i4"), ("context_id", "<u4"), ("device_id", "<u4"), ("compute_api_kind", "<u2"),
             ("null_stream_id", "<u2"), ("parent_context_id", "<u4"), ("is_green_context", "u1"),
             ("padding", "u1"), ("num_multiprocessors", "<u2"), ("cig_mode", "<i4"), ("padding2", "<u4")]
_API = [("kind", "<i4"), ("cbid", "<u4"), ("start", "<u8"), ("end", "<u8"), ("process_id", "<u4"),
        ("thread_id", "<u4"), ("correlation_id", "<u4"), ("return_value", "<u4")]
_DTYPE_PREFIX = "activity_" if MAJOR >= 13 else "c_upti_activity_"
for _stem, _fields in (("memcpy6", _MEMCPY6), ("memory4", _MEMORY4), ("context3", _CONTEXT3), ("api", _API)):
    globals()[f"{_DTYPE_PREFIX}{_stem}_dtype"] = np.dtype(_fields)

_SIZES = {"runtime": 487, "driver": 782} if MAJOR < 13 else {"runtime": 523, "driver": 807}
runtime_api_trace_cbid = enum.IntEnum("runtime_api_trace_cbid", {
    "INVALID": 0, "cudaMalloc_v3020": 20, "cudaFreeHost_v3020": 26, "cudaHostAlloc_v3020": 27, "cudaMemcpy_v3020": 31,
    "cudaHostRegister_v4000": 152, "cudaHostUnregister_v4000": 153, "SIZE": _SIZES["runtime"],
    "FORCE_INT": 0x7fffffff})
driver_api_trace_cbid = enum.IntEnum("driver_api_trace_cbid", {
    "INVALID": 0, "cuMemHostAlloc": 39, "cuMemcpyHtoD_v2": 276, "cuMemHostRegister": 301, "cuMemHostUnregister": 302,
    "cuMemHostRegister_v2": 379, "SIZE": _SIZES["driver"], "FORCE_INT": 0x7fffffff})


class Result(enum.IntEnum):
    SUCCESS = 0
    ERROR_INVALID_PARAMETER = 1
    ERROR_NOT_INITIALIZED = 15
    ERROR_INSUFFICIENT_PRIVILEGES = 35
    ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39
    ERROR_UNKNOWN = 999


class cuptiError(Exception):
    def __init__(self, status):
        self.status = int(status)
        super().__init__(f"{Result(status).name}")


RECORD_BYTES = 96
callbacks = None
enabled = set()
attributes = {0: 3200000, 2: 250, 6: 3, 8: 1}
calls = []
fail_enable = int(os.environ.get("FAKE_CUPTI_FAIL", "0")) or None
fail_register = None
fail_api_switch = None
refuse_api_switch = set()  # (activity kind, cbid) whose per-call switch raises ERROR_INVALID_PARAMETER
unsupported_kinds = set()  # activity kinds activity_enable refuses (cupti-python 12.8: the API kinds)
api_switches = {}  # (activity kind, cbid) -> on, as the per-call switches left them
dropped = 0
_open = None      # (capacity, [records]) the buffer CUPTI is filling
_full = []        # filled buffers not yet delivered


def reset():
    global callbacks, fail_enable, fail_register, fail_api_switch, dropped, _open
    callbacks = None
    enabled.clear()
    calls.clear()
    api_switches.clear()
    refuse_api_switch.clear()
    unsupported_kinds.clear()
    fail_enable = fail_register = fail_api_switch = None
    dropped = 0
    _open = None
    _full.clear()


def activity_register_callbacks(requested, completed):
    global callbacks
    calls.append("register")
    if fail_register:
        raise cuptiError(fail_register)
    callbacks = (requested, completed)


def activity_enable(kind):
    calls.append(("enable", int(kind)))
    if int(kind) in unsupported_kinds:
        raise NotImplementedError(f"Activity Kind {ActivityKind(int(kind)).name} not supported")
    if fail_enable:
        raise cuptiError(fail_enable)
    enabled.add(int(kind))


def activity_disable(kind):
    calls.append(("disable", int(kind)))
    enabled.discard(int(kind))


def _switch(kind, cbid, enable):
    calls.append(("api", kind, int(cbid), int(enable)))
    if fail_api_switch:
        raise cuptiError(fail_api_switch)
    if (kind, int(cbid)) in refuse_api_switch:
        raise cuptiError(Result.ERROR_INVALID_PARAMETER)
    api_switches[(kind, int(cbid))] = bool(enable)


def activity_enable_runtime_api(cbid, enable):
    _switch(int(ActivityKind.RUNTIME), cbid, enable)


def activity_enable_driver_api(cbid, enable):
    _switch(int(ActivityKind.DRIVER), cbid, enable)


def _emit(record):
    """CUPTI writes one record: into the open buffer, asking for one first; dropped without one."""
    global _open, dropped
    if int(record.kind) not in enabled or callbacks is None:
        return
    if int(record.kind) in (ActivityKind.DRIVER, ActivityKind.RUNTIME) and \
            not api_switches.get((int(record.kind), int(record.cbid)), True):
        return
    if _open is None:
        size, _max = callbacks[0]()
        if not size:
            dropped += 1
            return
        _open = (max(int(size) // RECORD_BYTES, 1), [])
    _open[1].append(record)
    if len(_open[1]) >= _open[0]:
        _full.append(_open[1])
        _open = None


def activity_flush_all(flag):
    global _open
    calls.append(("flush", int(flag)))
    if _open is not None and _open[1]:
        _full.append(_open[1])
        _open = None
    while _full:
        records = _full.pop(0)
        if callbacks is not None:
            callbacks[1](records)


def activity_get_num_dropped_records(context, stream_id, dropped_ptr):
    global dropped
    ctypes.c_size_t.from_address(dropped_ptr).value = dropped
    dropped = 0


def activity_set_attribute(attr, size_ptr, value_ptr):
    attributes[int(attr)] = ctypes.c_size_t.from_address(value_ptr).value


def activity_get_attribute(attr, size_ptr, value_ptr):
    ctypes.c_uint64.from_address(value_ptr).value = attributes.get(int(attr), 0)
    ctypes.c_size_t.from_address(size_ptr).value = 8


def get_timestamp():
    return time.time_ns()
