"""Names for a group's ids, where the node has them: a pod's name and namespace, a container's name.

Sources, cheapest first (paths under the reader's ``root``):

1. **The kubelet's log links**, ``/var/log/containers/<pod>_<namespace>_<container>-<id>.log``:
   one directory listing names every running container of every pod on the node, whatever the
   runtime (containerd, CRI-O, cri-dockerd). Only the entries' *names* are read: the links are
   never followed and no file is opened. Pod and container names cannot hold ``_`` (DNS names), so
   the split is exact; an entry that is not a valid DNS name is skipped. The listing is kept and
   read again only when an id is missing from it and ``LISTING_RECHECK_S`` has passed. The same
   for ``/var/log/pods/<namespace>_<pod>_<uid>/``, which names a pod from its UID when no
   container id is known (a process in the pod's own cgroup, a runtime's monitor).
   Limits: the kubelet makes the link when it creates the container, so a container seconds old
   may not be listed yet; a node whose kubelet writes logs elsewhere has none; the kubelet cuts a
   file name at 255 bytes, which can cut the id of a pod with very long names (then source 2).
2. **The runtime's state file**, read once per container id and kept (names do not change):
   containerd ``/run/containerd/io.containerd.runtime.v2.task/k8s.io/<id>/config.json`` (the OCI
   spec; annotations ``io.kubernetes.cri.sandbox-name``, ``...sandbox-namespace``,
   ``...container-name``, ``...sandbox-uid``), CRI-O
   ``/run/containers/storage/overlay-containers/<id>/userdata/config.json`` (``io.kubernetes.pod.name``,
   ``io.kubernetes.pod.namespace``, ``io.kubernetes.container.name``, ``io.kubernetes.pod.uid``),
   Docker ``/var/lib/docker/containers/<id>/config.v2.json`` (``Name``; a cri-dockerd container's
   ``k8s_<container>_<pod>_<namespace>_<uid>_<n>``). A spec whose pod UID differs from the one the
   cgroup names is not used. Limits: ~10-100 KiB of JSON per container, once; the paths are the
   runtimes' defaults (a changed ``state``/``runroot``/``data-root`` hides them).
3. Otherwise the id: ``Names()`` with nothing set.

A group in a delegated subtree (``Owner.delegated_uid``) gets no names at all: its path's claim to
a pod or container is its user's word, and the real pod's names would lend it that pod's face.

Not used: the kubelet's pod directories ``/var/lib/kubelet/pods/<uid>/`` hold neither the
namespace nor a map from container id to name (``containers/<name>/`` lists names only), and the
pod name in ``etc-hosts`` is the pod's hostname, which a spec can set to anything. Podman keeps
names in its database (BoltDB or SQLite): a Podman container shows its id. A Slurm job shows its
number: its name needs ``scontrol`` (a subprocess) or the job's environment (the job's own,
untrusted, text); neither is read.

Everything here is text a pod's author chose, read as root: files are read only below the
runtime's state directory with no link followed (``safe_read.read_beneath``), regular files only,
at most ``MAX_STATE_FILE_BYTES``; JSON nested past the parser's limit is refused; every name is
shown through ``printable``, at most ``NAME_MAX_CHARS``.
"""
from __future__ import annotations

import json
import os
import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from ...units import printable
from .ownership import KIND_DOCKER, KIND_POD, Owner
from .safe_read import list_beneath, read_beneath

NAME_MAX_CHARS = 64
MAX_STATE_FILE_BYTES = 256 << 10
MAX_LISTING_ENTRIES = 65_536     # pods x containers on one node: far above the kubelet's 110 pods
LISTING_RECHECK_S = 10.0
NEGATIVE_RECHECK_S = 30.0        # an id no source names is asked again after this
MAX_CACHED_IDS = 8192

CONTAINER_LOGS = ("var", "log", "containers")
POD_LOGS = ("var", "log", "pods")
CONTAINERD_TASKS = ("run", "containerd", "io.containerd.runtime.v2.task", "k8s.io")
CRIO_CONTAINERS = ("run", "containers", "storage", "overlay-containers")
DOCKER_CONTAINERS = ("var", "lib", "docker", "containers")

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}\Z)[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?\Z")
_POD_UID = re.compile(r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32})\Z")
_DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}\Z")

SOURCE_KUBELET_LOGS = "kubelet logs"
SOURCE_CONTAINERD = "containerd"
SOURCE_CRIO = "cri-o"
SOURCE_DOCKER = "docker"


