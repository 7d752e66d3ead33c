"""NVML's answers as pinmon's values: CPU lists, field values, sentinels, processes."""
from types import SimpleNamespace

import pytest

from pinmon.collect.nvml import format_cpu_list
from pinmon.collect.nvml.values import bytes_value, cpu_mask_words, field_int, processes, small_int, str_or_none


@pytest.mark.parametrize("words, text", [
    ([0x0000FFFF0000FFFF], "0-15,32-47"),
    ([0b1], "0"),
    ([0b1011], "0-1,3"),
    ([0, 0b11], "64-65"),
    ([1 << 63, 1], "63-64"),
    ([0xFFFFFFFFFFFFFFFF, 0xFFFFFFFFFFFFFFFF], "0-127"),
    ([0], None),
    (None, None),
])
def test_format_cpu_list(words, text):
    assert format_cpu_list(words) == text


def test_cpu_mask_words_takes_pynvml_s_array_or_a_list_and_nothing_else():
    import ctypes

    assert cpu_mask_words((ctypes.c_ulonglong * 2)(0xFFFF, 1 << 63)) == [0xFFFF, 1 << 63]
    assert cpu_mask_words([3, 0]) == [3, 0] and cpu_mask_words(()) == []
    for answer in (None, "0-15", 7, [1, "2"], [-1], [1 << 64], [True], {1: 2}):
        assert cpu_mask_words(answer) is None, answer


def test_field_int_reads_the_member_its_value_type_names():
    from types import SimpleNamespace as NS
    v = NS(dVal=2.0, uiVal=1, ulVal=3, ullVal=4, sllVal=-5, siVal=6, usVal=7)
    assert [field_int(NS(valueType=t, value=v)) for t in range(7)] == [2, 1, 3, 4, -5, 6, 7]
    assert field_int(NS(valueType=3, value=None)) is None


def test_sentinels_become_none():
    assert [small_int(v, 64) for v in (5, 0, 0xFFFFFFFF, 65, True, "5", None)] == [5] + [None] * 6
    assert bytes_value(1 << 30) == 1 << 30
    assert [bytes_value(v) for v in ((1 << 64) - 1, -1, 1.5, False, None)] == [None] * 5
    assert str_or_none(b"NVIDIA H200") == "NVIDIA H200" and str_or_none("") is None and str_or_none(7) is None


def test_processes_one_row_per_pid_memory_summed():
    rows = [SimpleNamespace(pid=5, usedGpuMemory=100), SimpleNamespace(pid=5, usedGpuMemory=50),
            SimpleNamespace(pid=6, usedGpuMemory=None), SimpleNamespace(pid=6, usedGpuMemory=10),
            SimpleNamespace(pid=True, usedGpuMemory=1), SimpleNamespace(usedGpuMemory=1)]
    assert [(p.pid, p.gpu_memory_bytes) for p in processes(rows)] == [(5, 150), (6, 10)]
    assert processes(None) == ()
