"""Who owns a process, from its ``/proc/PID/cgroup`` text: a pod's container, a Docker or Podman
container, a Slurm job step, a systemd unit, or else its plain cgroup path. Pure: text in, ``Owner``
out; reading the file is ``proc_owner.py``'s job.

The file has one line per hierarchy, ``ID:CONTROLLERS:PATH``: ``0::PATH`` for the unified (v2)
hierarchy, ``N:memory:PATH`` for the v1 memory controller, ``N:name=systemd:PATH`` for systemd's
v1 tracking hierarchy. A hybrid host has both kinds. The owner is read from the first of these that
names one (memory first: on v1 it is the hierarchy whose limit binds; then v2; then the others);
each hierarchy's *group* path, the cgroup to read limits and usage from, is its own path cut at the
owner's component, so every process of one container reads one cgroup.

Path forms, as the runtimes write them:

- Kubernetes, systemd driver: ``/kubepods.slice/kubepods-burstable.slice/
  kubepods-burstable-pod<uid, _ for ->.slice/cri-containerd-<id>.scope`` (``crio-<id>.scope``,
  ``docker-<id>.scope``); Guaranteed pods sit in ``kubepods-pod<uid>.slice`` directly; a kubelet
  with another cgroup root prefixes names (``kubelet-kubepods-...``, as kind does).
  cgroupfs driver: ``/kubepods/burstable/pod<uid>/<id>`` (``besteffort``; Guaranteed has no QoS
  level), CRI-O there writes ``crio-<id>``. A pod's UID is a UUID, or 32 hex digits for a static
  pod (the kubelet hashes its manifest).
- Docker: ``/docker/<id>`` (cgroupfs), ``/system.slice/docker-<id>.scope`` (systemd).
- Podman: ``/machine.slice/libpod-<id>.scope`` (rootful), under ``user@UID.service`` (rootless),
  ``machine-libpod_pod_<pod id>.slice`` for a pod, ``/libpod_parent/libpod-<id>`` (cgroupfs);
  ``libpod-conmon-<id>.scope`` and ``crio-conmon-<id>.scope`` are the runtime's monitor process
  for that container (``helper`` "conmon"), charged to its own cgroup.
- Slurm: ``/slurm/uid_<u>/job_<j>/step_<s>/task_<n>`` (v1, ``slurm_<node>`` with several slurmd),
  ``/system.slice/slurmstepd.scope/job_<j>/step_<s>/user/task_<n>`` (v2, ``<node>_slurmstepd.scope``
  likewise); a step is a number or ``batch``, ``extern``, ``interactive``.
- systemd: the deepest ``*.service`` or ``*.scope`` (``session-3.scope`` under ``user-1000.slice``,
  units under ``user@1000.service``).

**Delegated subtrees.** On cgroup v2 a user owns ``user@UID.service`` and everything below it
(systemd delegates it; rootless Podman and Docker make their containers there), and an
administrator may hand a v1 or v2 directory to a user with ``chown``. A user can name a cgroup there
after anything: pod UIDs and container ids are readable by anyone in ``/proc/PID/cgroup``. So an
identity claimed below a delegated directory is that user's: ``delegated_uid`` is set, the owner is
shown as "user 1500: podman a42d519714d6", its key carries the user, and no name is taken from the
node's records of the real pod or container (``names.py``). The ``user@UID.service`` rule is read
here from the path; the directory owner rule needs a look at the directories (``delegation.py``),
which ``delegated`` applies.

**Keys.** A group's key holds its kind, its ids and its cgroup path (``path_id``): two cgroups are
never one group, whatever their names claim, and every process of one container (cut at the same
component) shares one key.

Container ids are 64 lower-case hex digits, job and step numbers at most 10 digits, unit names
systemd's alphabet. A component that claims a kind but whose id fails its check is not trusted:
the owner is the plain path. Every text an ``Owner`` shows is ``printable`` and bounded; ``..``
components (a path outside the reader's cgroup namespace) are kept in the group path, so the
limits reader can refuse it, and skipped when looking for owners.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from dataclasses import dataclass
from typing import NamedTuple

from ...units import printable

KIND_POD = "pod"            # a Kubernetes pod (container_id: one of its containers)
KIND_DOCKER = "docker"
KIND_PODMAN = "podman"
KIND_SLURM = "slurm"
KIND_SYSTEMD = "systemd"
KIND_CGROUP = "cgroup"      # no owner recognised: the plain cgroup path
KIND_UNKNOWN = "unknown"    # no usable cgroup line (a kernel thread's empty file, a malformed one)
KINDS = (KIND_POD, KIND_DOCKER, KIND_PODMAN, KIND_SLURM, KIND_SYSTEMD, KIND_CGROUP, KIND_UNKNOWN)

DISPLAY_MAX_CHARS = 64      # an owner's name in a table cell, a label, a finding
PATH_MAX_CHARS = 96         # a plain path shown: its tail, where the leaf names the group
SHORT_ID_CHARS = 12         # as docker ps and crictl show container ids
MAX_LINES = 64              # a real file has at most ~16 (one per hierarchy)
KEY_PATH_CHARS = 160        # a path kept whole in a key; a longer one is its head and a digest
DIGEST_CHARS = 16           # hex digits of sha256: 64 bits

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_HEX32 = re.compile(r"[0-9a-f]{32}\Z")
_NUM = re.compile(r"[0-9]{1,10}\Z")
_STEP = re.compile(r"(?:[0-9]{1,10}|batch|extern|interactive)\Z")
_UNIT = re.compile(r"[A-Za-z0-9:_.\\@-]{1,250}\.(?:service|scope)\Z")

# systemd driver: "<prefix>kubepods[-qos]-pod<uid with _>.slice"
_POD_SLICE = re.compile(r"(?:[a-z0-9_.-]*-)?kubepods(?:-(burstable|besteffort))?-pod(.*)\.slice\Z")
_QOS_DIRS = ("burstable", "besteffort")
# "<runtime>-[conmon-]<id>.scope" (systemd drivers) and "crio-[conmon-]<id>" (CRI-O on cgroupfs)
_SCOPE = re.compile(r"(cri-containerd|crio|docker|libpod)-(conmon-)?([^/]*)\.scope\Z")
_CRIO_CGROUPFS = re.compile(r"crio-(conmon-)?([^/]*)\Z")
_LIBPOD_CGROUPFS = re.compile(r"libpod-(conmon-)?([^/]*)\Z")
_PODMAN_POD_SLICE = re.compile(r"machine-libpod_pod_([^/]*)\.slice\Z")
_RUNTIMES = {"cri-containerd": "containerd", "crio": "cri-o", "docker": "docker", "libpod": "podman"}
_USER_SERVICE = re.compile(r"user@([0-9]{1,10})\.service\Z")
_USER_SLICE = re.compile(r"user-([0-9]{1,10})\.slice\Z")


class CgroupPaths(NamedTuple):
    """A group's cgroup in each hierarchy that may hold the memory controller, as the kernel wrote
    it in /proc/PID/cgroup (relative to the reader's cgroup namespace); None where absent. A tuple:
    the limits reader hashes one per process every snapshot, and a tuple's hash is the fast one."""

    v2: str | None = None
    v1_memory: str | None = None


@dataclass(frozen=True)
class Owner:
    """Who a process belongs to, and the cgroup that holds its limit. ``display`` is printable and
    at most ``DISPLAY_MAX_CHARS``; the ids are validated (hex, UUID, numbers) and safe as they are."""

    kind: str
    display: str
    cgroup: CgroupPaths
    pod_uid: str | None = None         # Kubernetes pod UID, with dashes (or 32 hex: static pod)
    qos: str | None = None             # "guaranteed", "burstable", "besteffort"
    container_id: str | None = None    # 64 hex digits
    runtime: str | None = None         # "containerd", "cri-o", "docker", "podman"; None: unknown
    podman_pod_id: str | None = None   # 64 hex digits
    helper: str | None = None          # "conmon": the runtime's monitor of that container
    slurm_job: int | None = None
    slurm_step: str | None = None      # a number, "batch", "extern" or "interactive"
    unit: str | None = None            # systemd unit, e.g. "nginx.service", "session-3.scope"
    user_uid: int | None = None        # user@UID.service / user-UID.slice / Slurm uid_UID
    # The user who owns the delegated subtree the group sits in (a user@UID.service ancestor, or a
    # directory on its path not owned by root): what the path claims is that user's word.
    delegated_uid: int | None = None
    # The process's own cgroup, below the group's (a Slurm task under its step): a limit set there
    # binds the process too. Not part of the owner's identity.
    process_cgroup: CgroupPaths = dataclasses.field(default=CgroupPaths(), compare=False)

    @functools.cached_property
    def key(self) -> str:
        """A stable identity of the group, printable and bounded: equal for every process of one
        group, different for two cgroups (made once per owner: the owner cache hands the same object
        out every snapshot)."""
        user = f"user/{self.delegated_uid}/" if self.delegated_uid is not None else ""
        path = path_id(self.memory_path)
        if self.kind == KIND_POD:
            tail = self.container_id or "-"
            ident = f"pod/{self.pod_uid}/{tail}" + (f"/{self.helper}" if self.helper else "")
        elif self.kind in (KIND_DOCKER, KIND_PODMAN):
            ident = f"{self.kind}/{self.container_id}" + (f"/{self.helper}" if self.helper else "")
        elif self.kind == KIND_SLURM:
            ident = f"slurm/{self.slurm_job}/{self.slurm_step or '-'}"
        else:
            return f"{user}{self.kind}/{path}"
        return f"{user}{ident}@{path}"

    @property
    def memory_path(self) -> str | None:
        """The group's path in the hierarchy that holds the memory controller where there is one (v1
        memory's line, else the unified one's)."""
        return self.cgroup.v1_memory if self.cgroup.v1_memory is not None else self.cgroup.v2


def path_id(path: str | None) -> str:
    """A cgroup path as part of a key: the path itself where it is printable and at most
    ``KEY_PATH_CHARS`` long, else its printable head, "…#" and a digest of the whole path, so two
    paths never share a key and a key stays short."""
    if path is None:
        return "n/a"
    if len(path) <= KEY_PATH_CHARS and path.isprintable() and "…#" not in path:
        return path
    digest = hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:DIGEST_CHARS]
    return f"{printable(path, 48)}…#{digest}"