@dataclass(frozen=True)
class Names:
    """What a group is called; each field printable and bounded, None where unknown."""

    pod_name: str | None = None
    namespace: str | None = None
    container_name: str | None = None
    source: str | None = None


NO_NAMES = Names()


def _text(value) -> str | None:
    return printable(value, NAME_MAX_CHARS) if isinstance(value, str) and value else None


def parse_container_log_name(entry: str) -> tuple[str, Names] | None:
    """(container id, names) of a /var/log/containers entry name, or None for any other name."""
    if not entry.endswith(".log"):
        return None
    stem = entry[:-4]
    head, dash, cid = stem.rpartition("-")
    if not dash or not _HEX64.match(cid):
        return None
    parts = head.split("_")
    if len(parts) != 3:
        return None
    pod, namespace, container = parts
    if not (_DNS_SUBDOMAIN.match(pod) and _DNS_LABEL.match(namespace) and _DNS_LABEL.match(container)):
        return None
    return cid, Names(_text(pod), _text(namespace), _text(container), SOURCE_KUBELET_LOGS)


def parse_pod_log_dir(entry: str) -> tuple[str, Names] | None:
    """(pod UID, names) of a /var/log/pods entry name ``<namespace>_<pod>_<uid>``, or None."""
    parts = entry.split("_")
    if len(parts) != 3:
        return None
    namespace, pod, uid = parts
    if not (_DNS_LABEL.match(namespace) and _DNS_SUBDOMAIN.match(pod) and _POD_UID.match(uid)):
        return None
    return uid, Names(_text(pod), _text(namespace), None, SOURCE_KUBELET_LOGS)


def _load_json(data: bytes | None) -> dict | None:
    if data is None:
        return None
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):  # bad UTF-8 and bad JSON are ValueErrors
        return None
    return doc if isinstance(doc, dict) else None


def names_from_oci_spec(data: bytes | None, pod_uid: str | None) -> Names | None:
    """Names in an OCI spec's annotations (containerd's or CRI-O's keys); None where it has none,
    or where it names another pod than ``pod_uid``."""
    doc = _load_json(data)
    ann = doc.get("annotations") if doc else None
    if not isinstance(ann, dict):
        return None
    for pod_k, ns_k, ctr_k, uid_k, source in (
            ("io.kubernetes.cri.sandbox-name", "io.kubernetes.cri.sandbox-namespace",
             "io.kubernetes.cri.container-name", "io.kubernetes.cri.sandbox-uid", SOURCE_CONTAINERD),
            ("io.kubernetes.pod.name", "io.kubernetes.pod.namespace",
             "io.kubernetes.container.name", "io.kubernetes.pod.uid", SOURCE_CRIO)):
        if pod_k not in ann and ctr_k not in ann:
            continue
        uid = ann.get(uid_k)
        if pod_uid is not None and isinstance(uid, str) and uid != pod_uid:
            return None
        names = Names(_text(ann.get(pod_k)), _text(ann.get(ns_k)), _text(ann.get(ctr_k)), source)
        return names if names.pod_name or names.container_name else None
    return None


def names_from_docker_config(data: bytes | None, pod_uid: str | None) -> Names | None:
    """A Docker container's name from its config.v2.json ``Name`` ("/name"); a cri-dockerd one's
    ``k8s_<container>_<pod>_<namespace>_<uid>_<attempt>`` gives the pod too."""
    doc = _load_json(data)
    name = doc.get("Name") if doc else None
    if not isinstance(name, str):
        return None
    name = name[1:] if name.startswith("/") else name
    parts = name.split("_")
    if len(parts) == 6 and parts[0] == "k8s":
        _, container, pod, namespace, uid, _attempt = parts
        if pod_uid is not None and uid != pod_uid:
            return None
        return Names(_text(pod), _text(namespace), _text(container), SOURCE_DOCKER)
    if not _DOCKER_NAME.match(name):
        return None
    return Names(None, None, _text(name), SOURCE_DOCKER)


