"""What NVML offers on this machine: each GPU's link, every ``NVML_FI_DEV_PCIE_*`` field value (whether
it answers), and the CPU and wall time of one read of the two PCIe byte counters.

    python3 bench/research/nvml_facts.py OUT.json
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from provenance import provenance

READS = 200


def facts() -> dict:
    import pynvml as p

    p.nvmlInit()
    try:
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
            t0, w0 = time.process_time(), time.perf_counter()
            for _ in range(READS):
                p.nvmlDeviceGetFieldValues(h, [p.NVML_FI_DEV_PCIE_COUNT_RX_BYTES, p.NVML_FI_DEV_PCIE_COUNT_TX_BYTES])
            g["fv2_cpu_s_per_call"] = (time.process_time() - t0) / READS
            g["fv2_wall_s_per_call"] = (time.perf_counter() - w0) / READS
            out["gpus"].append(g)
        return out
    finally:
        p.nvmlShutdown()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the JSON result to write")
    a = ap.parse_args()
    out = facts()
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out)[:3000])


if __name__ == "__main__":
    main()
