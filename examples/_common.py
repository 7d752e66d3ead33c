"""Shared bits of the example programs: the command line (``--seconds``) and a paced loop."""
import argparse
import time


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--seconds", type=float, default=5.0, help="how long to run (default 5)")
    p.add_argument("--torch", action="store_true", help="use PyTorch instead of CuPy where the example has both")
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
