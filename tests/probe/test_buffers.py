"""Probe buffers against the CuPy stand-in: views, alignment, the ledger and the held count of the
page-locked kinds, freeing on the way out."""
import ctypes

import pytest

from pinmon.probe import buffers as B
from pinmon.probe import safety as S
from tests.fakes.fake_cupy import FakeCUDARuntimeError


def test_pinned_buffer_view_round_trip(fake):
    with B.PinnedBuffer(8192, 0) as buf:
        v = buf.view()
        v[:] = 7
        assert bytes(ctypes.string_at(buf.ptr, 4)) == b"\x07" * 4
        del v
        assert B.held_pinned_bytes() == 8192
    assert buf.ptr == 0 and buf.open_s >= 0 and buf.close_s >= 0
    buf.close()  # idempotent


def test_pageable_array_is_page_aligned():
    arr = B.pageable_array(3 * 4096 + 5)
    assert arr.ctypes.data % 4096 == 0 and arr.nbytes == 3 * 4096 + 5


def test_page_locked_kinds_reserve_count_and_release_alike(fake):
    ledger = S.PinnedLedger(3 * 4096)
    host = B.PageableBuffer(4096)
    with host, B.PinnedBuffer(8192, 4, ledger=ledger) as pinned, B.Registered(host.ptr, 4096, ledger=ledger) as reg:
        assert ledger.held_bytes == 3 * 4096 and B.held_pinned_bytes() == 3 * 4096
        assert fake.host[pinned.ptr][2] == 4 and fake.registered == {host.ptr: 4096}
        assert reg.ptr == host.ptr
    assert ledger.held_bytes == 0 and B.held_pinned_bytes() == 0
    assert pinned.open_s >= 0 and pinned.close_s >= 0 and reg.open_s >= 0 and reg.close_s >= 0
    assert host.ptr == 0


@pytest.mark.parametrize("make, call", [(lambda h, ledger: B.PinnedBuffer(4096, ledger=ledger), "hostAlloc"),
                                        (lambda h, ledger: B.Registered(h.ptr, 4096, ledger=ledger), "hostRegister")])
def test_a_failed_lock_gives_its_reservation_back(fake, make, call):
    ledger = S.PinnedLedger(4096)
    fake.fail_at[call] = 1
    with B.PageableBuffer(4096) as host:
        buf = make(host, ledger)
        with pytest.raises(FakeCUDARuntimeError):
            with buf:
                pass
    assert buf.ptr == 0 and ledger.held_bytes == 0 and B.held_pinned_bytes() == 0


def test_the_cap_refuses_before_cuda_is_called(fake):
    ledger = S.PinnedLedger(4096)
    with pytest.raises(S.CapExceeded):
        with B.PinnedBuffer(8192, ledger=ledger):
            pass
    assert "hostAlloc" not in fake.calls and ledger.held_bytes == 0


def test_pageable_buffer_view_keeps_its_memory():
    with B.PageableBuffer(3 * 4096 + 5) as buf:
        assert buf.ptr % 4096 == 0
        view = buf.view(4096)
    assert buf.ptr == 0
    view[:] = 3  # the slice still owns the memory it points at
    assert view.nbytes == 4096 and int(view.sum()) == 3 * 4096


def test_device_buffer_frees_on_the_way_out(fake):
    with pytest.raises(KeyboardInterrupt):  # noqa: PT012  (the block under test ends in the raise)
        with B.DeviceBuffer(4096) as dev:
            assert fake.device
            raise KeyboardInterrupt
    assert dev.ptr == 0 and fake.device == {}
