"""The command line's whole-number argument types: bounds from pinmon.limits, one-line messages."""
import argparse

import pytest

from pinmon.cli.common import cuda_device_arg, int_arg, pid_arg, top_processes_arg
from pinmon.limits import MAX_GPUS, MAX_PID, MAX_TOP_PROCESSES


def refusal(parse, text: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as e:
        parse(text)
    return str(e.value)


def test_a_whole_number_within_its_bounds_and_nothing_else():
    parse = int_arg(2, 5)
    assert [parse(t) for t in ("2", "5", " 3 ", "+4")] == [2, 5, 3, 4]  # as int() reads them
    assert refusal(parse, "1") == "must be 2-5, got '1'"
    assert refusal(parse, "6") == "must be 2-5, got '6'"
    for text in ("many", "2.5", "", "0x3", "9" * 5000):
        assert refusal(parse, text).startswith("not a whole number: ")


def test_a_named_whole_number_says_what_it_is_not_either_way():
    parse = int_arg(1, 9, "a slot")
    assert parse("9") == 9
    assert refusal(parse, "10") == "not a slot: '10'"
    assert refusal(parse, "x") == "not a slot: 'x'"


def test_process_ids_are_those_the_kernel_could_hand_out():
    assert pid_arg("1") == 1 and pid_arg(str(MAX_PID)) == MAX_PID
    for text in ("0", "-4", str(MAX_PID + 1), "self"):
        assert refusal(pid_arg, text) == f"not a process id: {text!r}"


def test_top_processes_from_none_to_the_cap():
    assert top_processes_arg("0") == 0 and top_processes_arg(str(MAX_TOP_PROCESSES)) == MAX_TOP_PROCESSES
    assert refusal(top_processes_arg, "-1") == "must be 0-1000, got '-1'"
    assert refusal(top_processes_arg, "1001") == "must be 0-1000, got '1001'"
    assert refusal(top_processes_arg, "many") == "not a whole number: 'many'"


def test_a_cuda_device_is_an_index_below_the_gpu_cap_or_all():
    assert cuda_device_arg("all") == "all"
    assert cuda_device_arg("0") == 0 and cuda_device_arg(str(MAX_GPUS - 1)) == MAX_GPUS - 1
    for text in ("-1", "x", "ALL", str(MAX_GPUS), "9" * 30):
        assert refusal(cuda_device_arg, text) == f"not a CUDA device index or 'all': {text!r}"
