"""Where a bench result came from: the commit, the package versions, the driver and the GPUs, Python.

Every bench script that writes a result JSON puts ``provenance()`` under the key ``"provenance"``, so a
figure can be traced to the code and the stack that produced it. Nothing here names one machine: no
host name, no path.

    python3 bench/provenance.py [TREE]          prints it as JSON (TREE: the checkout measured, default this one)
    python3 bench/provenance.py --line [TREE]   prints it as one line, for the header of a text result


- ``commit``: ``$PINMON_COMMIT`` where set (a copy of the tree, as on the GPU box, may carry a git
  history of its own whose HEAD is no commit of the project; dirty is then unknown), else ``git
  rev-parse HEAD`` of the tree measured; ``dirty``: whether tracked files differ from that commit
  (null unknown).
- ``versions``: pinmon (the measured tree's ``__version__``) and each installed distribution of
  ``DISTRIBUTIONS`` (importlib.metadata); one that is not installed is left out.
- ``driver``, ``cuda_driver``, ``gpus``: from NVML (``pynvml``) when it loads, else ``gpu_error`` says why.
- ``argv``: the command line of the script that wrote the result (``portable_argv``), which
  ``bench/manifest.py`` lists as the file's command.

``portable_argv`` is how a script records a command line it ran, without the machine's paths;
``portable_path`` and ``portable_text`` how it records a path (a loaded library, a module) or a log.
"""
from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The stack a pinmon figure depends on. CuPy ships under several distribution names.
DISTRIBUTIONS = ("textual", "rich", "cupy-cuda13x", "cupy-cuda12x", "cupy", "nvidia-ml-py", "psutil",
                 "prometheus-client", "numpy", "torch", "jax", "cupti-python", "cuda-bindings", "nvitop")


def _git(tree: str, *args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", tree, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None


def commit(tree: str = ROOT) -> tuple[str | None, bool | None]:
    """(commit, dirty) of ``tree``: ``$PINMON_COMMIT`` (dirty unknown) where set, else git's."""
    named = os.environ.get("PINMON_COMMIT")
    if named:
        return named, None
    head = _git(tree, "rev-parse", "HEAD")
    if head is not None and head.returncode == 0 and head.stdout.strip():
        status = _git(tree, "status", "--porcelain", "--untracked-files=no")
        dirty = None if status is None or status.returncode != 0 else bool(status.stdout.strip())
        return head.stdout.strip(), dirty
    return None, None


def pinmon_version(tree: str = ROOT) -> str | None:
    """The ``__version__`` in ``tree``'s pinmon package (read, not imported: the tree may not be on sys.path)."""
    try:
        with open(os.path.join(tree, "pinmon", "__init__.py"), encoding="utf-8") as f:
            m = re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", f.read(), re.M)
        return m.group(1) if m else None
    except OSError:
        return None


def versions(tree: str = ROOT) -> dict[str, str]:
    out = {"pinmon": pinmon_version(tree)}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {k: v for k, v in out.items() if v is not None}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml() -> dict:
    """Driver, CUDA driver version and each GPU's name from NVML; ``gpu_error`` where NVML is not there."""
    try:
        import pynvml
    except ImportError as e:
        return {"gpu_error": f"pynvml not importable: {e}"}
    try:
        pynvml.nvmlInit()
    except Exception as e:  # no driver, no GPU: the result says so, the bench still runs
        return {"gpu_error": f"{type(e).__name__}: {e}"}
    try:
        out: dict = {"driver": _text(pynvml.nvmlSystemGetDriverVersion())}
        try:
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
            out["cuda_driver"] = f"{cuda // 1000}.{cuda % 1000 // 10}"
        except Exception:
            pass
        out["gpus"] = [_text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)))
                       for i in range(pynvml.nvmlDeviceGetCount())]
        return out
    except Exception as e:
        return {"gpu_error": f"{type(e).__name__}: {e}"}
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def portable_argv(argv, tree: str = ROOT) -> list[str]:
    """``argv`` as a result records it: the interpreter and any absolute path outside ``tree``
    (``nvidia-smi``) cut to their file names, a path under ``tree`` made relative to it."""
    out = []
    for arg in argv:
        arg = str(arg)
        if os.path.isabs(arg):
            rel = os.path.relpath(arg, tree)
            inside = not rel.startswith(os.pardir) and arg != sys.executable
            arg = rel if inside else os.path.basename(arg)
        out.append(arg)
    return out


_ABS_PATH = re.compile(r"(?<![\w.:/~-])/(?:[\w.+@%~-]+/)*[\w.+@%~-]+")


def portable_path(path: str, tree: str = ROOT, tmp: str | None = None) -> str:
    """``path`` as a result records it, with no directory of the machine it ran on: relative to the
    checkout ``tree``, from ``site-packages/`` on for an installed package's file
    (``site-packages/nvidia/cu13/lib/libcupti.so.13``: which library loaded is the fact), relative to
    the temporary directory for what a script installed there (``cupti134/cupti/__init__.py``), a
    file of the machine's own folders (``/usr``, ``/opt``...) by its name; any other path
    (``/dev/nvidiactl``, ``/proc/...``) as it is."""
    import tempfile

    norm = os.path.normpath(path)
    for base in (tree, tmp or tempfile.gettempdir()):
        base = os.path.normpath(base)
        if base != os.sep and norm.startswith(base + os.sep):
            rel = os.path.relpath(norm, base)
            if base == os.path.normpath(tree):
                return rel
            m = re.search(r"(?:^|/)((?:site|dist)-packages/.*)$", rel)
            return m.group(1) if m else rel
    m = re.search(r"/((?:site|dist)-packages/.*)$", norm)
    if m:
        return m.group(1)
    # A file of the machine's own folders (a driver's /usr/local/nvidia/lib64/libcuda.so.580.159.04):
    # which file it was is the fact, where that machine keeps it is not.
    if re.match(r"/(?:work|root|home|opt|tmp|usr|srv|mnt|var)/", norm):
        return os.path.basename(norm)
    return path


def portable_text(text: str, tree: str = ROOT, tmp: str | None = None) -> str:
    """``text`` (a log, a dumped JSON document) with every absolute path through ``portable_path``."""
    return _ABS_PATH.sub(lambda m: portable_path(m.group(0), tree, tmp), text)


def provenance(tree: str = ROOT) -> dict:
    """Everything above in one dict, for a result's ``"provenance"`` key."""
    sha, dirty = commit(tree)
    return {"commit": sha, "dirty": dirty, "argv": portable_argv(sys.argv, tree), "versions": versions(tree),
            **nvml(), "python": platform.python_version(), "kernel": platform.release(),
            "machine": platform.machine(), "cpus": os.cpu_count()}


def line(prov: dict) -> str:
    """``prov`` as one line: ``commit C, GPU NAME, driver D, python P, NAME VERSION, ...`` (what
    ``bench/manifest.py`` reads back from the first line of a text result, after its command)."""
    parts = [f"commit {prov.get('commit')}"]
    parts += [f"GPU {name}" for name in prov.get("gpus", [])]
    if prov.get("driver"):
        parts.append(f"driver {prov['driver']}")
    parts.append(f"python {prov.get('python')}")
    parts += [f"{name} {ver}" for name, ver in prov.get("versions", {}).items()]
    return ", ".join(parts)


if __name__ == "__main__":
    args = sys.argv[1:]
    one_line = "--line" in args
    args = [a for a in args if a != "--line"]
    prov = provenance(os.path.abspath(args[0]) if args else ROOT)
    print(line(prov) if one_line else json.dumps(prov, indent=1))
