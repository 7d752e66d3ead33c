# Narrow stub of cuda.bindings.driver (cuda-bindings 12.8 and 13.0): the functions pinmon calls
# (pinmon/trace/engine_cupti.py _pci_bus_id), with cuda-bindings' own signatures. Every function returns
# a tuple: the CUresult first, then its outputs. Anything else the module has is left out: mypy then
# reports its use as an error, so a new call is added here first. tests/trace/test_cupti_types.py
# checks these names and parameters against the installed cuda-bindings where there is one.
from enum import IntEnum

class CUresult(IntEnum):
    CUDA_SUCCESS = 0

class CUdevice:
    def __int__(self) -> int: ...

def cuDeviceGet(ordinal: int) -> tuple[CUresult, CUdevice]: ...
def cuDeviceGetPCIBusId(length: int, dev: CUdevice) -> tuple[CUresult, bytes]: ...
