"""``pinmon.snapshot/1`` -> ``/2``: a v1 snapshot document becomes a v2 one before it is read.

``Snapshot.from_dict`` calls ``snapshot_v1_to_v2`` for a ``/1`` document, the one place a ``/1`` document
is read, so recordings, ``--json`` dumps and check outputs of ``/1`` replay in every view as they did.
Only process rows and groups changed shape; the rest of the document is taken as it is.

A v1 row's flat fields move into the records of ``process.py``:

- name, user, cmdline, cgroup -> ``identity``; pinned, write-combined, VmPin, registered, requested
  (``requested_pinned_bytes``), VmLck, mappings (``pinned_mappings``), churn, ``estimate_capped`` ->
  ``held``; GPUs, GPU memory, pinned bytes per node -> ``placement``;
- ``transfers`` -> ``copies.stats`` (one per direction and kind); what ``h2d/d2h_copy_bytes_per_s``
  counted beyond them (managed and other host memory, CUPTI's) -> a stat of memory "other", so that
  ``Copies.bytes_per_s(direction)`` is the v1 figure; ``wc_readbacks`` -> the count of the
  d2h write-combined stat; the bulk figures -> ``copies.bulk``; ``copy_gpu_pci_bus_id``,
  ``pinned_bulk_default_stream_share`` -> ``copies``; ``trace_engine`` -> ``instrument``;
- ``pinned_allocs_per_s``, ``median_alloc_bytes`` -> ``allocations``.

A v1 group's ``pinned_bytes`` held its processes' VmPin; v2's ``held.pinned_bytes`` does not.

Each v1 value is checked against its v1 type as it moves, so an error names the path in the file that
was read; the v2 document is then read like any other.
"""
from __future__ import annotations

from typing import Any

from .serial import convert

SNAPSHOT_SCHEMA_V1 = "pinmon.snapshot/1"
SNAPSHOT_SCHEMA_V2 = "pinmon.snapshot/2"

_INT = int | None
_FLOAT = float | None
_STR = str | None

# v1 process field -> (its v1 type, the v2 record and field it moves to).
_PROCESS_MOVES: dict[str, tuple[Any, str, str]] = {
    "name": (_STR, "identity", "name"),
    "user": (_STR, "identity", "user"),
    "cmdline": (_STR, "identity", "cmdline"),
    "cgroup": (_STR, "identity", "cgroup"),
    "pinned_bytes": (_INT, "held", "pinned_bytes"),
    "write_combined_bytes": (_INT, "held", "write_combined_bytes"),
    "vm_pinned_bytes": (_INT, "held", "vm_pinned_bytes"),
    "registered_bytes": (_INT, "held", "registered_bytes"),
    "requested_pinned_bytes": (_INT, "held", "requested_bytes"),
    "vm_locked_bytes": (_INT, "held", "vm_locked_bytes"),
    "pinned_mappings": (_INT, "held", "mappings"),
    "mappings_churn": (_INT, "held", "mappings_churn"),
    "estimate_capped": (bool, "held", "capped"),
    "gpu_indices": (tuple[int, ...], "placement", "gpu_indices"),
    "gpu_memory_bytes": (_INT, "placement", "gpu_memory_bytes"),
    "pinned_bytes_by_node": (dict[str, int] | None, "placement", "pinned_bytes_by_node"),
}
# v1 copy and allocation figures, read here and turned into records.
_FIGURES: dict[str, Any] = {
    "trace_engine": _STR, "pageable_copy_bytes_per_s": _FLOAT, "wc_readbacks": _INT,
    "h2d_copy_bytes_per_s": _FLOAT, "d2h_copy_bytes_per_s": _FLOAT,
    "h2d_pinned_bulk_bytes_per_s": _FLOAT, "h2d_pinned_bulk_busy_s": _FLOAT,
    "d2h_pinned_bulk_bytes_per_s": _FLOAT, "d2h_pinned_bulk_busy_s": _FLOAT,
    "pinned_bulk_default_stream_share": _FLOAT, "copy_gpu_pci_bus_id": _STR,
    "transfers": dict[str, dict[str, float | None]] | None,
    "pinned_allocs_per_s": _FLOAT, "median_alloc_bytes": _INT,
}
_TRANSFER_KEYS = ("h2d.pinned", "h2d.pageable", "d2h.pinned", "d2h.pageable")
_TRANSFER_FIGURES = {"bytes_per_s": "bytes_per_s", "achieved_bytes_per_s": "achieved_bytes_per_s",
                     "rate_p50": "rate_p50_bytes_per_s", "rate_p10": "rate_p10_bytes_per_s"}
