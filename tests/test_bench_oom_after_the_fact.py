"""bench/oom_after_the_fact.py's GPU-free parts: the job's cgroups as Slurm's v2 plugin lays them out,
and its refusal to run where there is no cgroup v2 (it makes directories under /sys/fs/cgroup)."""
import os

import pytest

from pinmon.collect.cgroups.ownership import owner_of

from .bench_scripts import load_bench


@pytest.fixture(scope="module")
def bench():
    return load_bench("oom_after_the_fact")


def test_the_job_is_laid_out_as_slurm_lays_it_out_and_named_as_its_step(bench, tmp_path):
    dirs = bench.job_cgroups(str(tmp_path), 90042)
    rel = ["/" + os.path.relpath(d, str(tmp_path)) for d in dirs]
    assert rel == ["/slurmstepd.scope", "/slurmstepd.scope/job_90042", "/slurmstepd.scope/job_90042/step_0",
                   "/slurmstepd.scope/job_90042/step_0/user", "/slurmstepd.scope/job_90042/step_0/user/task_0"]
    owner = owner_of(f"0::/system.slice{rel[-1]}\n")
    assert owner.kind == "slurm" and owner.display == "job 90042.0"
    assert owner.cgroup.v2 == f"/system.slice{rel[2]}"  # the step is the group; the limit sits on it
    assert bench.size("4G") == 4 << 30 and bench.size("1G") == 1 << 30


def test_it_refuses_without_root_and_cgroup_v2(bench, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench, "CGROUP_ROOT", str(tmp_path))  # no cgroup.controllers: not a v2 mount
    monkeypatch.setattr("sys.argv", ["oom_after_the_fact.py", str(tmp_path / "out.json")])
    assert bench.main() == 2 and "cgroup v2" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
