"""The CUPTI engine against a stand-in of cupti-python: arming, failure to a notice, bounded
buffers, flushing, pausing around a profiler session, exit and fork; no method ever raises."""
import importlib
import os
import sys

import pytest

from pinmon.trace import engine_cupti as E
from pinmon.trace.engine_cupti import CuptiEngine

from . import cupti_records as R

HERE = os.path.dirname(os.path.abspath(__file__))
FAKECUPTI = {13: os.path.join(HERE, "fakecupti"), 12: os.path.join(HERE, "fakecupti12")}
VERSION = {13: "13.0.1", 12: "12.8.0"}
MIB = 1 << 20


@pytest.fixture(params=[13, 12], ids=["cupti13", "cupti12"])
def fake(request):
    """The stand-in cupti-python, with the names of 13.0 or of 12.8: every test runs on both."""
    path = FAKECUPTI[request.param]
    sys.path.insert(0, path)
    try:
        for name in ("cupti", "cupti.cupti"):
            sys.modules.pop(name, None)
        mod = importlib.import_module("cupti.cupti")
        mod.reset()
        yield mod
    finally:
        sys.path.remove(path)
        for name in ("cupti", "cupti.cupti"):
            sys.modules.pop(name, None)


def engine_with(fake, **kw):
    return CuptiEngine(loader=lambda: (fake, VERSION[fake.MAJOR]), **kw)


ARMED_KINDS = {1, 9, 49, 4, 5}  # MEMCPY, CONTEXT, MEMORY2; DRIVER and RUNTIME for the register calls


def test_arm_registers_callbacks_then_enables_the_kinds(fake):
    eng = engine_with(fake)
    assert eng.arm() and eng.state == "armed" and eng.notice is None
    assert fake.calls[0] == "register"
    assert fake.enabled == ARMED_KINDS
    assert fake.attributes[2] == E.DEVICE_BUFFER_POOL_LIMIT  # CUPTI's device buffer pool is capped
    assert eng.attributes["device_buffer_bytes"] == 3200000
    assert eng.arm()  # once only
    assert fake.calls.count("register") == 1


def test_records_reach_the_figures_on_flush(fake):
    eng = engine_with(fake)
    eng.arm()
    fake._emit(R.memcpy(nbytes=4 * MIB, start=fake.get_timestamp()))
    assert eng.report()["copies"]["h2d"]["pinned"]["count"] == 0  # still in CUPTI's buffer
    eng.flush()
    rep = eng.report()
    assert rep["copies"]["h2d"]["pinned"]["bytes"] == 4 * MIB
    assert rep["version"] == VERSION[fake.MAJOR] and rep["major"] == fake.MAJOR
    assert rep["state"] == "armed" and rep["flushes"] == 1
    assert rep["buffers"]["handed_out"] == 1 and rep["buffers"]["outstanding"] == 0


def test_buffers_are_bounded_and_records_beyond_are_dropped(fake, monkeypatch):
    monkeypatch.setattr(E, "BUFFER_BYTES", fake.RECORD_BYTES)  # one record per buffer
    eng = engine_with(fake)
    eng.arm()
    for i in range(E.MAX_OUTSTANDING + 5):
        fake._emit(R.memcpy(start=i))
    assert eng.outstanding == E.MAX_OUTSTANDING and eng.refused == 5
    eng.flush()
    rep = eng.report()
    assert rep["dropped_records"] == 5 and rep["buffers"]["refused"] == 5
    assert rep["copies"]["h2d"]["pinned"]["count"] == E.MAX_OUTSTANDING
    assert eng.outstanding == 0
    fake._emit(R.memcpy())  # room again after the flush
    assert eng.refused == 5