# v1 group field -> (its v1 type, the v2 record and field it moves to; None: the group itself).
_GROUP_MOVES: dict[str, tuple[Any, str | None, str]] = {
    "key": (str, None, "key"), "kind": (str, None, "kind"), "name": (str, None, "name"),
    "path": (_STR, None, "path"), "processes": (int, None, "processes"), "notes": (tuple[str, ...], None, "notes"),
    **{k: (_STR, "owner", k) for k in ("pod", "namespace", "container", "container_id", "pod_uid", "job", "step",
                                       "unit")},
    "delegated_uid": (_INT, "owner", "delegated_uid"),
    "memory_limit_bytes": (_INT, "limit", "limit_bytes"),
    "limit_path": (_STR, "limit", "limit_path"),
    "memory_current_bytes": (_INT, "limit", "current_bytes"),
    "oom_kills": (_INT, "limit", "oom_kills"),
    "oom_kills_at_start": (_INT, "limit", "oom_kills_at_start"),
    "write_combined_bytes": (_INT, "held", "write_combined_bytes"),
    "vm_pinned_bytes": (_INT, "held", "vm_pinned_bytes"),
}
# A direction's v1 total beyond its transfers by less than this (bytes/s, or this share of it) is the
# rounding of the two sums, not copies of another kind.
_ROUNDING_BYTES_PER_S = 1.0
_ROUNDING_SHARE = 1e-6


def snapshot_v1_to_v2(data: dict) -> dict:
    """The v2 document of the v1 snapshot ``data`` (a parsed JSON object); SchemaError naming the v1
    path of the first value that is not of its v1 type."""
    out = dict(data)
    out["schema"] = SNAPSHOT_SCHEMA_V2
    for key, migrate in (("processes", process_v1_to_v2), ("cgroups", cgroup_v1_to_v2)):
        rows = data.get(key)
        if isinstance(rows, list):  # anything else is for from_dict to refuse, with its path
            out[key] = [migrate(r, f"snapshot.{key}[{i}]") if isinstance(r, dict) else r
                        for i, r in enumerate(rows)]
    return out


def _read(row: dict, key: str, tp: Any, path: str) -> Any:
    """The row's value of ``key`` checked as ``tp``; None where the row has no such key."""
    if key not in row:
        return None
    return convert(tp, row[key], f"{path}.{key}", key)


def process_v1_to_v2(row: dict, path: str) -> dict:
    """A v1 process row as a v2 one."""
    out: dict[str, Any] = {k: row[k] for k in ("pid", "source", "call_sites") if k in row}
    records: dict[str, dict] = {"identity": {}, "held": {}, "placement": {}}
    for key, (tp, record, name) in _PROCESS_MOVES.items():
        if key in row:
            value = convert(tp, row[key], f"{path}.{key}", key)
            records[record][name] = list(value) if isinstance(value, tuple) else value
    out.update(records)
    f = {key: _read(row, key, tp, path) for key, tp in _FIGURES.items()}
    copies = _copies(f)
    if copies is not None:
        out["copies"] = copies
    allocations = _allocations(f, copies is None)
    if allocations is not None:
        out["allocations"] = allocations
    return out


def _instrument(f: dict) -> str:
    # A traced row before the tracer named its engine was the hooks'.
    return f["trace_engine"] if f["trace_engine"] is not None else "hooks"


