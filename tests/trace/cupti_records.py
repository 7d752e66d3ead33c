"""CUPTI activity records for tests without a GPU.

``load(path)`` turns a JSON-lines dump written by ``bench/research/cupti_facts.py`` (``records.jsonl``) back
into objects with the attributes of cupti-python's record classes (``ActivityMemcpy6``,
``ActivityMemory4``, ``ActivityContext3``, ``ActivityAPI``). ``CONSTRUCTED`` is such a dump of records CONSTRUCTED with
cupti-python 13.0.1's ``from_data`` (the real field layout; made-up values, each line marked
``"constructed": true``), standing in until records recorded on a GPU are committed beside it.
``memcpy``/``memory``/``context``/``api`` copy one of those records with fields overridden.
"""
import copy
import json
import os
from types import SimpleNamespace

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
CONSTRUCTED = os.path.join(DATA, "cupti_records_constructed.jsonl")
# Records delivered on the H200 box by cupti-python 13.0.1 (bench/research/cupti_facts.py), at most 80 per
# workload, copy / pinned-memory / context kinds only.
H200 = os.path.join(DATA, "cupti_records_h200.jsonl")
MIB = 1 << 20
_DERIVED = {"class", "workload", "constructed", "duration_ns", "flags_names"}


class Record(SimpleNamespace):
    """A record object (weak-referenceable, as cupti-python's are)."""

    __slots__ = ("__weakref__",)


def _obj(d: dict):
    fields = {k: (_obj(v) if isinstance(v, dict) else v) for k, v in d.items()
              if k not in _DERIVED and not k.endswith("_name")}
    return Record(**fields)


def load(path: str = CONSTRUCTED) -> list:
    with open(path) as f:
        return [_obj(json.loads(line)) for line in f if line.strip()]


def _template(cls: str) -> dict:
    with open(CONSTRUCTED) as f:
        for line in f:
            d = json.loads(line)
            if d["class"] == cls:
                return d
    raise LookupError(cls)


def _make(cls: str, over: dict):
    d = copy.deepcopy(_template(cls))
    unknown = set(over) - set(d)
    if unknown:
        raise KeyError(f"{cls} has no fields {sorted(unknown)}")
    d.update(over)
    return _obj(d)


def memcpy(copy_kind=1, src_kind=2, dst_kind=3, nbytes=MIB, start=0, dur_ns=20_000, **over):
    """A MEMCPY record; kinds as CUPTI numbers them (HTOD 1, DTOH 2; PAGEABLE 1, PINNED 2, DEVICE 3)."""
    over.update(copy_kind=copy_kind, src_kind=src_kind, dst_kind=dst_kind, bytes=nbytes, start=start,
                end=start + dur_ns)
    return _make("ActivityMemcpy6", over)


def memory(op=1, memory_kind=2, nbytes=MIB, timestamp=0, **over):
    """A MEMORY2 record: ALLOCATION 1 / RELEASE 2 of PINNED 2 / DEVICE 3 / MANAGED 5 memory."""
    over.update(memory_operation_type=op, memory_kind=memory_kind, bytes=nbytes, timestamp=timestamp)
    return _make("ActivityMemory4", over)


def context(context_id=1, null_stream_id=7, **over):
    over.update(context_id=context_id, null_stream_id=null_stream_id)
    return _make("ActivityContext3", over)


def api(cbid=152, correlation_id=60, kind=5, return_value=0, **over):
    """A RUNTIME (5) or DRIVER (4) API record: cudaHostRegister_v4000 is runtime cbid 152, cuMemHostRegister_v2
    driver cbid 379 (cupti-python 12.8 and 13.0 alike)."""
    over.update(cbid=cbid, correlation_id=correlation_id, kind=kind, return_value=return_value)
    return _make("ActivityAPI", over)