@pytest.mark.parametrize("knob, status, words", [
    ("fail_enable", 39, "in use by another tool"),
    ("fail_register", 15, "ERROR_NOT_INITIALIZED"),
    ("fail_enable", 35, "profiling permission"),
])
def test_a_cupti_error_leaves_a_notice_and_nothing_enabled(fake, knob, status, words):
    setattr(fake, knob, status)
    eng = engine_with(fake)
    assert eng.arm() is False
    assert eng.state == "failed" and words in eng.notice and "\n" not in eng.notice
    assert fake.enabled == set()
    assert eng.report() is None
    eng.flush()
    eng.pause("torch.profiler")
    eng.resume()
    eng.close()
    assert eng.arm() is False  # no second attempt


def test_a_missing_cupti_python_or_driver_is_a_notice():
    def missing():
        raise ImportError("No module named 'cupti'", name="cupti")

    eng = CuptiEngine(loader=missing)
    assert eng.arm() is False and eng.notice == "cupti-python is not installed (cupti)"

    def no_driver():
        raise RuntimeError("CUDA driver is not found (libcuda.so.1: cannot open shared object file)")

    eng = CuptiEngine(loader=no_driver)
    assert eng.arm() is False and "CUDA driver is not found" in eng.notice


def test_enum_values_are_checked(fake, monkeypatch):
    import enum

    monkeypatch.setattr(fake, "ActivityKind", enum.IntEnum("ActivityKind", {"MEMCPY": 1, "CONTEXT": 9,
                                                                             "MEMORY2": 50}))
    eng = engine_with(fake)
    assert eng.arm() is False and "unexpected" in eng.notice


def test_a_profiler_session_pauses_and_resumes(fake):
    eng = engine_with(fake)
    eng.arm()
    fake._emit(R.memcpy(start=fake.get_timestamp()))
    eng.pause("torch.profiler")
    assert eng.state == "paused" and fake.enabled == set()
    assert ("flush", 1) in fake.calls  # ours delivered before the profiler takes CUPTI
    assert eng.report()["copies"]["h2d"]["pinned"]["count"] == 1
    eng.pause("torch.profiler")  # nested
    eng.resume()
    assert eng.state == "paused"
    fake.callbacks = ("the profiler's", "callbacks")
    eng.resume()
    assert eng.state == "armed" and fake.enabled == ARMED_KINDS
    assert fake.callbacks[0] == eng._requested  # registered again
    assert eng.paused_by is None


def test_arming_during_a_profiler_session_waits_for_its_end(fake):
    eng = engine_with(fake)
    eng.pause("torch.profiler")
    assert eng.arm() and eng.state == "paused" and fake.enabled == set()
    eng.resume()
    assert eng.state == "armed" and fake.enabled == ARMED_KINDS


def test_a_failed_re_arm_is_a_notice(fake):
    eng = engine_with(fake)
    eng.arm()
    eng.pause("jax.profiler")
    fake.fail_register = 39
    eng.resume()
    assert eng.state == "failed" and "re-armed after jax.profiler" in eng.notice


def test_close_flushes_forced_and_disables(fake):
    eng = engine_with(fake)
    eng.arm()
    fake._emit(R.memcpy(start=fake.get_timestamp()))
    eng.close()
    assert ("flush", 1) in fake.calls and fake.enabled == set() and eng.state == "closed"
    assert eng.report()["copies"]["h2d"]["pinned"]["count"] == 1
    assert eng._requested() == (0, 0)
    eng._completed([R.memcpy()])  # a late buffer is ignored
    assert eng.report()["copies"]["h2d"]["pinned"]["count"] == 1


def test_a_forked_child_drops_cupti(fake):
    eng = engine_with(fake)
    eng.arm()
    eng.after_fork()
    assert eng.state == "forked" and eng.report() is None and "forked" in eng.notice
    eng.flush()  # nothing happens, nothing raises


def test_flush_errors_are_counted_not_raised(fake, monkeypatch):
    eng = engine_with(fake)
    eng.arm()

    def boom(flag):
        raise fake.cuptiError(999)

    monkeypatch.setattr(fake, "activity_flush_all", boom)
    eng.flush()
    assert eng.flush_errors == 1 and "flush failed" in eng.notice


