"""The kernel's log and the memory cgroup OOM kills in it: /dev/kmsg records (the kernel's own only,
read without blocking, overwritten ones skipped, each once), the kill's lines joined by pid, and the
``oom-kill:`` line split where a user's cgroup or task name tries to forge another.

The fixture tests/fixtures/kmsg/slurm_v1_oom.kmsg is a real capture from the development box
(kernel 6.18, cgroup v1): a process with 32 MiB of shared memory, grown past its Slurm-shaped job's
48 MiB limit (``.../slurm/uid_0/job_4242/step_0/task_0``), as /dev/kmsg gave it, one record a line."""
from __future__ import annotations

import errno
import os

import pytest

from pinmon.collect.host import kmsg as kmsg_mod
from pinmon.collect.host.kmsg import KmsgReader, parse_record, unescape
from pinmon.collect.host.oom_log import MAX_KILLS, OomLogParser, split_oom_kill

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "kmsg")
MIB = 1 << 20
JOB = "/process_api/6f2b24eb9bc72087a278c8b0a864acdb/pinmon-cgroups-oomfixture/slurm/uid_0/job_4242"


def fixture_records(name: str = "slurm_v1_oom.kmsg") -> list[bytes]:
    with open(os.path.join(FIXTURES, name), "rb") as f:
        return [line + b"\n" for line in f.read().splitlines()]


class FakeKmsg:
    """What /dev/kmsg answers: each record once, then EAGAIN; an exception in the list is raised."""

    def __init__(self, items):
        self.items = list(items)
        self.opened = 0

    def open(self, path, flags):
        assert flags & os.O_NONBLOCK
        self.opened += 1
        return 99

    def read(self, fd, n):
        assert fd == 99 and n >= 8192
        if not self.items:
            raise BlockingIOError(errno.EAGAIN, "again")
        item = self.items.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item


def reader(items) -> tuple[KmsgReader, FakeKmsg]:
    fake = FakeKmsg(items)
    r = KmsgReader("/dev/kmsg", opener=fake.open, reader=fake.read)
    r.close = lambda: None  # nothing real to close
    return r, fake


def record(seq: int, text: str, prio: int = 6, usec: int = 1_000_000) -> bytes:
    return f"{prio},{seq},{usec},-;{text}\n".encode()


# --- records ------------------------------------------------------------------------------------

def test_a_record_and_its_continuation_lines():
    r = parse_record(b"3,430,89829063,-;Memory cgroup out of memory: Killed process 2228 (python)\n"
                     b" SUBSYSTEM=memory\n DEVICE=+x\n")
    assert (r.seq, r.usec, r.level) == (430, 89829063, 3)
    assert r.text == b"Memory cgroup out of memory: Killed process 2228 (python)"


def test_a_record_a_program_wrote_is_not_the_kernels():
    # Written to /dev/kmsg with "<3>": the kernel gives it facility LOG_USER (prio 8 + level).
    assert parse_record(b"11,5,100,-;Memory cgroup out of memory: Killed process 1 (x)\n") is None
    assert parse_record(b"3,5,100,-;ok\n") is not None


@pytest.mark.parametrize("data", [b"", b"garbage", b"3,x,1,-;t", b"3,1;t", b"3,1,2;t", b"9" * 30 + b",1,1,-;t"])
def test_junk_records_are_skipped(data):
    assert parse_record(data) is None


def test_escapes_are_undone():
    assert unescape(b"a\\x1b[2Jb\\x5cc") == b"a\x1b[2Jb\\c"


def test_the_reader_reads_each_record_once_and_skips_overwritten_ones():
    r, fake = reader([record(1, "one"), BrokenPipeError(errno.EPIPE, "pipe"), record(5, "five"),
                      record(5, "five again"), record(9, "user", prio=14), record(6, "six")])
    assert [x.text for x in r.read_new()] == [b"one", b"five", b"six"]
    assert r.lost == 1 and r.last_seq == 6 and r.notice is None
    fake.items = [record(7, "seven")]
    assert [x.seq for x in r.read_new()] == [7] and fake.opened == 1  # one descriptor, kept


def test_a_call_reads_a_bounded_number_of_records(monkeypatch):
    monkeypatch.setattr(kmsg_mod, "MAX_RECORDS_PER_CALL", 3)
    r, _fake = reader([record(i, f"r{i}") for i in range(1, 8)])
    assert len(list(r.read_new())) == 3
    assert len(list(r.read_new())) == 3  # the rest wait for the next call


@pytest.mark.parametrize("err,said", [(errno.EACCES, "permission denied"), (errno.EPERM, "permission denied"),
                                      (errno.ENOENT, "missing")])
