"""Registered ranges told apart from pinned allocations in CUPTI's records: a MEMORY2 record is a
registration when the API record of a register call (``cudaHostRegister``, ``cuMemHostRegister``)
has its correlation id, in whichever order and buffer the two come; its bytes end with the RELEASE
at its address; every table is bounded."""
from pinmon.trace import cupti_registrations as CR
from pinmon.trace.cupti_figures import CuptiFigures
from pinmon.trace.cupti_registrations import Registrations

from . import cupti_records as R

MIB = 1 << 20
T0 = 1_700_000_000_000_000_000
CALLS = frozenset({(5, 152), (4, 301), (4, 379)})  # cudaHostRegister_v4000, cuMemHostRegister(_v2)
A, B = 0x7F0000000000, 0x7F1000000000


def tracking() -> CuptiFigures:
    f = CuptiFigures(started_ns=T0)
    f.track_registrations(CALLS)
    return f


def pinned(f: CuptiFigures) -> dict:
    return f.report(T0 + 10**9)["pinned"]


def test_a_register_call_makes_its_allocation_registered_in_either_order():
    for first_api in (True, False):
        f = tracking()
        alloc = R.memory(nbytes=32 * MIB, correlation_id=7, address=A, timestamp=T0)
        call = R.api(cbid=152, correlation_id=7)
        other = R.memory(nbytes=MIB, correlation_id=8, address=B, timestamp=T0 + 1)  # a cudaHostAlloc
        f.consume([call] if first_api else [alloc])  # the two halves in two buffers
        f.consume([alloc, other] if first_api else [call, other])
        p = pinned(f)
        assert p["bytes"] == 33 * MIB and p["registered_bytes"] == 32 * MIB, first_api
        assert p["registrations"] == 1 and p["unregistrations"] == 0


def test_one_buffer_with_the_call_after_its_allocation():
    f = tracking()
    f.consume([R.memory(nbytes=32 * MIB, correlation_id=7, address=A, timestamp=T0), R.api(cbid=152, correlation_id=7)])
    assert pinned(f)["registered_bytes"] == 32 * MIB


def test_a_driver_register_call_counts_too_and_the_release_ends_it():
    f = tracking()
    f.consume([R.api(kind=4, cbid=379, correlation_id=3),
               R.memory(nbytes=4 * MIB, correlation_id=3, address=A, timestamp=T0),
               R.memory(nbytes=MIB, correlation_id=4, address=B, timestamp=T0 + 1)])
    assert pinned(f)["registered_bytes"] == 4 * MIB
    f.consume([R.memory(op=2, nbytes=4 * MIB, correlation_id=9, address=A, timestamp=T0 + 2)])
    p = pinned(f)
    assert p["registered_bytes"] == 0 and p["registered_peak_bytes"] == 4 * MIB and p["unregistrations"] == 1
    assert p["bytes"] == MIB  # the allocation stays, and its release is no unregistration
    f.consume([R.memory(op=2, nbytes=MIB, correlation_id=10, address=B, timestamp=T0 + 3)])
    assert pinned(f)["unregistrations"] == 1 and pinned(f)["bytes"] == 0


def test_a_failed_call_another_call_or_an_untracked_figure_registers_nothing():
    f = tracking()
    f.consume([R.api(cbid=152, correlation_id=7, return_value=1),  # cudaErrorInvalidValue
               R.api(cbid=27, correlation_id=8),                   # cudaHostAlloc
               R.memory(nbytes=MIB, correlation_id=7, address=A, timestamp=T0),
               R.memory(nbytes=MIB, correlation_id=8, address=B, timestamp=T0)])
    assert pinned(f)["registered_bytes"] == 0 and pinned(f)["bytes"] == 2 * MIB
    untracked = CuptiFigures(started_ns=T0)  # the engine could not select API records
    untracked.consume([R.api(cbid=152, correlation_id=7), R.memory(nbytes=MIB, correlation_id=7, address=A)])
    p = pinned(untracked)
    assert p["registered_bytes"] is None and p["registrations"] is None and p["bytes"] == MIB


def test_an_allocation_released_before_its_call_arrives_is_not_held():
    r = Registrations(CALLS)
    r.allocated(7, A, MIB)
    r.released(A)
    r.api_call(5, 152, 7, 0)  # late: its range is gone
    assert r.held_bytes == 0 and r.report()["registered_bytes"] == 0


def test_waiting_halves_and_ranges_are_bounded(monkeypatch):
    monkeypatch.setattr(CR, "MAX_PENDING", 4)
    monkeypatch.setattr(CR, "MAX_RANGES", 2)
    r = Registrations(CALLS)
    for i in range(10):
        r.allocated(i, A + i * MIB, MIB)       # cudaHostAllocs no call claims
        r.api_call(5, 152, 1000 + i, 0)         # register calls whose records never come
    assert len(r._allocs) == len(r._alloc_at) == 4 and len(r._calls) == 4
    r.api_call(5, 152, 0, 0)  # the oldest waiting allocation was forgotten
    assert r.registrations == 0
    for i in range(3):
        r.allocated(2000 + i, B + i * MIB, MIB)
        r.api_call(5, 152, 2000 + i, 0)
    rep = r.report()
    assert rep["registrations"] == 3 and rep["registered_bytes"] == 2 * MIB and rep["registrations_untracked"] == 1


def test_the_raw_path_tells_them_apart_as_the_record_objects_do():
    from .test_cupti_raw import pack, parse_bytes

    records = [R.memory(nbytes=32 * MIB, correlation_id=7, address=A, timestamp=T0), R.api(cbid=152, correlation_id=7),
               R.memory(nbytes=MIB, correlation_id=8, address=B, timestamp=T0 + 1),
               R.api(kind=4, cbid=301, correlation_id=8)]
    fast, slow = tracking(), tracking()
    parsed, _ = parse_bytes(pack(records))
    fast.consume_parsed(parsed)
    slow.consume(records)
    assert pinned(fast) == pinned(slow) and pinned(fast)["registered_bytes"] == 33 * MIB