def test_a_completion_callback_never_raises(fake):
    eng = engine_with(fake)
    eng.arm()
    eng._completed(None)  # not even on garbage
    eng._completed([object()])
    assert eng.report()["record_errors"] == 1


def test_devices_are_named_by_pci_bus_id(fake, monkeypatch):
    monkeypatch.setattr(E, "_pci_bus_id", lambda i: f"0000:{0x41 + i:02x}:00.0")
    eng = engine_with(fake)
    eng.arm()
    fake._emit(R.memcpy(start=fake.get_timestamp(), device_id=1))
    eng.flush()
    assert eng.report()["devices"] == {"1": {"pci_bus_id": "0000:42:00.0"}}


def test_pci_bus_id_without_cuda_bindings_is_unknown():
    assert E._pci_bus_id(0) is None or isinstance(E._pci_bus_id(0), str)


def test_announce_prints_once(monkeypatch, capsys):
    monkeypatch.setenv("PINMON_TRACE_ANNOUNCE", "1")
    E.announce("engine cupti")
    E.announce("engine cupti")
    assert capsys.readouterr().err == "pinmon trace: engine cupti\n"
    assert os.environ["PINMON_TRACE_ANNOUNCE"] == "0"


class _Engine:
    def __init__(self):
        self.calls = []

    def pause(self, by):
        self.calls.append(("pause", by))

    def resume(self):
        self.calls.append("resume")


def _when_imported_now(modules):
    return lambda name, fn: fn(modules[name]) if name in modules else None


def test_a_torch_profiler_session_pauses_the_engine_around_it():
    import types

    class profile:  # torch.autograd.profiler.profile's protocol
        def __enter__(self):
            self._prepare_trace()
            return self

        def _prepare_trace(self):
            eng.calls.append("kineto prepares")
            return "prepared"

        def __exit__(self, *exc):
            eng.calls.append("kineto stops")
            return False

    torch = types.SimpleNamespace(autograd=types.SimpleNamespace(profiler=types.SimpleNamespace(profile=profile)))
    eng = _Engine()
    E.watch_profilers(eng, _when_imported_now({"torch": torch}))
    with profile():
        eng.calls.append("work")
    assert eng.calls == [("pause", "torch.profiler"), "kineto prepares", "work", "kineto stops", "resume"]


def test_a_torch_profiler_that_fails_to_stop_still_resumes_the_engine():
    import types

    class profile:
        def _prepare_trace(self):
            return None

        def __exit__(self, *exc):
            raise RuntimeError("kineto")

    torch = types.SimpleNamespace(autograd=types.SimpleNamespace(profiler=types.SimpleNamespace(profile=profile)))
    eng = _Engine()
    E.watch_profilers(eng, _when_imported_now({"torch": torch}))
    p = profile()
    p._prepare_trace()
    with pytest.raises(RuntimeError):
        p.__exit__(None, None, None)
    assert eng.calls == [("pause", "torch.profiler"), "resume"]
    with pytest.raises(RuntimeError):
        profile().__exit__(None, None, None)  # an exit without a prepare resumes nothing
    assert eng.calls == [("pause", "torch.profiler"), "resume"]


def test_jax_profiler_start_stop_and_trace_pause_the_engine():
    import contextlib
    import types

    log = []

    @contextlib.contextmanager
    def trace(log_dir):
        log.append("trace on")
        yield
        log.append("trace off")

    mod = types.SimpleNamespace(start_trace=lambda d: log.append("start"), stop_trace=lambda: log.append("stop"),
                                trace=trace)
    eng = _Engine()
    E.watch_profilers(eng, _when_imported_now({"jax.profiler": mod}))
    mod.start_trace("/tmp/x")
    mod.stop_trace()
    with mod.trace("/tmp/x"):
        log.append("work")

    @mod.trace("/tmp/x")
    def job():
        log.append("job")

    job()
    assert log == ["start", "stop", "trace on", "work", "trace off", "trace on", "job", "trace off"]
    assert eng.calls == [("pause", "jax.profiler"), "resume"] * 3