def short_id(container_id: str) -> str:
    return container_id[:SHORT_ID_CHARS]


def bounded_path(path: str | None, max_chars: int = PATH_MAX_CHARS) -> str:
    """A cgroup path for display: printable; when too long, "…" and its tail (the leaf names it)."""
    s = printable(path, 1 << 20)
    return s if len(s) <= max_chars else "…" + s[-(max_chars - 1):]


def parse_proc_cgroup(text: str) -> tuple[str | None, str | None, list[str]]:
    """(v2 path, v1 memory path, other v1 paths with name=systemd first) of /proc/PID/cgroup text.

    A hierarchy id listed twice, or more than ``MAX_LINES`` lines, means a cgroup name with a line
    break in it (a delegated cgroup's owner can make one) forged the text: nothing is returned, so
    a process cannot pass itself off as another group."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        return None, None, []
    v2 = v1_mem = None
    systemd: list[str] = []
    others: list[str] = []
    seen: set[str] = set()
    for line in lines:
        if not line:
            continue
        parts = line.split(":", 2)
        if len(parts) != 3 or not parts[0].isdigit() or not parts[2].startswith("/"):
            return None, None, []
        hier, controllers, path = parts
        if hier in seen:
            return None, None, []
        seen.add(hier)
        names = controllers.split(",") if controllers else []
        if hier == "0" and not controllers:
            v2 = path
        elif "memory" in names:
            v1_mem = path
        elif "name=systemd" in names:
            systemd.append(path)
        else:
            others.append(path)
    return v2, v1_mem, systemd + others


@dataclass(frozen=True)
class _Found:
    """What one path says: the owner's fields, and how many of its components make the group."""

    kind: str
    depth: int                      # the group path is the first ``depth`` components
    fields: tuple                   # (name, value) pairs for Owner


