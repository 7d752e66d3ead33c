"""NVML's cumulative PCIe counters and their arithmetic: link bytes and error counts.

The link byte counters (``NVML_FI_DEV_PCIE_COUNT_RX_BYTES`` / ``_TX_BYTES``) are only 32 bits wide:
at 55 GB/s they wrap about every 78 ms, so a 1 s poll cannot difference them. Read at least twice
per wrap (``counter_hz_for_link``), ``CounterUnwrapper`` turns them into monotonic totals. The error
counters change rarely; ``EventCounter`` keeps each one's increase since the first reading.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .values import field_int

MASK_32 = (1 << 32) - 1
# Bytes a 32-bit byte counter counts before it wraps.
WRAP_BYTES = MASK_32 + 1

# The two link byte counters, RX then TX (pynvml constant names).
BYTE_FIELDS = ("NVML_FI_DEV_PCIE_COUNT_RX_BYTES", "NVML_FI_DEV_PCIE_COUNT_TX_BYTES")

# (pynvml constant, short name). Names missing from an older pynvml are skipped. "replay" and
# "l0_to_recovery" are reported on their own; the rest are summed into Pcie.error_delta.
ERROR_FIELDS: tuple[tuple[str, str], ...] = (
    ("NVML_FI_DEV_PCIE_REPLAY_COUNTER", "replay"),
    ("NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER", "l0_to_recovery"),
    ("NVML_FI_DEV_PCIE_COUNT_NAKS_SENT", "naks_sent"),
    ("NVML_FI_DEV_PCIE_COUNT_NAKS_RECEIVED", "naks_received"),
    ("NVML_FI_DEV_PCIE_COUNT_BAD_TLP", "bad_tlp"),
    ("NVML_FI_DEV_PCIE_COUNT_BAD_DLLP", "bad_dllp"),
    ("NVML_FI_DEV_PCIE_COUNT_RECEIVER_ERROR", "receiver_error"),
    ("NVML_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS", "correctable_errors"),
    ("NVML_FI_DEV_PCIE_COUNT_NON_FATAL_ERROR", "non_fatal_error"),
    ("NVML_FI_DEV_PCIE_COUNT_FATAL_ERROR", "fatal_error"),
    ("NVML_FI_DEV_PCIE_COUNT_UNSUPPORTED_REQ", "unsupported_req"),
    ("NVML_FI_DEV_PCIE_COUNT_LCRC_ERROR", "lcrc_error"),
    ("NVML_FI_DEV_PCIE_COUNT_LANE_ERROR", "lane_error"),
)

# Reads per wrap of a 32-bit byte counter at the link's top rate: two leave a whole wrap period of
# slack for a late tick (GIL, a slow NVML call) before bytes could be lost.
READS_PER_WRAP = 2.0
MIN_COUNTER_HZ, MAX_COUNTER_HZ = 5.0, 50.0
UNKNOWN_LINK_COUNTER_HZ = 50.0


def counter_hz_for_link(max_bytes_per_s: float | None) -> float:
    """How often to read the byte counters of a link whose top payload rate is ``max_bytes_per_s``.

    The counters are 32 bits of link bytes: at Gen5 x16 (63.0 GB/s) they wrap every 68 ms, so
    they are read at 29 Hz; a Gen4 x16 link needs 15 Hz, Gen3 x16 8 Hz. Reading no faster than
    needed is most of pinmon's own CPU cost (each read is ~0.3-0.7 ms of CPU inside NVML).
    """
    if not max_bytes_per_s or max_bytes_per_s <= 0:
        return UNKNOWN_LINK_COUNTER_HZ
    wrap_s = WRAP_BYTES / max_bytes_per_s
    return min(MAX_COUNTER_HZ, max(MIN_COUNTER_HZ, READS_PER_WRAP / wrap_s))


class CounterUnwrapper:
    """Turns a cumulative counter that may be 32 bits wide into a monotonic total.

    Deltas are taken modulo 2**32, so one wrap between two reads is exact; more than one is lost,
    which is why the reads must come faster than the wrap period. A raw value above 2**32-1 proves
    the counter is really 64 bits wide; from then on it is differenced without the modulo.
    """

    def __init__(self, first_raw: int):
        self.last_raw = first_raw
        self.total = 0
        self.wide = first_raw > MASK_32

    def update(self, raw: int) -> int:
        """Fold in a new raw reading; returns the bytes added."""
        if raw > MASK_32:
            self.wide = True
        if self.wide:  # noqa: SIM108  (a comment per branch)
            # A 64-bit counter does not wrap in practice; going backwards means it was reset.
            delta = raw - self.last_raw if raw >= self.last_raw else 0
        else:
            delta = (raw - self.last_raw) & MASK_32
        self.last_raw = raw
        self.total += delta
        return delta


class EventCounter:
    """An error counter's increase since the first reading; a decrease is taken as a reset."""

    def __init__(self, first_raw: int):
        self.last_raw = first_raw
        self.delta = 0

    def update(self, raw: int) -> None:
        self.delta += raw - self.last_raw if raw >= self.last_raw else raw
        self.last_raw = raw