def test_a_failing_jax_start_trace_resumes_at_once():
    import types

    def start_trace(d):
        raise RuntimeError("xla")

    mod = types.SimpleNamespace(start_trace=start_trace, stop_trace=lambda: None, trace=None)
    eng = _Engine()
    E.watch_profilers(eng, _when_imported_now({"jax.profiler": mod}))
    with pytest.raises(RuntimeError):
        mod.start_trace("/tmp/x")
    assert eng.calls == [("pause", "jax.profiler"), "resume"]


def test_a_missing_dependency_of_cupti_python_is_named():
    def missing_bindings():
        raise ImportError("No module named 'cuda'", name="cuda")

    eng = CuptiEngine(loader=missing_bindings)
    assert eng.arm() is False and eng.notice == "cupti-python does not load: cuda is missing"


def test_either_cupti_python_gives_the_layouts_the_attributes_and_its_major(fake):
    import ctypes

    import numpy as np

    from pinmon.trace.cupti_raw import (
        KIND_CONTEXT,
        KIND_DRIVER,
        KIND_MEMCPY,
        KIND_MEMORY2,
        KIND_RUNTIME,
        BufferParser,
        layouts_of,
    )

    layouts = layouts_of(fake)  # activity_memcpy6_dtype (13) or c_upti_activity_memcpy6_dtype (12)
    assert {k: v.size for k, v in layouts.items()} == {KIND_MEMCPY: 96, KIND_MEMORY2: 128, KIND_CONTEXT: 32,
                                                       KIND_DRIVER: 40, KIND_RUNTIME: 40}
    assert E.activity_attribute(fake, "DEVICE_BUFFER_POOL_LIMIT") == 2
    assert E.cupti_major(fake, None) == fake.MAJOR == E.cupti_major(fake, VERSION[fake.MAJOR])
    # A buffer as that CUPTI writes it, read by the fast path.
    prefix = "activity_" if fake.MAJOR == 13 else "c_upti_activity_"
    copy = np.zeros(1, dtype=getattr(fake, prefix + "memcpy6_dtype"))
    for name, value in dict(kind=KIND_MEMCPY, copy_kind=1, src_kind=2, dst_kind=3, bytes=8 * MIB, start=100,
                            end=2100, copy_count=1).items():
        copy[name] = value
    data = bytearray(copy.tobytes())
    buf = (ctypes.c_char * len(data)).from_buffer(data)
    parsed = BufferParser(layouts).parse(ctypes.addressof(buf), len(data))
    assert parsed.memcpy == [(KIND_MEMCPY, 1, 2, 3, 8 * MIB, 100, 2100, 0, 0, 0, 1)]


def test_an_unknown_attribute_name_is_an_attribute_error(fake):
    with pytest.raises(AttributeError):
        E.activity_attribute(fake, "NO_SUCH_ATTRIBUTE")


def test_arm_asks_for_api_records_of_the_register_calls_only(fake):
    eng = engine_with(fake)
    assert eng.arm()
    on = {k for k, v in fake.api_switches.items() if v}
    assert on == {(5, 152), (4, 301), (4, 379)}  # cudaHostRegister_v4000, cuMemHostRegister, cuMemHostRegister_v2
    assert fake.api_switches[(5, 31)] is False and fake.api_switches[(4, 276)] is False  # copies: no API records
    assert not {cbid for _, cbid in fake.api_switches} & {0, 0x7fffffff}  # INVALID, FORCE_INT name no call
    # The kind goes on before its calls are switched off (CUPTI forgets switches made before).
    calls = fake.calls
    assert calls.index(("enable", 5)) < min(i for i, c in enumerate(calls) if c[:2] == ("api", 5))
    assert eng.report()["registrations_error"] is None


