# Narrow stub of pynvml (nvidia-ml-py), for pinmon's type checking only: the functions pinmon calls
# (pinmon/collect/nvml/call.py NvmlFunction), the constants it reads and the structures those
# functions return, with nvidia-ml-py's own signatures. Anything else pynvml has is left out: mypy
# then reports its use as an error, so a new NVML call is added here first.
#
# tests/collect/nvml/test_stub.py checks this file against the installed nvidia-ml-py with mypy's
# stubtest (.ci/run installs the oldest and the newest that pyproject.toml allows), and that every
# name pinmon calls or reads by name is declared here.
#
# What the functions return is what this nvidia-ml-py returns; pinmon still checks every value
# (pinmon/collect/nvml/values.py), because older bindings, fakes and a failing driver answer
# otherwise (bytes for names, 2**64 - 1 for "not available").
import ctypes

# --- errors ----------------------------------------------------------------------------------------

class NVMLError(Exception):
    value: int
    def __new__(typ, value: int) -> NVMLError: ...

# --- structures --------------------------------------------------------------------------------------

class _PrintableStructure(ctypes.Structure): ...

class struct_c_nvmlDevice_t(ctypes.Structure): ...

# A device handle: POINTER(struct_c_nvmlDevice_t).
class c_nvmlDevice_t(ctypes._Pointer[struct_c_nvmlDevice_t]): ...

class nvmlPciInfo_t(_PrintableStructure):
    busId: str  # char[32], decoded by _PrintableStructure

class c_nvmlMemory_t(_PrintableStructure):
    total: int
    free: int
    used: int

class nvmlFriendlyObject:
    """A process of nvmlDeviceGetComputeRunningProcesses: attributes set from the C structure."""

    pid: int
    usedGpuMemory: int | None  # None where NVML cannot say (NVML_VALUE_NOT_AVAILABLE)
    def __init__(self, dictionary: dict[str, object]) -> None: ...

class c_nvmlValue_t(ctypes.Union):
    dVal: float
    uiVal: int
    ulVal: int
    ullVal: int
    sllVal: int
    siVal: int
    # usVal (NVML_VALUE_TYPE_UNSIGNED_SHORT) is newer than the oldest nvidia-ml-py pinmon allows.

class c_nvmlFieldValue_t(_PrintableStructure):
    fieldId: int
    scopeId: int
    timestamp: int
    latencyUsec: int
    valueType: int  # which member of ``value`` holds it (NVML_VALUE_TYPE_*)
    nvmlReturn: int
    value: c_nvmlValue_t

class c_nvmlGpmSupport_t(_PrintableStructure):
    version: int
    isSupportedDevice: int

class struct_c_nvmlGpmSample_t(ctypes.Structure): ...

# A GPM sample buffer: POINTER(struct_c_nvmlGpmSample_t).
class c_nvmlGpmSample_t(ctypes._Pointer[struct_c_nvmlGpmSample_t]): ...

class c_nvmlGpmMetric_t(_PrintableStructure):
    metricId: int
    nvmlReturn: int
    value: float

class c_nvmlGpmMetricsGet_t(_PrintableStructure):
    version: int
    numMetrics: int
    sample1: c_nvmlGpmSample_t
    sample2: c_nvmlGpmSample_t
    metrics: ctypes.Array[c_nvmlGpmMetric_t]

# --- constants ---------------------------------------------------------------------------------------

# nvmlDeviceGetFieldValues field ids (pinmon/collect/nvml/counters.py BYTE_FIELDS, ERROR_FIELDS).
NVML_FI_DEV_PCIE_COUNT_TX_BYTES: int
NVML_FI_DEV_PCIE_COUNT_RX_BYTES: int
NVML_FI_DEV_PCIE_REPLAY_COUNTER: int
NVML_FI_DEV_PCIE_L0_TO_RECOVERY_COUNTER: int
NVML_FI_DEV_PCIE_COUNT_NAKS_SENT: int
NVML_FI_DEV_PCIE_COUNT_NAKS_RECEIVED: int
NVML_FI_DEV_PCIE_COUNT_BAD_TLP: int
NVML_FI_DEV_PCIE_COUNT_BAD_DLLP: int
NVML_FI_DEV_PCIE_COUNT_RECEIVER_ERROR: int
NVML_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS: int
NVML_FI_DEV_PCIE_COUNT_NON_FATAL_ERROR: int
NVML_FI_DEV_PCIE_COUNT_FATAL_ERROR: int
NVML_FI_DEV_PCIE_COUNT_UNSUPPORTED_REQ: int
NVML_FI_DEV_PCIE_COUNT_LCRC_ERROR: int
NVML_FI_DEV_PCIE_COUNT_LANE_ERROR: int

# nvmlDeviceGetPcieThroughput counters (pinmon/collect/nvml/sampled.py).
NVML_PCIE_UTIL_TX_BYTES: int
NVML_PCIE_UTIL_RX_BYTES: int

# GPM (pinmon/collect/nvml/gpm.py).
NVML_GPM_METRICS_GET_VERSION: int
NVML_GPM_METRIC_PCIE_TX_PER_SEC: int
NVML_GPM_METRIC_PCIE_RX_PER_SEC: int

# --- functions (pinmon/collect/nvml/call.py NVML_FUNCTIONS) ------------------------------------------

def nvmlInit() -> None: ...
def nvmlShutdown() -> None: ...
def nvmlDeviceGetCount() -> int: ...
def nvmlDeviceGetHandleByIndex(index: int) -> c_nvmlDevice_t: ...
def nvmlDeviceGetName(handle: c_nvmlDevice_t) -> str: ...
def nvmlDeviceGetUUID(handle: c_nvmlDevice_t) -> str: ...
def nvmlDeviceGetPciInfo(handle: c_nvmlDevice_t) -> nvmlPciInfo_t: ...
def nvmlDeviceGetCpuAffinity(handle: c_nvmlDevice_t, cpuSetSize: int) -> ctypes.Array[ctypes.c_ulonglong]: ...
def nvmlDeviceGetNumaNodeId(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetCurrPcieLinkGeneration(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetMaxPcieLinkGeneration(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetCurrPcieLinkWidth(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetMaxPcieLinkWidth(handle: c_nvmlDevice_t) -> int: ...
def nvmlDeviceGetMemoryInfo(handle: c_nvmlDevice_t, version: int | None = None) -> c_nvmlMemory_t: ...
def nvmlDeviceGetComputeRunningProcesses(handle: c_nvmlDevice_t) -> list[nvmlFriendlyObject]: ...
def nvmlDeviceGetFieldValues(handle: c_nvmlDevice_t, fieldIds: list[int]) -> ctypes.Array[c_nvmlFieldValue_t]: ...
def nvmlDeviceGetPcieThroughput(device: c_nvmlDevice_t, counter: int) -> int: ...
def nvmlGpmQueryDeviceSupport(device: c_nvmlDevice_t) -> c_nvmlGpmSupport_t: ...
def nvmlGpmSampleAlloc() -> c_nvmlGpmSample_t: ...
def nvmlGpmSampleGet(device: c_nvmlDevice_t, gpmSample: c_nvmlGpmSample_t) -> c_nvmlGpmSample_t: ...
def nvmlGpmMetricsGet(metricsGet: c_nvmlGpmMetricsGet_t) -> c_nvmlGpmMetricsGet_t: ...
def nvmlGpmSampleFree(gpmSample: c_nvmlGpmSample_t) -> None: ...