def byte_values(values: Any) -> tuple[int, int] | None:
    """(rx, tx) raw counts from an ``nvmlDeviceGetFieldValues`` answer for ``BYTE_FIELDS``; None
    when either field failed or is not a count."""
    if values is None:
        return None
    try:
        rx_fv, tx_fv = values[0], values[1]
    except (TypeError, IndexError):
        return None
    if getattr(rx_fv, "nvmlReturn", 0) != 0 or getattr(tx_fv, "nvmlReturn", 0) != 0:
        return None
    rx, tx = field_int(rx_fv), field_int(tx_fv)
    if rx is None or tx is None or rx < 0 or tx < 0:
        return None
    return rx, tx


def fold_errors(errors: dict[str, EventCounter | None], names: Iterable[str], values: Any) -> None:
    """Fold one ``nvmlDeviceGetFieldValues`` answer for the error fields ``names`` into ``errors``.

    A field that fails stays None while it never worked (unsupported); one that worked keeps its
    last delta.
    """
    for short, fv in zip(names, values):
        counter = errors.get(short)
        raw = field_int(fv) if getattr(fv, "nvmlReturn", 0) == 0 else None
        if raw is None:
            errors.setdefault(short, None)
        elif counter is None:
            errors[short] = EventCounter(raw)
        else:
            counter.update(raw)


class LinkBytes:
    """One GPU's two byte counters, unwrapped, and the reads that bound what each ``take`` hands out."""

    def __init__(self, raws: tuple[int, int], now: float):
        self.rx, self.tx = CounterUnwrapper(raws[0]), CounterUnwrapper(raws[1])
        self.read_time = now  # clock() of the last successful read
        self.taken: tuple[int, int, float] = (0, 0, now)  # (rx total, tx total, read_time) at the last take
        self.gap_s = 0.0  # longest gap between successful reads since the last take
        self.taken_gap_s: float | None = None

    def update(self, raws: tuple[int, int], now: float) -> None:
        """Fold in a successful read of both counters at ``now``."""
        self.rx.update(raws[0])
        self.tx.update(raws[1])
        self.gap_s = max(self.gap_s, now - self.read_time)
        self.read_time = now

    def take(self) -> tuple[int, int, float] | None:
        """``(rx_bytes, tx_bytes, interval_s)`` since the previous take; None without a new read.

        ``interval_s`` runs between the two counter reads that bound the bytes, not between the
        two calls to take, so the rate is exact however late the caller is.
        """
        rx0, tx0, t0 = self.taken
        if self.read_time <= t0:
            return None
        rx1, tx1, t1 = self.rx.total, self.tx.total, self.read_time
        self.taken = (rx1, tx1, t1)
        # Both counters come from the same hardware: one proven 64-bit proves the other.
        self.taken_gap_s = None if (self.rx.wide or self.tx.wide) else self.gap_s
        self.gap_s = 0.0
        return rx1 - rx0, tx1 - tx0, t1 - t0
