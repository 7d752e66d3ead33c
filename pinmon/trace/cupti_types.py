"""The part of cupti-python the CUPTI engine uses, as typing Protocols: the ``cupti.cupti`` module the
engine holds (``Cupti``), its enums, and the record objects its own callbacks hand over.

cupti-python is no dependency of pinmon: it is imported inside the traced program, from that
program's environment, at one place (``engine_cupti._load_cupti``), which hands the untyped module on
as ``Cupti``; tests pass stand-ins (tests/trace/fakecupti) through the engine's ``loader``. A stub file
would type ``import cupti`` but not a module passed as a value; a Protocol names what any such value
must have, and costs nothing at run time.

The names and signatures are cupti-python 13.0.1's (its ``cupti/cupti.pyi``; 12.8.0 has the same
functions), for exactly what pinmon calls. Pointers and sizes are ``intptr_t``/``size_t`` there, so
ints. Names that differ between 12.8 and 13.0 (``ActivityAttribute.ATTR_DEVICE_BUFFER_SIZE`` against
``DEVICE_BUFFER_SIZE``, record dtypes ``activity_memcpy6_dtype`` against
``c_upti_activity_memcpy6_dtype``) are looked up by name and are not listed here.
tests/trace/test_cupti_types.py checks that the stand-ins, and where it is installed the real
cupti-python, have every name listed, with these parameter names.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol


class NamedInt(Protocol):
    """A member of one of cupti-python's IntEnums."""

    @property
    def name(self) -> str: ...

    def __int__(self) -> int: ...


class ActivityKinds(Protocol):
    """``cupti.ActivityKind``: the activity kinds the engine enables."""

    @property
    def MEMCPY(self) -> int: ...

    @property
    def MEMORY2(self) -> int: ...

    @property
    def CONTEXT(self) -> int: ...

    @property
    def DRIVER(self) -> int: ...

    @property
    def RUNTIME(self) -> int: ...


class CallbackIds(Protocol):
    """``cupti.runtime_api_trace_cbid`` / ``driver_api_trace_cbid``: an IntEnum class, iterated for its
    members (one per CUDA function, and INVALID, SIZE, FORCE_INT)."""

    def __iter__(self) -> Iterator[NamedInt]: ...


class Record(Protocol):
    """A record object of cupti-python's completion callback (``ActivityMemcpy6``, ...): its ``kind``;
    the fields of each kind are read by name (``cupti_raw.*_FIELDS``)."""

    @property
    def kind(self) -> int: ...


BufferRequested = Callable[[], "tuple[int, int]"]   # -> (buffer size in bytes, max records; 0: as fit)
BufferCompleted = Callable[[Sequence[Record]], None]


class Cupti(Protocol):
    """The ``cupti.cupti`` module. A CUPTI error raises ``cuptiError`` (its ``status`` a ``Result``)."""

    @property
    def ActivityKind(self) -> ActivityKinds: ...

    @property
    def ActivityAttribute(self) -> object:
        """Looked up by member name (``engine_cupti.activity_attribute``): the names differ by major."""
        ...

    @property
    def runtime_api_trace_cbid(self) -> CallbackIds: ...

    @property
    def driver_api_trace_cbid(self) -> CallbackIds: ...

    def Result(self, value: int) -> NamedInt: ...

    def activity_register_callbacks(self, func_buffer_requested: BufferRequested,
                                    func_buffer_completed: BufferCompleted) -> None: ...

    def activity_enable(self, kind: int) -> None: ...

    def activity_disable(self, kind: int) -> None: ...

    def activity_enable_runtime_api(self, cbid: int, enable: int) -> None: ...

    def activity_enable_driver_api(self, cbid: int, enable: int) -> None: ...

    def activity_flush_all(self, flag: int) -> None: ...

    def activity_get_num_dropped_records(self, context: int, stream_id: int, dropped: int) -> None:
        """``dropped``: the address of a size_t that receives the count."""
        ...

    def activity_set_attribute(self, attr: int, value_size: int, value: int) -> None:
        """``value_size``, ``value``: addresses of a size_t and of the value."""
        ...

    def activity_get_attribute(self, attr: int, value_size: int, value: int) -> None: ...

    def get_timestamp(self) -> int: ...
