"""One report from both engines: CUPTI's figures where CUPTI ran, the hooks' everywhere else.

The hooks' report (``TracerState.report``) keeps its shape. When CUPTI collected this process's
records, the figures it sees for every library replace the hooks' at the same keys, so a reader needs
no second code path and no copy is counted twice:
- ``copies`` (bytes, counts, window rates per direction, host memory kind and size class),
  ``pageable_copy_bytes_per_s`` and ``pinned_copy_bytes_per_s``;
- ``pinned.bytes`` and ``pinned.peak_bytes`` (every pinned allocation the driver made, less the
  write-combined bytes the hooks saw, which the report keeps apart);
- ``pinned.registered_bytes`` and ``allocs.registers`` (``cudaHostRegister``ed ranges of every library),
  where CUPTI told registered ranges apart (``registered_from``);
- ``allocs``: counts, bytes, releases, their rates, median size and histogram.
The hooks keep what only they know: write-combined bytes, requested bytes and the rounding waste,
allocation calls served from a pool, CPU readbacks, and the Python call sites, and registered bytes
where CUPTI could not tell them apart. Their
own copy figures move to ``hooks.copies``. CUPTI's full figures are under ``cupti``; ``engine`` says
which engine the figures come from and ``engine_notice`` why CUPTI is not in use, when it is not.
"""
from __future__ import annotations


def merged(hooks: dict, cupti: dict | None, state: str | None = None,
           notice: str | None = None) -> dict:
    """The report body: ``hooks`` with CUPTI's figures (``cupti``, None when CUPTI never ran)."""
    out = dict(hooks)
    active = cupti is not None and state in ("armed", "paused", "closed")
    out["engine"] = "cupti" if active else "hooks"
    out["engine_notice"] = notice
    if cupti is None:
        return out
    out["cupti"] = cupti
    if not active:
        return out
    window = cupti.get("window") or {}
    wcopies = window.get("copies") or {}
    life = cupti.get("copies") or {}
    out["hooks"] = {"copies": hooks.get("copies"),
                    "pageable_copy_bytes_per_s": hooks.get("pageable_copy_bytes_per_s"),
                    "pinned_copy_bytes_per_s": hooks.get("pinned_copy_bytes_per_s")}
    copies: dict[str, dict[str, dict]] = {}
    for d in ("h2d", "d2h"):
        for mem in ("pinned", "pageable", "managed", "other"):
            lrow = (life.get(d) or {}).get(mem) or {}
            wrow = (wcopies.get(d) or {}).get(mem) or {}
            classes = {}
            for name, lc in (lrow.get("size_classes") or {}).items():
                wc = (wrow.get("size_classes") or {}).get(name) or {}
                classes[name] = {"bytes": lc.get("bytes", 0), "bytes_per_s": wc.get("bytes_per_s") or 0.0,
                                 "count": lc.get("count", 0),
                                 "achieved_bytes_per_s": lc.get("achieved_bytes_per_s")}
            copies.setdefault(d, {})[mem] = {
                "bytes": lrow.get("bytes", 0), "count": lrow.get("count", 0),
                "bytes_per_s": wrow.get("bytes_per_s") or 0.0, "size_classes": classes,
                "achieved_bytes_per_s": lrow.get("achieved_bytes_per_s"),
                "rate_p50": lrow.get("rate_p50"), "rate_p10": lrow.get("rate_p10")}
    out["copies"] = copies

    def window_rate(mem: str) -> float:
        return float(sum(copies[d][mem]["bytes_per_s"] for d in ("h2d", "d2h")))

    out["pageable_copy_bytes_per_s"] = window_rate("pageable")
    out["pinned_copy_bytes_per_s"] = window_rate("pinned")

    cp = cupti.get("pinned") or {}
    pinned = dict(hooks.get("pinned") or {})
    wc = pinned.get("write_combined_bytes") or 0
    if isinstance(cp.get("bytes"), int):
        pinned["bytes"] = max(cp["bytes"] - wc, 0)
        pinned["peak_bytes"] = max(cp.get("peak_bytes") or 0, pinned["bytes"])
        pinned["bytes_from"] = "cupti"
    registered = cp.get("registered_bytes")
    if isinstance(registered, int) and isinstance(pinned.get("bytes"), int):
        pinned["registered_bytes"] = min(registered, pinned["bytes"])  # part of the pinned bytes
        pinned["registered_from"] = "cupti"
    out["pinned"] = pinned

    allocs = dict(hooks.get("allocs") or {})
    allocs.update(count=cp.get("allocs", 0), bytes=cp.get("alloc_bytes", 0), frees=cp.get("frees", 0),
                  per_s=window.get("pinned_allocs_per_s") or 0.0,
                  frees_per_s=window.get("pinned_frees_per_s") or 0.0,
                  median_bytes=cp.get("median_alloc_bytes"), histogram=cp.get("histogram") or {})
    if isinstance(cp.get("registrations"), int):
        allocs["registers"] = cp["registrations"]
    allocs["from"] = "cupti"
    out["allocs"] = allocs
    return out