def _components(path: str) -> list[str]:
    return [c for c in path.split("/") if c]


def _pod_uid(raw: str, underscores: bool) -> str | None:
    uid = raw.replace("_", "-") if underscores else raw
    return uid if _UUID.match(uid) or _HEX32.match(uid) else None


def _container_component(comp: str, cgroupfs_parent_is_pod: bool) -> tuple | None:
    """(runtime or None, id, helper or None) of a container's cgroup component; a component that
    claims a runtime with a bad id gives ("bad",)."""
    m = _SCOPE.match(comp)
    if m:
        cid = m.group(3)
        if not _HEX64.match(cid):
            return ("bad",)
        return _RUNTIMES[m.group(1)], cid, "conmon" if m.group(2) else None
    m = _CRIO_CGROUPFS.match(comp)
    if m and cgroupfs_parent_is_pod:
        return (("cri-o", m.group(2), "conmon" if m.group(1) else None) if _HEX64.match(m.group(2))
                else ("bad",))
    if cgroupfs_parent_is_pod and _HEX64.match(comp):
        return None, comp, None
    return None


def _find_pod(comps: list[str]) -> _Found | None:
    for i, comp in enumerate(comps):
        uid, qos = None, None
        m = _POD_SLICE.match(comp)
        cgroupfs = False
        if m:
            uid = _pod_uid(m.group(2), underscores=True)
            qos = m.group(1) or "guaranteed"
        elif comp.startswith("pod") and "kubepods" in comps[:i]:
            uid = _pod_uid(comp[3:], underscores=False)
            prev = comps[i - 1]
            qos = prev if prev in _QOS_DIRS else "guaranteed"
            cgroupfs = True
        else:
            continue
        if uid is None:
            return _Found("bad", 0, ())
        fields = [("pod_uid", uid), ("qos", qos)]
        if i + 1 < len(comps):
            found = _container_component(comps[i + 1], cgroupfs)
            if found == ("bad",):
                return _Found("bad", 0, ())
            if found:
                runtime, cid, helper = found
                fields += [("container_id", cid), ("runtime", runtime), ("helper", helper)]
                return _Found(KIND_POD, i + 2, tuple(fields))
        return _Found(KIND_POD, i + 1, tuple(fields))
    return None


