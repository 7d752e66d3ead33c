"""The parsers take any text without raising, and what they show stays printable and bounded."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pinmon.collect.cgroups.mounts import Mount, parse_mountinfo, to_dir
from pinmon.collect.cgroups.names import (
    NAME_MAX_CHARS,
    names_from_docker_config,
    names_from_oci_spec,
    parse_container_log_name,
    parse_pod_log_dir,
)
from pinmon.collect.cgroups.ownership import DISPLAY_MAX_CHARS, KINDS, owner_of
from pinmon.collect.cgroups.vmpin import parse_vmpin

C = "a42d519714d616e9411dbceec4b52808bd6b1ee53e6f6497a281d655357d8b71"
PIECES = ["kubepods.slice", "kubepods-burstable.slice", "kubepods-pod0a1b2c3d_4e5f_4a6b_8c7d_9e0f1a2b3c4d.slice",
          f"cri-containerd-{C}.scope", f"crio-{C}", C, "docker", f"docker-{C}.scope", "kubepods", "burstable",
          "pod0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", f"libpod-{C}.scope", "libpod_parent", "slurm", "uid_1",
          "job_12", "step_batch", "step_0", "task_0", "slurmstepd.scope", "user@1000.service", "user-1000.slice",
          "x.service", "..", ".", "", "\x1b[2J", "\n0::/evil", "é"]


def _shown(owner):
    assert owner.kind in KINDS
    assert len(owner.display) <= DISPLAY_MAX_CHARS
    assert all(ch.isprintable() for ch in owner.display)
    assert all(ch.isprintable() for ch in owner.key)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_owner_of_any_text(text):
    _shown(owner_of(text))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PIECES), max_size=8), min_size=1, max_size=4),
       st.sampled_from(["0::", "4:memory:", "1:name=systemd:", "3:cpu,cpuacct:"]))
def test_owner_of_paths_built_from_real_components(paths, prefix):
    text = "".join(f"{prefix}/{'/'.join(p)}\n" for p in paths)
    owner = owner_of(text)
    _shown(owner)
    if owner.container_id is not None:
        assert len(owner.container_id) == 64 and set(owner.container_id) <= set("0123456789abcdef")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_mountinfo_and_paths(text):
    parse_mountinfo(text, root="/r")
    d, why = to_dir(Mount("/sys/fs/cgroup", "/"), text)
    assert (d is None) != (why is None)
    if d is not None:
        assert d.startswith("/sys/fs/cgroup") and "/../" not in d + "/"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_name_parsers(text):
    for parsed in (parse_container_log_name(text), parse_pod_log_dir(text)):
        if parsed is not None:
            for v in (parsed[1].pod_name, parsed[1].namespace, parsed[1].container_name):
                assert v is None or (len(v) <= NAME_MAX_CHARS and v.isprintable())
    parse_vmpin(text)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=80),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=40), inner, max_size=4),
                    max_leaves=20)
KEYS = ["io.kubernetes.cri.sandbox-name", "io.kubernetes.cri.container-name", "io.kubernetes.pod.name",
        "io.kubernetes.pod.uid", "io.kubernetes.cri.sandbox-uid"]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), JSON, max_size=5), JSON)
def test_spec_parsers(annotations, name):
    for data in (json.dumps({"annotations": annotations}).encode(), json.dumps({"Name": name}).encode()):
        for got in (names_from_oci_spec(data, None), names_from_docker_config(data, None)):
            if got is not None:
                for v in (got.pod_name, got.namespace, got.container_name):
                    assert v is None or (len(v) <= NAME_MAX_CHARS and v.isprintable())
