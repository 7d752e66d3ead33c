"""Rules about the GPUs on the PCI bus: a GPU lost, GPUs NVML cannot reach, a link below its rating,
rising replay and error counters."""
from __future__ import annotations

from collections.abc import Iterator

from ..model import Gpu, Snapshot
from ..model.kinds import Severity
from ..units import fmt_int, fmt_link, fmt_rate, printable
from .common import lspci_target
from .rule import Found, rule
from .thresholds import Thresholds


@rule("gpu-lost", "critical: a GPU fell off the bus (NVML lost it)", severities=("critical",))
def gpu_lost(snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    for g in snap.gpus:
        if not g.lost:
            continue
        where = f" (bus {g.pci_bus_id})" if g.pci_bus_id else ""
        message = f"GPU {g.index}{where} fell off the bus"
        advice = ("Check `sudo dmesg` for Xid 79 (GPU has fallen off the bus) and for power or thermal events"
                  " around that time; work on this GPU is lost, and it needs a reset or, usually, a reboot"
                  " by an administrator.")
        yield Found("critical", message, advice, subject=f"gpu{g.index}", index=g.index)


@rule("gpu-driver-unavailable",
      "critical: NVIDIA GPUs on the PCI bus but NVML could not start (driver broken or missing)",
      severities=("critical",))
def gpu_driver_unavailable(snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    """NVIDIA GPUs on the PCI bus that NVML cannot reach: a broken or missing driver, not "no GPU"."""
    if not snap.nvml_error or not snap.nvidia_pci_gpus or snap.gpus:
        return
    n = snap.nvidia_pci_gpus
    message = (f"{n} NVIDIA GPU{'s' if n != 1 else ''} on the PCI bus but NVML could not start:"
               f" {printable(snap.nvml_error)}")
    advice = ("Nothing on these GPUs is monitored, and CUDA work on them will likely fail too. Check the"
              " driver: `nvidia-smi`, `lsmod | grep nvidia`, `sudo dmesg | grep -i nvrm`; a library and"
              " kernel module of different versions need a driver reload or a reboot. In a container that"
              " is not given the GPUs, disable this rule (`disabled_rules`).")
    yield Found("critical", message, advice, nvidia_pci_gpus=n)


@rule("pcie-link-degraded",
      "link below its rated gen/width under {link_degraded_traffic_bytes_per_s}+ of traffic (info: narrow while idle)",
      over="gpus", thresholds=("link_degraded_traffic_bytes_per_s",), severities=("warning", "info"))
def pcie_link_degraded(g: Gpu, snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    link = g.link
    if not link.below_max:
        return
    traffic = g.pcie.traffic_bytes_per_s
    now, rated = fmt_link(link.gen, link.width), fmt_link(link.gen_max, link.width_max)
    rates = ""
    if link.max_theoretical_bytes_per_s is not None and link.theoretical_bytes_per_s is not None:
        rates = f" ({fmt_rate(link.max_theoretical_bytes_per_s)} vs {fmt_rate(link.theoretical_bytes_per_s)})"
    advice = ("Reseat the card and check the slot, riser and the BIOS PCIe settings (a slot forced to a"
              " lower generation, or bifurcated); compare LnkSta with LnkCap in"
              f" `{lspci_target(g.pci_bus_id)}` while the GPU is busy.")
    values = dict(gen=link.gen, gen_max=link.gen_max, width=link.width, width_max=link.width_max,
                  traffic_bytes_per_s=traffic, theoretical_bytes_per_s=link.theoretical_bytes_per_s,
                  max_theoretical_bytes_per_s=link.max_theoretical_bytes_per_s)
    if traffic is not None and traffic >= t.link_degraded_traffic_bytes_per_s:
        message = f"link {now} under {fmt_rate(traffic)} of traffic, rated {rated}{rates}"
        yield Found.with_values("warning", message, advice, values)
    elif link.width_below_max:
        # An idle GPU lowering its generation is power saving; its width rarely changes for that.
        load = f"at {fmt_rate(traffic)} of traffic" if traffic is not None else "with traffic unknown"
        message = (f"link {now} {load}, rated {rated}{rates}: the width is below the slot's rating,"
                   f" which power saving rarely explains")
        yield Found.with_values("info", message, advice, values)


@rule("pcie-errors", "PCIe replay or error counters rose since start (info: link recoveries alone)",
      over="gpus", severities=("warning", "info"))
def pcie_errors(g: Gpu, snap: Snapshot, t: Thresholds) -> Iterator[Found]:
    pcie = g.pcie
    replay, recovery, errors = (pcie.replay_delta or 0), (pcie.recovery_delta or 0), (pcie.error_delta or 0)
    if replay <= 0 and recovery <= 0 and errors <= 0:
        return
    parts = [f"{k} +{fmt_int(v)}" for k, v in sorted(pcie.counter_deltas.items()) if v is not None and v > 0]
    named = {k for k, v in pcie.counter_deltas.items() if v is not None and v > 0}
    if replay > 0 and "replay" not in named:
        parts.append(f"replay +{fmt_int(replay)}")
    if recovery > 0 and "l0_to_recovery" not in named:
        parts.append(f"l0_to_recovery +{fmt_int(recovery)}")
    if errors > 0 and not (named - {"replay", "l0_to_recovery"}):
        parts.append(f"errors +{fmt_int(errors)}")
    # The link passes through Recovery on every speed change, and idle GPUs change speed for
    # power saving all the time, so recoveries alone are a lead, not a fault.
    severity: Severity = "warning" if replay > 0 or errors > 0 else "info"
    message = "PCIe counters rose since pinmon started: " + ", ".join(parts)
    if severity == "info":
        message += " (the link also retrains on every power-saving speed change, so recoveries alone are not a fault)"
    advice = ("Rising replays and recoveries point to signal integrity (riser, cable, slot seating); watch"
              " whether they keep climbing under load, and check `sudo dmesg | grep -i aer` for AER"
              f" reports{' on ' + g.pci_bus_id if g.pci_bus_id else ''}.")
    yield Found(severity, message, advice, replay_delta=pcie.replay_delta, recovery_delta=pcie.recovery_delta,
                error_delta=pcie.error_delta)