def test_registered_bytes_of_any_library_are_told_apart(fake):
    """B6: a 32 MiB cudaHostRegister counts in the pinned bytes and, under CUPTI 12 as 13, as registered."""
    eng = engine_with(fake)
    eng.arm()
    t = fake.get_timestamp()
    A = 0x7F0000000000
    fake._emit(R.memory(nbytes=32 * MIB, correlation_id=7, address=A, timestamp=t))
    fake._emit(R.api(cbid=152, correlation_id=7))                         # cudaHostRegister
    fake._emit(R.memory(nbytes=MIB, correlation_id=8, address=A + 64 * MIB, timestamp=t))
    fake._emit(R.api(cbid=27, correlation_id=8))                          # cudaHostAlloc: switched off
    eng.flush()
    p = eng.report()["pinned"]
    assert p["bytes"] == 33 * MIB and p["registered_bytes"] == 32 * MIB and p["registrations"] == 1
    fake._emit(R.memory(op=2, nbytes=32 * MIB, correlation_id=9, address=A, timestamp=t + 1))
    eng.flush()
    p = eng.report()["pinned"]
    assert p["bytes"] == MIB and p["registered_bytes"] == 0 and p["unregistrations"] == 1


def test_without_api_records_registrations_are_not_told_apart(fake):
    fake.fail_api_switch = 1
    eng = engine_with(fake)
    assert eng.arm() and eng.state == "armed"
    assert fake.enabled == {1, 9, 49}  # the API kinds went off again: no record of every call
    rep = eng.report()
    assert rep["pinned"]["registered_bytes"] is None
    assert rep["registrations_error"].startswith("registered ranges not told apart: runtime API: cuptiError")
    assert "; driver API: cuptiError" in rep["registrations_error"]


def test_a_few_calls_cupti_will_not_switch_off_leave_registrations_told_apart(fake):
    """A CUPTI whose table lacks a callback id of the enum (a newer name than its library): that
    call's records keep coming and are ignored; the register calls are still told apart."""
    fake.refuse_api_switch.update({(5, 31), (4, 276)})  # cudaMemcpy, cuMemcpyHtoD_v2
    eng = engine_with(fake)
    assert eng.arm() and fake.enabled == ARMED_KINDS
    rep = eng.report()
    assert rep["registrations_error"] is None and rep["pinned"]["registered_bytes"] == 0
    assert rep["registrations_notes"] == ["runtime API: 1 calls' records could not be switched off",
                                          "driver API: 1 calls' records could not be switched off"]
    fake._emit(R.api(cbid=31, correlation_id=3))                            # cudaMemcpy: ignored
    fake._emit(R.api(cbid=152, correlation_id=7))                           # cudaHostRegister
    fake._emit(R.memory(nbytes=2 * MIB, correlation_id=7, address=0x1000, timestamp=fake.get_timestamp()))
    eng.flush()
    assert eng.report()["pinned"]["registered_bytes"] == 2 * MIB


def test_a_register_call_cupti_will_not_record_gives_up_that_api_kind_only(fake):
    fake.refuse_api_switch.add((4, 301))  # cuMemHostRegister
    eng = engine_with(fake)
    assert eng.arm() and fake.enabled == {1, 9, 49, 5}  # the driver API kind went off again
    rep = eng.report()
    assert rep["registrations_error"] is None
    assert rep["registrations_notes"] == [
        "driver API: cuptiError: ERROR_INVALID_PARAMETER: its register calls are counted as allocations"]


def test_resume_after_a_profiler_asks_for_the_register_calls_again(fake):
    eng = engine_with(fake)
    eng.arm()
    eng.pause("torch.profiler")
    assert fake.enabled == set()
    fake.api_switches.clear()  # the profiler's session left CUPTI's switches as it wanted them
    eng.resume()
    assert fake.enabled == ARMED_KINDS and fake.api_switches[(5, 152)] and not fake.api_switches[(5, 31)]
    fake._emit(R.api(cbid=152, correlation_id=7))
    fake._emit(R.memory(nbytes=2 * MIB, correlation_id=7, address=0x1000, timestamp=fake.get_timestamp()))
    eng.flush()
    assert eng.report()["pinned"]["registered_bytes"] == 2 * MIB


