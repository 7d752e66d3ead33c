"""``pinmon export`` as a user meets it: bad input is one line and exit 2, --once, serving, signals."""
import os
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest

from pinmon.cli import main
from tests.export.helpers import recording_snapshots, value, write_recording
from tests.factories import GIB
from tests.waiting import NotYet, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def run_main(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def recording(tmp_path):
    return write_recording(tmp_path / "rec.jsonl.gz", recording_snapshots())


@pytest.fixture
def busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    yield s.getsockname()[1]
    s.close()


BAD = [
    (["--listen", "bogus"], "HOST:PORT"),
    (["--listen", "127.0.0.1:99999"], "port"),
    (["--listen", "127.0.0.1:http"], "port"),
    (["--listen", "::1:9477"], "brackets"),
    (["--listen", "[nothost]:9477"], "IPv6"),
    (["--top-processes", "-1"], "0-1000"),
    (["--top-processes", "many"], "whole number"),
    (["--interval", "0"], "positive"),
    (["--max-pinned", "lots"], "max-pinned"),
    (["--speed", "2"], "--speed needs --replay"),
    (["--replay", "{rec}", "--probe-every", "5"], "does not combine"),
    (["--once", "--probe-every", "5"], "does not combine"),
    (["--replay", "/nonexistent/rec.jsonl"], "no such file"),
    (["--replay", "{dir}"], "directory"),
    (["--replay", "{junk}"], "not JSON"),
    (["--listen", "127.0.0.1:{busy}", "--replay", "{rec}"], "cannot listen"),
    (["--config", "/nonexistent/c.toml", "--once"], "no such file"),
]


@pytest.mark.parametrize("argv, words", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, recording, busy_port, argv, words):
    junk = tmp_path / "junk.jsonl"
    junk.write_text("hello\n")
    argv = [a.format(rec=recording, dir=tmp_path, junk=junk, busy=busy_port) for a in argv]
    if argv[:2] == ["--config", "/nonexistent/c.toml"]:
        argv = ["--config", "/nonexistent/c.toml", "export", *argv[2:]]
    else:
        argv = ["export", *argv]
    code, out, err = run_main(argv, capsys)
    assert code == 2
    assert err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert words.lower() in err.lower(), err
    assert out == ""


def test_help_says_loopback_by_default_and_wider_binds_are_explicit(capsys):
    code, out, _ = run_main(["export", "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    assert "127.0.0.1:9477" in text and "loopback" in text and "0.0.0.0:9477" in text and "[::1]:9477" in text


def test_once_on_a_replay_prints_the_recordings_end_state(capsys, recording):
    code, out, err = run_main(["export", "--once", "--replay", recording], capsys)
    assert code == 0, err
    snaps = recording_snapshots()
    assert value(out, "pinmon_last_snapshot_timestamp_seconds") == snaps[-1].time
    assert value(out, "pinmon_gpu_pcie_rx_bytes_total", gpu=0) == sum(s.gpus[0].pcie.rx_bytes for s in snaps)
    assert value(out, "pinmon_gpu_pcie_rx_bytes_per_second", gpu=0) == snaps[-1].gpus[0].pcie.rx_bytes_per_s
    assert value(out, "pinmon_host_pinned_bytes_estimate") == 60 * GIB
    assert value(out, "pinmon_process_pinned_bytes", pid=7, name="hog") == 60 * GIB
    assert value(out, "pinmon_finding", rule="pinned-ram-share", severity="critical") == 1
    assert value(out, "pinmon_status") == 2
    assert value(out, "pinmon_replay_finished") == 1


def test_once_top_processes_caps_the_series(capsys, recording):
    code, out, _ = run_main(["export", "--once", "--replay", recording, "--top-processes", "1"], capsys)
    assert code == 0
    assert value(out, "pinmon_process_pinned_bytes", pid=7) == 60 * GIB
    assert value(out, "pinmon_process_pinned_bytes", pid="other") == 3 * (1 << 20)


def test_once_live_without_a_gpu_still_serves_host_memory():
    # Real /proc, NVML absent or present: either way host memory is exported and the exit is 0.
    p = subprocess.run([sys.executable, "-m", "pinmon", "export", "--once", "--interval", "0.2"], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert value(p.stdout, "pinmon_host_memory_total_bytes") > 0
    assert value(p.stdout, "pinmon_snapshots_total") == 1


def start_exporter(args, env=None):
    """``pinmon export ARGS`` in a subprocess; returns (process, metrics URL) once it serves."""
    p = subprocess.Popen([sys.executable, "-m", "pinmon", "export", *args], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    line = p.stderr.readline()
    if "serving" not in line:
        p.kill()
        _out, err = p.communicate(timeout=10)
        raise AssertionError(f"exporter did not start: {line}{err}")
    return p, line.split("serving ", 1)[1].split()[0]


def scrape(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        assert r.status == 200
        return r.read().decode()


def wait_for(url, name, predicate):
    """The scrape in which metric ``name`` first meets ``predicate``."""
    def scraped():
        text = scrape(url)
        v = value(text, name)
        if v is None or not predicate(v):
            raise NotYet(f"{name} = {v}")
        return text
    return wait_until(scraped, interval_s=0.1, what=name)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_a_replay_and_exits_0_on_signals(recording, sig):
    p, url = start_exporter(["--replay", recording, "--speed", "20", "--listen", "127.0.0.1:0"])
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
        text = wait_for(url, "pinmon_replay_finished", lambda v: v == 1)
        assert value(text, "pinmon_last_snapshot_timestamp_seconds") == 2002.0
        assert value(text, "pinmon_status") == 2
        p.send_signal(sig)
        assert p.wait(timeout=10) == 0
        assert "Traceback" not in p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback here")
def test_ipv6_listen(recording):
    p, url = start_exporter(["--replay", recording, "--listen", "[::1]:0"])
    try:
        assert url.startswith("http://[::1]:")
        assert "pinmon_scrape_errors_total" in scrape(url)
        p.terminate()
        assert p.wait(timeout=10) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_serves_live_and_exits_0_on_sigterm():
    # No GPU here (or NVML faked away): host memory is still collected in the background.
    p, url = start_exporter(["--interval", "0.2", "--listen", "127.0.0.1:0"])
    try:
        text = wait_for(url, "pinmon_snapshots_total", lambda v: v >= 3)
        assert value(text, "pinmon_host_memory_total_bytes") > 0
        assert value(text, "pinmon_replay_finished") is None
        p.terminate()
        assert p.wait(timeout=10) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


# --- --once interrupted ------------------------------------------------------------------------------

class _InterruptedSleep:
    """The ``time`` module as export sees it, with Ctrl-C landing in the counting interval's sleep."""

    monotonic = staticmethod(__import__("time").monotonic)

    @staticmethod
    def sleep(_seconds):
        raise KeyboardInterrupt


def test_once_interrupted_prints_nothing_and_exits_130(capsys, monkeypatch):
    """A one-shot stopped before it has the metrics did not do its job: 130, not 0, and no half output
    for a `> file.prom` to publish. (The server stopped by Ctrl-C ends normally: 0, tested above.)"""
    from pinmon.cli.commands import export

    monkeypatch.setattr(export, "time", _InterruptedSleep)
    code, out, err = run_main(["export", "--once", "--interval", "30"], capsys)
    assert code == 130 and out == "" and err == "pinmon: interrupted\n"


# The main thread's system call while it sleeps in time.sleep (Linux x86-64: clock_nanosleep, or
# select on Python before 3.11).
_SLEEP_SYSCALLS = {"x86_64": ("230", "23", "270")}


def test_once_interrupted_by_a_real_sigint_exits_130():
    sleeping = _SLEEP_SYSCALLS.get(os.uname().machine)
    if sleeping is None:
        pytest.skip("the sleep's system call number is known for x86-64 only")
    p = subprocess.Popen([sys.executable, "-m", "pinmon", "export", "--once", "--interval", "3600"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def in_the_interval():
            with open(f"/proc/{p.pid}/syscall") as f:
                return f.read().split(" ", 1)[0] in sleeping
        wait_until(in_the_interval, what="the counting interval's sleep", retry_on=(OSError,))
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        assert p.returncode == 130 and out == "" and err.endswith("pinmon: interrupted\n"), err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
