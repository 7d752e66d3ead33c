"""Installs pinmon's tracer at interpreter start-up; ``pinmon trace`` puts this directory on PYTHONPATH.

It then hands over to the ``sitecustomize`` it shadows, if the environment has one, so the traced
program starts exactly as it would have.
"""
import os
import sys


def _pinmon_trace_bootstrap():
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("PINMON_TRACE", "1") != "0":
        # pinmon's own directory goes on sys.path only while pinmon.trace is imported: putting
        # pinmon's site-packages on PYTHONPATH would hand the program that environment's packages.
        pkg_dir = os.environ.get("PINMON_TRACE_PKG_DIR")
        added = bool(pkg_dir) and pkg_dir not in sys.path
        if added:
            sys.path.insert(0, pkg_dir)
        try:
            import pinmon.trace

            pinmon.trace.install()
        except Exception:
            pass  # never stop the program from starting
        finally:
            if added:
                try:
                    sys.path.remove(pkg_dir)
                except ValueError:
                    pass
    # Chain to the sitecustomize this one shadows.
    saved = list(sys.path)
    me = sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        import importlib

        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    except Exception:
        import traceback

        traceback.print_exc()  # what Python itself does with a failing sitecustomize
    finally:
        sys.path[:] = saved + [p for p in sys.path if p not in saved]
        # The import system pops this module's name from sys.modules when our exec ends.
        if me is not None:
            sys.modules["sitecustomize"] = me


_pinmon_trace_bootstrap()
