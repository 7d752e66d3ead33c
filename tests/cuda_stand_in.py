"""Stand-in CUDA processes for tests on a box without a GPU.

pinmon takes a tracer's report only for a CUDA process, one that maps a real NVIDIA device
(``collect/traced/join.py``), which no process can do without the driver. Tests of what a report puts
in a row (the CuPy stand-in's programs, this test process itself) name the pids to treat as CUDA
processes here, in test code only: the collector itself has no switch for it.

- in a test: ``treat_as_cuda(monkeypatch, pids)``;
- for a ``pinmon`` command run as its own process: ``[sys.executable, "-m", "tests.cuda_stand_in",
  "PID[,PID...]", *pinmon_arguments]`` from the repository's root.
"""
from __future__ import annotations

import sys
from collections.abc import Collection


def _patch(set_attr, pids: Collection[int]) -> None:
    import pinmon.collect.live as live

    real = live.join_reports
    extra = frozenset(pids)

    def join(rows, traced, cuda_pids, *args, **kwargs):
        return real(rows, traced, set(cuda_pids) | extra, *args, **kwargs)

    set_attr(live, "join_reports", join)


def treat_as_cuda(monkeypatch, pids: Collection[int]) -> None:
    """The live collector takes the reports of ``pids`` as if they mapped an NVIDIA device."""
    _patch(monkeypatch.setattr, pids)


def main(argv: list[str]) -> int:
    _patch(setattr, {int(p) for p in argv[0].split(",") if p})
    from pinmon.cli import main as pinmon_main

    return pinmon_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