def test_no_kernel_log_is_a_notice_said_once(err, said):
    calls = []

    def refuse(path, flags):
        calls.append(path)
        raise OSError(err, os.strerror(err))

    r = KmsgReader("/dev/kmsg", opener=refuse)
    assert list(r.read_new()) == [] and said in r.notice and "OOM kills" in r.notice
    assert list(r.read_new()) == [] and len(calls) == 1


def test_a_read_error_closes_the_log_with_a_notice():
    r, _fake = reader([OSError(errno.EIO, "io")])
    assert list(r.read_new()) == [] and "Input/output error" in r.notice


def test_the_real_log_reads_without_blocking():
    if not os.path.exists("/dev/kmsg"):
        pytest.skip("no /dev/kmsg here")
    r = KmsgReader()
    first = list(r.read_new())
    if r.notice:
        pytest.skip(r.notice)
    assert first and all(x.seq >= 0 for x in first)
    again = list(r.read_new())  # only what was logged since: usually nothing
    assert all(x.seq > first[-1].seq for x in again)
    r.close()


# --- the kills ----------------------------------------------------------------------------------

def parsed(raw: list[bytes]) -> OomLogParser:
    r, _fake = reader(raw)
    p = OomLogParser()
    p.feed(r.read_new())
    return p


def test_the_real_capture_gives_one_kill_with_its_group_limit_and_memory():
    (k,) = parsed(fixture_records()).kills
    assert k.pid == 28879 and k.task == "python3" and k.uid == 0
    assert k.oom_memcg == JOB and k.task_memcg == f"{JOB}/step_0/task_0"
    assert k.limit_bytes == 48 * MIB
    assert k.shmem_rss_bytes == 46080 * 1024 and k.anon_rss_bytes == 6784 * 1024
    assert k.file_rss_bytes == 6660 * 1024 and k.total_vm_bytes == 114904 * 1024
    assert k.seq == 1562 and k.usec == 1513071119 and not k.ambiguous


def test_a_kills_lines_are_joined_across_two_reads():
    raw = fixture_records()
    at = next(i for i, r in enumerate(raw) if b";oom-kill:" in r) + 1
    p = OomLogParser()
    r1, _ = reader(raw[:at])
    p.feed(r1.read_new())
    (half,) = p.kills
    assert half.pid == 28879 and half.shmem_rss_bytes is None  # the Killed line is not there yet
    r2, _ = reader(raw[at:])
    p.feed(r2.read_new())
    (k,) = p.kills
    assert k.shmem_rss_bytes == 46080 * 1024 and k.limit_bytes == 48 * MIB


KILLED = ("Memory cgroup out of memory: Killed process {pid} ({comm}) total-vm:1000kB, anon-rss:100kB,"
          " file-rss:10kB, shmem-rss:{shmem}kB, UID:1000 pgtables:16kB oom_score_adj:0")


def oom(seq, memcg, task_memcg, comm="python3", pid=4242, uid=1000, limit_kb=4194304, stats=None, shmem=3000000,
        cpuset="/", constraint="CONSTRAINT_MEMCG"):
    return [record(seq, f"{comm} invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0", 4),
            record(seq + 1, f"memory: usage {limit_kb}kB, limit {limit_kb}kB, failcnt 7"),
            record(seq + 2, f"Memory cgroup stats for {stats if stats is not None else memcg}:"),
            record(seq + 3, f"oom-kill:constraint={constraint},nodemask=(null),cpuset={cpuset},mems_allowed=0,"
                            f"oom_memcg={memcg},task_memcg={task_memcg},task={comm},pid={pid},uid={uid}"),
            record(seq + 4, KILLED.format(pid=pid, comm=comm, shmem=shmem), 3)]


def test_a_kill_without_its_oom_kill_line_names_no_cgroup():
    # In an OOM storm the kernel rate-limits everything but the Killed line.
    (k,) = parsed([record(1, KILLED.format(pid=7, comm="python3", shmem=2048), 3)]).kills
    assert k.pid == 7 and k.oom_memcg is None and k.task_memcg is None and k.uid == 1000
    assert k.shmem_rss_bytes == 2048 * 1024 and k.limit_bytes is None


def test_the_hosts_own_oom_is_not_a_groups():
    raw = oom(10, "/", "/user.slice", constraint="CONSTRAINT_NONE")
    raw[-1] = raw[-1].replace(b"Memory cgroup out of memory", b"Out of memory")
    assert parsed(raw).kills == ()


def test_no_limit_logged_as_a_huge_number_is_no_limit():
    (k,) = parsed(oom(10, "/a", "/a", limit_kb=9007199254740988)).kills
    assert k.limit_bytes is None