def _find_container(comps: list[str]) -> _Found | None:
    """Docker and Podman outside Kubernetes: the deepest container component wins (a container's
    own sub-cgroups sit below it)."""
    for i in range(len(comps) - 1, -1, -1):
        comp = comps[i]
        found = _container_component(comp, False)
        runtime = None
        if found == ("bad",):
            return _Found("bad", 0, ())
        if found:
            runtime, cid, helper = found
        elif i > 0 and comps[i - 1] == "docker" and _HEX64.match(comp):
            runtime, cid, helper = "docker", comp, None
        else:
            m = _LIBPOD_CGROUPFS.match(comp)
            if not m:
                continue
            if not _HEX64.match(m.group(2)):
                return _Found("bad", 0, ())
            runtime, cid, helper = "podman", m.group(2), "conmon" if m.group(1) else None
        if runtime not in ("docker", "podman"):
            continue  # a containerd or CRI-O scope outside any pod: its systemd unit speaks for it
        fields = [("container_id", cid), ("runtime", runtime), ("helper", helper)]
        if runtime == "podman":
            for c in comps[:i]:
                pm = _PODMAN_POD_SLICE.match(c)
                if pm and _HEX64.match(pm.group(1)):
                    fields.append(("podman_pod_id", pm.group(1)))
        uid = _user_uid(comps[:i])
        if uid is not None:
            fields.append(("user_uid", uid))
        return _Found(KIND_DOCKER if runtime == "docker" else KIND_PODMAN, i + 1, tuple(fields))
    return None


