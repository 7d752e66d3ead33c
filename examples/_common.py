"""Shared bits of the example programs: the command line (``--seconds``, and ``--torch`` where an
example has a PyTorch variant), a paced loop, and ``run``: one line, not a traceback, where the
example's library (CuPy, PyTorch) is not installed or there is no GPU to run on."""
import argparse
import os
import sys
import time

# Exit code of an example that could not run: no CuPy or PyTorch, no driver, no GPU.
EXIT_NO_GPU = 3


def parser(description: str, torch_variant: bool = False) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--seconds", type=float, default=5.0, help="how long to run (default 5)")
    if torch_variant:
        p.add_argument("--torch", action="store_true", help="use PyTorch instead of CuPy")
    return p


def for_seconds(seconds: float, per_s: float = 0.0):
    """Yields loop counts for ``seconds``; at most ``per_s`` iterations a second when given."""
    start = time.monotonic()
    i = 0
    while time.monotonic() - start < seconds:
        yield i
        i += 1
        if per_s > 0:
            delay = start + i / per_s - time.monotonic()
            if delay > 0:
                time.sleep(delay)


# The libraries the examples use, as their users know them.
LIBRARIES = {"cupy": "CuPy", "cupyx": "CuPy", "torch": "PyTorch"}


def _missing_library(e: BaseException):
    """The library (``CuPy``, ``PyTorch``) that ``e`` says is not installed at all, or None (one that is
    installed but fails to load is a CUDA problem: ``_no_gpu``)."""
    if isinstance(e, ModuleNotFoundError) and e.name in LIBRARIES:
        return LIBRARIES[e.name]
    return None


def _no_gpu(e: BaseException) -> bool:
    """Whether ``e`` says there is no CUDA to run on (CuPy's runtime or driver errors, PyTorch's)."""
    if isinstance(e, ImportError):  # installed, but its CUDA libraries do not load
        return e.name is not None and e.name.split(".")[0] in LIBRARIES
    module = type(e).__module__ or ""
    if module.startswith(("cupy", "cupy_backends")):
        return True
    text = str(e)
    return isinstance(e, (RuntimeError, AssertionError)) and ("CUDA" in text or "NVIDIA" in text)


def run(main) -> None:
    """Runs ``main()`` and exits with its code; without its library or a usable GPU, one line on stderr
    and exit 3."""
    try:
        code = main()
    except Exception as e:
        name = os.path.basename(sys.argv[0])
        library = _missing_library(e)
        if library is not None:
            print(f"{name}: cannot run: {library} is not installed ({e})", file=sys.stderr)
            sys.exit(EXIT_NO_GPU)
        if not _no_gpu(e):
            raise
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        print(f"{name}: cannot run without CUDA ({type(e).__name__}: {first})", file=sys.stderr)
        sys.exit(EXIT_NO_GPU)
    sys.exit(code or 0)