def test_a_limit_line_of_another_cgroup_is_not_taken():
    (k,) = parsed(oom(10, "/a", "/a/b", stats="/elsewhere")).kills
    assert k.limit_bytes is None and k.oom_memcg == "/a"


def test_two_kills_in_a_row_each_get_their_own_lines():
    p = parsed(oom(10, "/a", "/a", pid=1, limit_kb=1024) + oom(20, "/b", "/b/c", pid=2, limit_kb=2048))
    a, b = p.kills
    assert (a.pid, a.limit_bytes, a.task_memcg) == (1, MIB, "/a")
    assert (b.pid, b.limit_bytes, b.task_memcg) == (2, 2 * MIB, "/b/c")


def test_kills_kept_are_bounded():
    raw = []
    for i in range(MAX_KILLS + 10):
        raw += oom(10 * i + 10, f"/g{i}", f"/g{i}", pid=i + 1)
    kills = parsed(raw).kills
    assert len(kills) == MAX_KILLS and kills[-1].pid == MAX_KILLS + 10


# --- forgeries in user-made names ---------------------------------------------------------------

POD = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0a1b.slice/cri-containerd-ab.scope"
USER = "/user.slice/user-1500.slice/user@1500.service"


def test_a_cgroup_name_holding_a_forged_task_memcg_is_split_where_the_kernel_wrote_it():
    evil = f"{USER}/x,task_memcg={POD}"
    (k,) = parsed(oom(10, evil, evil)).kills
    assert k.oom_memcg == evil and k.task_memcg == evil and not k.ambiguous


def test_a_cpuset_name_cannot_forge_the_oom_cgroup():
    # cpuset= prints a cgroup *name* (no "/"), chosen by the delegated user.
    cpuset = "x,mems_allowed=0,oom_memcg=kubepods,task_memcg=kubepods,task=a,pid=1,uid=0"
    (k,) = parsed(oom(10, f"{USER}/job", f"{USER}/job", cpuset=cpuset)).kills
    assert k.task_memcg == f"{USER}/job" and k.pid == 4242


def test_a_task_name_holding_key_text_is_kept_whole_and_bounded():
    (k,) = parsed(oom(10, "/a", "/a", comm=",task=x,pid=9")).kills
    assert k.pid == 4242 and k.task == ",task=x,pid=9" and k.task_memcg == "/a"
    (k,) = parsed(oom(10, "/a", "/a", comm="\\x1b]0;pwn\\x07")).kills
    assert k.task == "\x1b]0;pwn\x07"  # unescaped here, shown through units.printable downstream


def test_a_line_that_splits_two_ways_names_no_cgroup():
    # A name built so that both splits fit the kernel's format: trust neither.
    text = b"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
    # oom_memcg=/p task_memcg=/p/q,task_memcg=/p,task_memcg=/p/q, or
    # oom_memcg=/p,task_memcg=/p/q task_memcg=/p,task_memcg=/p/q: both fit.
    text += b"oom_memcg=/p,task_memcg=/p/q,task_memcg=/p,task_memcg=/p/q,task=c,pid=5,uid=0"
    constraint, paths, pid, uid = split_oom_kill(text)
    assert constraint == b"CONSTRAINT_MEMCG" and paths is None and (pid, uid) == (5, 0)
    p = OomLogParser()
    p.feed([parse_record(b"6,1,1,-;" + text + b"\n")])
    (k,) = p.kills
    assert k.ambiguous and k.task_memcg is None


def test_split_refuses_other_lines_and_hostile_lengths():
    assert split_oom_kill(b"oom-kill:constraint=CONSTRAINT_MEMCG,task=a") is None
    assert split_oom_kill(b"something else") is None
    many = b"oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/a" + b",task_memcg=/a" * 600 + b",task=c,pid=1,uid=0"
    assert split_oom_kill(many)[1] is None  # no split fits: an answer, in bounded work


def test_many_forged_keys_before_the_real_ones_do_not_hide_the_kernels_split():
    # A cpuset name full of ",oom_memcg=" and paths full of ",task=": the real split is still found.
    cpuset = ",oom_memcg=" * 20
    path = f"{USER}/" + ",task=x" * 30
    (k,) = parsed(oom(10, path, path + "/leaf", cpuset=cpuset)).kills
    assert k.oom_memcg == path and k.task_memcg == path + "/leaf" and not k.ambiguous


def test_records_without_a_marker_are_read_past_unparsed():
    from pinmon.collect.host.oom_log import MARKERS

    raw = fixture_records()
    r, _ = reader(raw)
    kept = list(r.read_new(MARKERS))
    assert r.records_read == len(raw) and len(kept) < len(raw) // 2
    p = OomLogParser()
    p.feed(kept)
    assert p.kills == parsed(raw).kills  # the same kill from the marked records alone