def _find_slurm(comps: list[str]) -> _Found | None:
    for i, comp in enumerate(comps):
        if not (comp == "slurm" or comp.startswith("slurm_") or comp == "slurmstepd.scope"
                or comp.endswith("_slurmstepd.scope")):
            continue
        rest = comps[i + 1:]
        uid = None
        j = i + 1
        if rest and rest[0].startswith("uid_"):
            if not _NUM.match(rest[0][4:]):
                return _Found("bad", 0, ())
            uid = int(rest[0][4:])
            j += 1
        if j >= len(comps) or not comps[j].startswith("job_"):
            return None  # slurmd's own cgroup, no job
        if not _NUM.match(comps[j][4:]):
            return _Found("bad", 0, ())
        fields: list[tuple[str, object]] = [("slurm_job", int(comps[j][4:])), ("user_uid", uid)]
        depth = j + 1
        if depth < len(comps) and comps[depth].startswith("step_"):
            step = comps[depth][5:]
            if not _STEP.match(step):
                return _Found("bad", 0, ())
            fields.append(("slurm_step", step))
            depth += 1
        return _Found(KIND_SLURM, depth, tuple(fields))
    return None


def _user_uid(comps: list[str]) -> int | None:
    for comp in reversed(comps):
        m = _USER_SERVICE.match(comp) or _USER_SLICE.match(comp)
        if m:
            return int(m.group(1))
    return None


def _find_unit(comps: list[str]) -> _Found | None:
    for i in range(len(comps) - 1, -1, -1):
        comp = comps[i]
        if not comp.endswith((".service", ".scope")):
            continue
        if not _UNIT.match(comp):
            return _Found("bad", 0, ())
        fields: list[tuple[str, object]] = [("unit", comp)]
        uid = _user_uid(comps[:i + 1])
        if uid is not None:
            fields.append(("user_uid", uid))
        return _Found(KIND_SYSTEMD, i + 1, tuple(fields))
    return None


def classify_path(path: str) -> _Found | None:
    """What one cgroup path names: a _Found, or None for none of the kinds (a plain path). A path
    whose claimed id fails its check gives a _Found of kind "bad"."""
    if len(path) <= 1:
        return None  # the root: a kernel thread, or a process outside any group
    comps = _components(path)
    lead = 0
    while lead < len(comps) and comps[lead] == "..":
        lead += 1
    comps = comps[lead:]
    if ".." in comps or "." in comps:
        return _Found("bad", 0, ())  # the kernel writes ".." only before the path (another namespace)
    for finder in (_find_pod, _find_slurm, _find_container, _find_unit):
        found = finder(comps)
        if found is not None:
            uid = _delegating_user(comps[:found.depth])
            if uid is not None and found.kind != "bad":
                return _Found(found.kind, found.depth, found.fields + (("delegated_uid", uid),))
            return found
    return None


def _delegating_user(comps: list[str]) -> int | None:
    """The uid of the outermost ``user@UID.service`` among ``comps`` (the group's path): systemd
    hands that subtree to the user, who may name cgroups below it as they like."""
    for comp in comps:
        m = _USER_SERVICE.match(comp)
        if m:
            return int(m.group(1))
    return None


def _cut(path: str | None, found: _Found | None) -> str | None:
    """``path`` cut after its ``found.depth``-th owner component (``..`` kept, not counted)."""
    if path is None or found is None or found.kind == "bad":
        return path
    out, n = [], 0
    for c in _components(path):
        out.append(c)
        if c != "..":
            n += 1
            if n == found.depth:
                break
    return "/" + "/".join(out)