def test_a_cupti_python_without_per_call_switches_still_arms(fake, monkeypatch):
    monkeypatch.delattr(fake, "activity_enable_driver_api")
    monkeypatch.delattr(fake, "activity_enable_runtime_api")
    eng = engine_with(fake)
    assert eng.arm() and eng.state == "armed" and fake.enabled == {1, 9, 49}
    assert "AttributeError" in eng.report()["registrations_error"]


def test_a_cupti_python_without_the_driver_switches_tells_runtime_registrations_apart(fake, monkeypatch):
    monkeypatch.delattr(fake, "activity_enable_driver_api")
    eng = engine_with(fake)
    assert eng.arm() and fake.enabled == {1, 9, 49, 5}
    rep = eng.report()
    assert rep["registrations_error"] is None and rep["pinned"]["registered_bytes"] == 0
    assert "driver API: AttributeError" in rep["registrations_notes"][0]


class RawLib:
    """The raw record path's hold on libcupti (``cupti_raw.RawCallbacks``), recording what is asked of it."""

    class parser:
        walk_mismatches = 0

    callback_errors = 0

    def __init__(self, fake):
        self.fake = fake
        self.engine = None
        self.kinds: set[int] = set()
        self.switches: dict[tuple[int, int], bool] = {}

    def register(self):
        # The fake hands out record objects: the engine's own object callbacks stand in for the pages.
        self.fake.activity_register_callbacks(self.engine._requested, self.engine._completed)

    # What is asked here reaches the same CUPTI (the fake's state) as cupti-python's calls do.
    def enable_kind(self, kind):
        self.kinds.add(kind)
        self.fake.enabled.add(kind)

    def disable_kind(self, kind):
        self.kinds.discard(kind)
        self.fake.enabled.discard(kind)

    def switch_api_call(self, kind, cbid, enable):
        self.switches[(kind, cbid)] = self.fake.api_switches[(kind, cbid)] = bool(enable)


def test_api_kinds_cupti_python_will_not_enable_go_through_libcupti_on_the_raw_path(fake, monkeypatch):
    """cupti-python 12.8 refuses to enable the API kinds (NotImplementedError: it has no record objects
    for them); the raw path reads their records itself, so libcupti is asked directly."""
    raw = RawLib(fake)
    monkeypatch.setattr(CuptiEngine, "_raw_callbacks", lambda self, c: raw)
    fake.unsupported_kinds.update({4, 5})
    eng = raw.engine = engine_with(fake)
    assert eng.arm() and fake.enabled == ARMED_KINDS and raw.kinds == {4, 5}
    assert raw.switches[(5, 152)] and not raw.switches[(5, 31)] and not raw.switches[(4, 276)]
    rep = eng.report()
    assert rep["registrations_error"] is None and rep["registrations_notes"] == []
    fake._emit(R.api(cbid=152, correlation_id=7))
    fake._emit(R.memory(nbytes=2 * MIB, correlation_id=7, address=0x1000, timestamp=fake.get_timestamp()))
    eng.flush()
    assert eng.report()["pinned"]["registered_bytes"] == 2 * MIB
    eng.close()
    assert raw.kinds == set() and fake.enabled == set()  # turned off the way they were turned on


def test_without_the_raw_path_api_kinds_cupti_python_refuses_are_named(fake):
    fake.unsupported_kinds.add(5)
    eng = engine_with(fake)
    assert eng.arm() and fake.enabled == {1, 9, 49, 4}
    assert eng.report()["registrations_notes"] == [
        "runtime API: NotImplementedError: Activity Kind RUNTIME not supported: its register calls are counted"
        " as allocations"]
