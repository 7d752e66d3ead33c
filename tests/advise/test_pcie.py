"""Rules on the GPUs on the PCI bus (``advise.pcie``) at, just below and just above their thresholds."""
import pytest

from pinmon.advise import Thresholds, pcie
from pinmon.model import Pcie
from tests import factories as make

T = Thresholds()


# --- pcie-link-degraded --------------------------------------------------------------------------

@pytest.mark.parametrize("gen, width, rx, tx, severity", [
    (3, 16, 0.999e9, 0.0, None),         # lower generation while idle: power saving
    (3, 16, 1.0e9, 0.0, "warning"),
    (3, 16, 0.5e9, 0.5e9, "warning"),    # rx + tx counts
    (3, 16, 1.001e9, 0.0, "warning"),
    (5, 8, 1.0e9, 0.0, "warning"),
    (5, 8, 0.999e9, 0.0, "info"),        # narrow while idle
    (5, 8, None, None, "info"),
    (3, 16, None, None, None),
    (5, 16, 60e9, 0.0, None),            # full link, busy
])
def test_pcie_link_degraded_levels(gen, width, rx, tx, severity):
    snap = make.snapshot(gpus=[make.gpu(gen=gen, width=width, rx=rx, tx=tx)])
    out = pcie.pcie_link_degraded([snap], T)
    assert [f.severity for f in out] == ([severity] if severity else [])


def test_pcie_link_degraded_message():
    snap = make.snapshot(gpus=[make.gpu(index=2, gen=3, width=8, rx=12.3e9, tx=0.0, pci_bus_id="00000000:41:00.0")])
    [f] = pcie.pcie_link_degraded([snap], T)
    assert f.subject == "gpu2"
    assert f.message == "link Gen3 x8 under 12.3 GB/s of traffic, rated Gen5 x16 (63.0 GB/s vs 7.9 GB/s)"
    assert "reseat" in f.advice.lower() and "riser" in f.advice and "BIOS" in f.advice
    assert "`sudo lspci -vv -s 0000:41:00.0`" in f.advice and "LnkSta" in f.advice and "LnkCap" in f.advice
    assert f.values["traffic_bytes_per_s"] == 12.3e9


def test_pcie_link_degraded_silent_for_unknown_max_or_lost_gpu():
    snap = make.snapshot(gpus=[make.gpu(index=0, gen=3, width=8, gen_max=None, width_max=None, rx=20e9),
                           make.gpu(index=1, gen=3, width=8, rx=20e9, lost=True)])
    assert pcie.pcie_link_degraded([snap], T) == []


# --- pcie-errors ---------------------------------------------------------------------------------

def _pcie(replay=0, recovery=0, error=0, deltas=None):
    return Pcie(rx_bytes_per_s=0.0, tx_bytes_per_s=0.0, replay_delta=replay, recovery_delta=recovery,
                error_delta=error, counter_deltas=deltas or {})


@pytest.mark.parametrize("replay, recovery, error, severity", [
    (0, 0, 0, None), (1, 0, 0, "warning"), (0, 0, 1, "warning"), (0, 1, 0, "info"), (2, 5, 0, "warning"),
    (None, None, None, None), (None, None, 3, "warning"),
])
def test_pcie_errors_levels(replay, recovery, error, severity):
    snap = make.snapshot(gpus=[make.gpu(pcie=_pcie(replay, recovery, error))])
    out = pcie.pcie_errors([snap], T)
    assert [f.severity for f in out] == ([severity] if severity else [])


def test_pcie_errors_lists_nonzero_counters():
    deltas = {"replay": 3, "l0_to_recovery": 12, "bad_tlp": 2, "naks_sent": 0, "receiver_error": None}
    snap = make.snapshot(gpus=[make.gpu(index=1, pcie=_pcie(3, 12, 2, deltas), pci_bus_id="00000000:42:00.0")])
    [f] = pcie.pcie_errors([snap], T)
    assert f.subject == "gpu1" and f.severity == "warning"
    assert f.message == "PCIe counters rose since pinmon started: bad_tlp +2, l0_to_recovery +12, replay +3"
    assert "signal integrity" in f.advice and "dmesg" in f.advice and "AER" in f.advice
    assert f.values == {"replay_delta": 3, "recovery_delta": 12, "error_delta": 2}


def test_pcie_errors_without_counter_details():
    snap = make.snapshot(gpus=[make.gpu(pcie=_pcie(1, 0, 4))])
    [f] = pcie.pcie_errors([snap], T)
    assert f.message == "PCIe counters rose since pinmon started: replay +1, errors +4"


def test_pcie_errors_recoveries_alone_are_info_and_say_why():
    snap = make.snapshot(gpus=[make.gpu(pcie=_pcie(0, 7, 0, {"l0_to_recovery": 7}))])
    [f] = pcie.pcie_errors([snap], T)
    assert f.severity == "info" and "l0_to_recovery +7" in f.message and "power-saving" in f.message


# --- gpu-lost ------------------------------------------------------------------------------------

def test_gpu_lost():
    snap = make.snapshot(gpus=[make.gpu(index=0), make.gpu(index=3, lost=True, pci_bus_id="0000:41:00.0")])
    [f] = pcie.gpu_lost([snap], T)
    assert f.severity == "critical" and f.subject == "gpu3"
    assert f.message == "GPU 3 (bus 0000:41:00.0) fell off the bus"
    assert "Xid 79" in f.advice and "dmesg" in f.advice and "administrator" in f.advice


def test_gpu_lost_without_bus_id():
    [f] = pcie.gpu_lost([make.snapshot(gpus=[make.gpu(index=1, lost=True, pci_bus_id=None)])], T)
    assert f.message == "GPU 1 fell off the bus"
