"""Containers, pods and jobs: who owns each process, and the memory limit the OOM killer enforces
on it. Textual-free; the collector calls it.

- ``ownership``: /proc/PID/cgroup text -> ``Owner`` (pod and container, Docker, Podman, Slurm job
  and step, systemd unit, or the plain path), ids validated; pure.
- ``proc_owner``: reading that file per pid, kept while the pid's cgroup cannot have changed.
- ``mounts``: where the memory controller's hierarchy is mounted (v1, v2, hybrid).
- ``limits``: a group's tightest limit, usage and OOM kills, each cgroup read once per snapshot.
- ``names``: pod, namespace and container names from the kubelet's log links and the runtimes'
  state files, read as untrusted text.
- ``safe_read``: reading files others control: no links below a trusted directory, regular files
  only, a size bound, never an exception.
- ``vmpin``: ``VmPin`` of /proc/PID/status (io_uring and RDMA pins), pure.
"""
