#!/usr/bin/env bash
# Evidence run on the H200 test machine: GPU tests, check during a transfer, probes, the demo recording.
# Usage: bash bench/h200_evidence.sh OUTDIR
set -u
out=${1:?outdir}; mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
python3 -m pytest -q -p no:cacheprovider tests/gpu tests/collect/test_procmaps.py 2>&1 | tail -15 > "$out/gpu_tests.txt"; cat "$out/gpu_tests.txt"
# check --json while a known pinned H2D load runs
python3 bench/transfer_load.py 6 --json "$out/load_h2d.json" > /dev/null & lp=$!
sleep 2.5; t0=$(date +%s.%N)
/usr/bin/time -v python3 -m pinmon check --json --window 2 > "$out/check_during_h2d.json" 2> "$out/check_time.txt"; echo "check rc=$?"
wait $lp
python3 - "$out" <<'PY'
import json,sys
d=json.load(open(sys.argv[1]+"/check_during_h2d.json")); g=d["snapshot"]["gpus"][0]
print("check:", d["status"], g["name"], g["link"], "rx", g["pcie"]["rx_bytes_per_s"]/1e9, "GB/s", g["pcie"]["method"])
print("load:", json.load(open(sys.argv[1]+"/load_h2d.json"))["bytes_per_s"]/1e9)
PY
grep -E "Elapsed|Maximum resident|User time|System time" "$out/check_time.txt"
# probes
( time python3 -m pinmon check --probe --json --window 0.5 > "$out/check_probe.json" ) 2>&1 | grep real
python3 - "$out" <<'PY'
import json,sys,time
sys.path.insert(0, "bench")
from provenance import provenance
from pinmon.probe import run_probe
res={"provenance": provenance()}
for k in ("quick","sweep","alloc","modes"):
    t=time.time(); r=run_probe(k, gpu_index=0, link_theoretical_bytes_per_s=63.0e9); res[k]=r.to_dict()
    print(k, r.status, r.reason, f"{time.time()-t:.1f}s", len(r.measurements))
json.dump(res, open(sys.argv[1]+"/probe_all.json","w"), indent=1)
PY
python3 bench/record_demo.py "$out/demo.jsonl.gz" 2>&1 | tail -5