class _Listing:
    """A directory's entries parsed into {id: Names}, listed again on a miss at most every
    ``recheck_s``."""

    def __init__(self, base: str, parse: Callable[[str], tuple[str, Names] | None],
                 recheck_s: float, clock: Callable[[], float]):
        self.base, self._parse, self.recheck_s, self._clock = base, parse, recheck_s, clock
        self._map: dict[str, Names] = {}
        self._listed_at: float | None = None
        self.listings = 0

    def get(self, key: str) -> Names | None:
        found = self._map.get(key)
        if found is not None:
            return found
        now = self._clock()
        if self._listed_at is not None and now - self._listed_at < self.recheck_s:
            return None
        self._listed_at = now
        self.listings += 1
        entries, _why = list_beneath(self.base, [], MAX_LISTING_ENTRIES)
        fresh: dict[str, Names] = {}
        for entry in entries or ():
            parsed = self._parse(entry)
            if parsed is not None:
                fresh[parsed[0]] = parsed[1]
        self._map = fresh
        return fresh.get(key)


class NameResolver:
    """``names(owner)``: what the node calls an owner's pod and container (``NO_NAMES`` where
    nothing does). ``root`` prefixes every path."""

    def __init__(self, root: str = "/", clock: Callable[[], float] = time.monotonic,
                 listing_recheck_s: float = LISTING_RECHECK_S,
                 negative_recheck_s: float = NEGATIVE_RECHECK_S):
        self.root = root
        self._clock = clock
        self.negative_recheck_s = negative_recheck_s
        self.containers = _Listing(self._path(CONTAINER_LOGS), parse_container_log_name,
                                   listing_recheck_s, clock)
        self.pods = _Listing(self._path(POD_LOGS), parse_pod_log_dir, listing_recheck_s, clock)
        # container id -> (asked at, Names or None): state files are read once per id
        self._by_id: OrderedDict[str, tuple[float, Names | None]] = OrderedDict()
        self.state_reads = 0

    def _path(self, parts: tuple) -> str:
        return os.path.join(self.root, *parts)

    def _state(self, owner: Owner, cid: str) -> Names | None:
        """The names the runtime's state files give container ``cid`` of ``owner`` (cached)."""
        now = self._clock()
        cached = self._by_id.get(cid)
        if cached is not None and (cached[1] is not None or now - cached[0] < self.negative_recheck_s):
            self._by_id.move_to_end(cid)
            return cached[1]
        found = None
        for source in self._sources(owner):
            found = self._read_state(source, cid, owner.pod_uid)
            if found is not None:
                break
        self._by_id[cid] = (now, found)
        self._by_id.move_to_end(cid)
        while len(self._by_id) > MAX_CACHED_IDS:
            self._by_id.popitem(last=False)
        return found

    @staticmethod
    def _sources(owner: Owner) -> tuple[str, ...]:
        if owner.kind == KIND_DOCKER or owner.runtime == "docker":
            return (SOURCE_DOCKER,)
        if owner.runtime == "containerd":
            return (SOURCE_CONTAINERD,)
        if owner.runtime == "cri-o":
            return (SOURCE_CRIO,)
        return (SOURCE_CONTAINERD, SOURCE_CRIO, SOURCE_DOCKER)  # cgroupfs driver: runtime unknown

    def _read_state(self, source: str, cid: str, pod_uid: str | None) -> Names | None:
        self.state_reads += 1
        if source == SOURCE_CONTAINERD:
            got = read_beneath(self._path(CONTAINERD_TASKS), [cid, "config.json"], MAX_STATE_FILE_BYTES)
            return names_from_oci_spec(got.data, pod_uid)
        if source == SOURCE_CRIO:
            got = read_beneath(self._path(CRIO_CONTAINERS), [cid, "userdata", "config.json"],
                               MAX_STATE_FILE_BYTES)
            return names_from_oci_spec(got.data, pod_uid)
        got = read_beneath(self._path(DOCKER_CONTAINERS), [cid, "config.v2.json"], MAX_STATE_FILE_BYTES)
        return names_from_docker_config(got.data, pod_uid)

    def names(self, owner: Owner) -> Names:
        if owner.delegated_uid is not None:
            # A user's own cgroup named after a pod or container: the node's records of that pod or
            # container are not this group's, and lending their names would make it pass for it.
            return NO_NAMES
        if owner.kind == KIND_POD:
            if owner.container_id and not owner.helper:
                found = self.containers.get(owner.container_id) or self._state(owner, owner.container_id)
                if found is not None:
                    return found
            if owner.pod_uid:
                found = self.pods.get(owner.pod_uid)
                if found is not None:
                    return found
            return NO_NAMES
        if owner.kind == KIND_DOCKER and owner.container_id and not owner.helper:
            return self._state(owner, owner.container_id) or NO_NAMES
        return NO_NAMES
