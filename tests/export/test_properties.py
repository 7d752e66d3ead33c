"""Property: whatever a snapshot holds (unknowns, odd names, huge values, many processes), a scrape
parses, has no duplicate series, serves no NaN, keeps the process series within the cap and counts
no scrape error."""
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pinmon.model import Gpu, HeldMemory, HostMemory, Link, Pcie, ProcessIdentity, ProcessPinned, Snapshot

from .helpers import render, samples

maybe_int = st.one_of(st.none(), st.integers(min_value=0, max_value=1 << 62))
maybe_float = st.one_of(st.none(), st.floats(min_value=0, max_value=1e15, allow_nan=False))
text = st.one_of(st.none(), st.text(max_size=12))

hosts = st.builds(HostMemory, hostname=st.text(max_size=8), mem_total_bytes=maybe_int, mem_available_bytes=maybe_int,
                  effective_mem_limit_bytes=maybe_int, pinned_bytes_est=maybe_int, memlock_limit_bytes=maybe_int,
                  memlock_unlimited=st.one_of(st.none(), st.booleans()))
links = st.builds(Link, gen=st.one_of(st.none(), st.integers(1, 6)), gen_max=st.one_of(st.none(), st.integers(1, 6)),
                  width=st.one_of(st.none(), st.sampled_from([1, 4, 8, 16])), theoretical_bytes_per_s=maybe_float)
pcies = st.builds(Pcie, rx_bytes_per_s=maybe_float, tx_bytes_per_s=maybe_float,
                  method=st.sampled_from([None, "counters", "sampled"]), rx_bytes=maybe_int, tx_bytes=maybe_int,
                  replay_delta=maybe_int, counter_deltas=st.dictionaries(st.sampled_from(["replay", "bad_tlp"]), maybe_int))
gpus = st.lists(st.builds(Gpu, index=st.integers(0, 7), name=text, uuid=text, pci_bus_id=text, link=links, pcie=pcies,
                          lost=st.booleans()), max_size=3, unique_by=lambda g: g.index)  # NVML indices are unique
processes = st.lists(st.builds(ProcessPinned, pid=st.integers(1, 1 << 22),
                               identity=st.builds(ProcessIdentity, name=text, user=text),
                               held=st.builds(HeldMemory, pinned_bytes=maybe_int, write_combined_bytes=maybe_int,
                                              vm_pinned_bytes=maybe_int),
                               source=st.sampled_from(["est.", "traced", "attached"])),
                     max_size=30, unique_by=lambda p: p.pid)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(host=hosts, gpus=gpus, processes=processes, top=st.integers(0, 12))
def test_any_snapshot_scrapes_cleanly(host, gpus, processes, top):
    snap = Snapshot(time=1.0, host=host, gpus=tuple(gpus), processes=tuple(processes))
    out = render([snap, snap], top=top)
    parsed = samples(out)  # asserts no duplicate series
    assert parsed[("pinmon_scrape_errors_total", frozenset())] == 0
    assert all(not math.isnan(v) for v in parsed.values())
    proc_series = [k for k in parsed if k[0] == "pinmon_process_held_bytes"]
    assert len(proc_series) == min(top, sum(p.held.bytes is not None for p in processes)) + 1