def _copies(f: dict) -> dict | None:
    """The copies record of a v1 row's figures; None where it has none."""
    copy_keys = [k for k in _FIGURES if k not in ("trace_engine", "pinned_allocs_per_s", "median_alloc_bytes")]
    if all(f[k] is None for k in copy_keys):
        return None
    stats: list[dict] = []
    transfers = f["transfers"] or {}
    for key in _TRANSFER_KEYS:
        row = transfers.get(key)
        if row is None:
            continue
        direction, memory = key.split(".")
        stats.append({"direction": direction, "memory": memory,
                      **{v2: row.get(v1) for v1, v2 in _TRANSFER_FIGURES.items()}})
    for direction in ("h2d", "d2h"):
        total = f[f"{direction}_copy_bytes_per_s"]
        if total is None:
            continue
        split = sum(s["bytes_per_s"] or 0.0 for s in stats if s["direction"] == direction)
        rest = total - split
        if rest > max(_ROUNDING_BYTES_PER_S, _ROUNDING_SHARE * total):
            stats.append({"direction": direction, "memory": "other", "bytes_per_s": rest})
    if f["wc_readbacks"] is not None:
        stats.append({"direction": "d2h", "memory": "write_combined", "count": f["wc_readbacks"]})
    notes = []
    if f["pageable_copy_bytes_per_s"] is not None and not transfers:
        # A tracer's report older than its copy table: the pageable rate of both directions together,
        # which no stat can hold (each is of one direction).
        notes.append(f"pageable copies {f['pageable_copy_bytes_per_s'] / 1e9:.2f} GB/s in both directions, not"
                     " split by direction (a recording of an older tracer)")
    bulk = [{"direction": d, "achieved_bytes_per_s": f[f"{d}_pinned_bulk_bytes_per_s"],
             "busy_s": f[f"{d}_pinned_bulk_busy_s"]}
            for d in ("h2d", "d2h")
            if f[f"{d}_pinned_bulk_bytes_per_s"] is not None or f[f"{d}_pinned_bulk_busy_s"] is not None]
    return {"instrument": _instrument(f), "stats": stats, "bulk": bulk,
            "default_stream_share": f["pinned_bulk_default_stream_share"],
            "gpu_pci_bus_id": f["copy_gpu_pci_bus_id"], "notes": notes}


def _allocations(f: dict, carry_instrument: bool) -> dict | None:
    """The allocations record of a v1 row's figures; one with the instrument alone where the row was
    traced (``trace_engine``) and has no copies record to carry it."""
    if (f["pinned_allocs_per_s"] is None and f["median_alloc_bytes"] is None
            and not (carry_instrument and f["trace_engine"] is not None)):
        return None
    return {"instrument": _instrument(f), "per_s": f["pinned_allocs_per_s"], "median_bytes": f["median_alloc_bytes"]}


def cgroup_v1_to_v2(row: dict, path: str) -> dict:
    """A v1 group as a v2 one. v1's ``pinned_bytes`` was its processes' pinned bytes and VmPin
    together (at most its memory in use): VmPin is taken out of it, and where the sum had been lowered
    below the VmPin, the VmPin is what is left of it."""
    out: dict[str, Any] = {}
    records: dict[str, dict] = {"owner": {}, "limit": {}, "held": {}}
    for key, (tp, record, name) in _GROUP_MOVES.items():
        if key in row:
            value = convert(tp, row[key], f"{path}.{key}", key)
            value = list(value) if isinstance(value, tuple) else value
            if record is None:
                out[name] = value
            else:
                records[record][name] = value
    charged = _read(row, "pinned_bytes", _INT, path)
    vm = records["held"].get("vm_pinned_bytes")
    if charged is not None:
        if vm is not None:
            vm = min(vm, charged)
            records["held"]["vm_pinned_bytes"] = vm
        records["held"]["pinned_bytes"] = charged - (vm or 0)
    out.update(records)
    return out
