"""Print what NVML offers on this machine: link, field values, timings. Writes JSON to argv[1]."""
import json
import os
import sys
import time

import pynvml as p

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from provenance import provenance  # noqa: E402

p.nvmlInit()
out = {"provenance": provenance(), "driver": p.nvmlSystemGetDriverVersion(), "gpus": []}
fields = [n for n in dir(p) if n.startswith("NVML_FI_DEV_PCIE")]
for i in range(p.nvmlDeviceGetCount()):
    h = p.nvmlDeviceGetHandleByIndex(i)
    g = {"name": p.nvmlDeviceGetName(h), "uuid": p.nvmlDeviceGetUUID(h),
         "bus": p.nvmlDeviceGetPciInfo(h).busId,
         "gen": p.nvmlDeviceGetCurrPcieLinkGeneration(h), "gen_max": p.nvmlDeviceGetMaxPcieLinkGeneration(h),
         "width": p.nvmlDeviceGetCurrPcieLinkWidth(h), "width_max": p.nvmlDeviceGetMaxPcieLinkWidth(h),
         "fields": {}}
    try:
        g["gpu_gen_max"] = p.nvmlDeviceGetGpuMaxPcieLinkGeneration(h)
    except p.NVMLError as e:
        g["gpu_gen_max"] = str(e)
    vals = p.nvmlDeviceGetFieldValues(h, [getattr(p, f) for f in fields])
    for f, v in zip(fields, vals):
        g["fields"][f] = {"ret": v.nvmlReturn, "type": v.valueType, "ull": v.value.ullVal}
    t0 = time.process_time(); w0 = time.perf_counter()
    for _ in range(200):
        p.nvmlDeviceGetFieldValues(h, [p.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, p.NVML_FI_DEV_PCIE_COUNT_TX_BYTES])
    g["fv2_cpu_s_per_call"] = (time.process_time() - t0) / 200
    g["fv2_wall_s_per_call"] = (time.perf_counter() - w0) / 200
    out["gpus"].append(g)
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(json.dumps(out)[:3000])
