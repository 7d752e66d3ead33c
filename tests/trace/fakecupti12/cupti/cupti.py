"""The stand-in for ``cupti.cupti`` with cupti-python 12.8's names (see ../../fakecupti/cupti/cupti.py)."""
import os

MAJOR = 12
_IMPL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "fakecupti", "cupti", "cupti.py")
with open(_IMPL) as _f:
    exec(compile(_f.read(), _IMPL, "exec"))