def _display(kind: str, f: dict, path: str | None) -> str:
    delegated = f.get("delegated_uid")
    if kind == KIND_POD:
        s = f"pod {f['pod_uid'][:8]}"
        if f.get("container_id"):
            s += f"/{short_id(f['container_id'])}"
    elif kind in (KIND_DOCKER, KIND_PODMAN):
        s = f"{kind} {short_id(f['container_id'])}"
    elif kind == KIND_SLURM:
        s = f"job {f['slurm_job']}" + (f".{f['slurm_step']}" if f.get("slurm_step") else "")
    elif kind == KIND_SYSTEMD:
        s = printable(f["unit"], DISPLAY_MAX_CHARS)
        if f.get("user_uid") is not None and delegated is None:
            s = f"{s} (uid {f['user_uid']})"
    else:
        return bounded_path(path, DISPLAY_MAX_CHARS) if path is not None else "n/a"
    if f.get("helper"):
        s += f" ({f['helper']})"
    if delegated is not None:
        s = f"user {delegated}: {s}"
    return printable(s, DISPLAY_MAX_CHARS)


_OWNER_FIELDS = ("pod_uid", "qos", "container_id", "runtime", "podman_pod_id", "helper", "slurm_job",
                 "slurm_step", "unit", "user_uid")


def delegated(owner: Owner, uid: int) -> Owner:
    """``owner`` as the word of user ``uid``, who owns a directory on its path (``delegation.py``):
    shown as that user's, with a key of its own. An owner already delegated, or with no cgroup line,
    is returned as it is."""
    if owner.delegated_uid is not None or owner.kind == KIND_UNKNOWN:
        return owner
    fields = {k: getattr(owner, k) for k in _OWNER_FIELDS}
    fields["delegated_uid"] = uid
    return dataclasses.replace(owner, delegated_uid=uid,
                               display=_display(owner.kind, fields, owner.memory_path))


def owner_of(text: str) -> Owner:
    """The ``Owner`` of a process from its /proc/PID/cgroup text (never raises)."""
    v2, v1_mem, others = parse_proc_cgroup(text if isinstance(text, str) else "")
    if v2 is None and v1_mem is None and not others:
        return Owner(KIND_UNKNOWN, "n/a", CgroupPaths())
    found_by_path: dict[str, _Found | None] = {}

    def classified(path: str) -> _Found | None:
        if path not in found_by_path:  # the v1 lines of a host mostly repeat one path
            found_by_path[path] = classify_path(path)
        return found_by_path[path]

    chosen: _Found | None = None
    for path in [p for p in (v1_mem, v2) if p is not None] + others:
        found = classified(path)
        if found is not None and found.kind != "bad":
            chosen = found
            break
        if found is not None:  # a forged or unknown id: trust no other line either
            chosen = None
            break
    own = CgroupPaths(v2, v1_mem)
    if chosen is None:
        plain = v1_mem if v1_mem is not None else v2 if v2 is not None else others[0]
        return Owner(KIND_CGROUP, bounded_path(plain, DISPLAY_MAX_CHARS), own, process_cgroup=own)
    fields = dict(chosen.fields)
    paths = []
    for group_path in (v2, v1_mem):
        found = classified(group_path) if group_path is not None else None
        same = found is not None and found.kind == chosen.kind and found.fields == chosen.fields
        paths.append(_cut(group_path, found) if same else group_path)
    return Owner(chosen.kind, _display(chosen.kind, fields, None), CgroupPaths(*paths),
                 process_cgroup=own, **{k: v for k, v in fields.items() if v is not None})


def owner_of_path(path: str, v1_memory: bool) -> Owner:
    """The owner a process in cgroup ``path`` of the memory hierarchy (v1's when ``v1_memory``, else
    the unified one) would have: a cgroup the kernel names in its log, whose processes may be gone.
    A path with a line break (a cgroup name can hold one) is a plain path, never a second line."""
    if not path.startswith("/") or any(c in path for c in "\n\r\0"):
        return Owner(KIND_CGROUP, bounded_path(path, DISPLAY_MAX_CHARS),
                     CgroupPaths(None, path) if v1_memory else CgroupPaths(path, None))
    return owner_of(f"1:memory:{path}\n" if v1_memory else f"0::{path}\n")
