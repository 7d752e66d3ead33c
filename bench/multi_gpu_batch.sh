#!/usr/bin/env bash
# pinmon on a multi-GPU box in one run: what the box is, the live app and pinmon's per-GPU link bytes
# under one pinned H2D load per GPU (all at once, each its own rate and copy size), probe --gpu all,
# NUMA (probe --numa per node, a process with its pinned memory on the far node under pinmon check),
# a snapshot's cost with every GPU vs one, the app against nvitop in both orders, and the goals'
# pass/fail. Every file goes under OUTDIR, every command run is listed in OUTDIR/commands.txt, and a
# part that fails does not stop the others.
# Usage: bash bench/multi_gpu_batch.sh OUTDIR [PART...]
#   parts, in the default order (about 7-8 min in all): box load probe numa scale overhead summary
#   box ~15 s, load ~60 s, probe ~30 s, numa ~40 s, scale ~15 s, overhead ~4.5 min, summary ~1 s
set -u
out=${1:?usage: bash bench/multi_gpu_batch.sh OUTDIR [PART...]}; shift; mkdir -p "$out"
parts=${*:-box load probe numa scale overhead summary}
# CUDA numbers GPUs fastest first unless told otherwise; in PCI order its indices are nvidia-smi's and NVML's.
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUDA_DEVICE_ORDER=PCI_BUS_ID
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -d /tmp/site/textual ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
LOAD_S=${LOAD_S:-40}  # seconds of load; the accuracy window is this less ~1 s
part() { echo "== $1 ($(date +%T))"; }
# t LIMIT_S CMD...: CMD under a time limit, listed in commands.txt; says its exit code when not 0.
t() {
  local limit=$1; shift
  echo "$*" >> "$out/commands.txt"
  timeout -k 5 "$limit" "$@"; local rc=$?
  [ $rc -eq 0 ] || echo "   exit $rc: $*" | cut -c1-160 >&2
  return $rc
}
for p in $parts; do case $p in
box)
  part box
  nvidia-smi -L > "$out/nvidia_smi_L.txt" 2>&1; cat "$out/nvidia_smi_L.txt"
  nvidia-smi topo -m > "$out/topo_m.txt" 2>&1; cat "$out/topo_m.txt"
  nvidia-smi --query-gpu=index,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max \
    --format=csv > "$out/link_idle.csv" 2>&1; cat "$out/link_idle.csv"
  lscpu > "$out/lscpu.txt" 2>&1; grep -i -E "^CPU\(s\)|numa|socket" "$out/lscpu.txt"
  nproc > "$out/nproc.txt"; echo "nproc $(cat "$out/nproc.txt")"
  { command -v numactl >/dev/null && numactl --hardware; } > "$out/numactl_hardware.txt" 2>&1
  python3 -c "import nvitop; print('nvitop', nvitop.__version__)" 2>&1 | tail -1 > "$out/nvitop_version.txt"; cat "$out/nvitop_version.txt"
  python3 bench/provenance.py > "$out/provenance.json"
  t 90 python3 bench/multi_gpu.py facts "$out/box.json";;
load)
  # Loads start copying 8 s after launch (eight CUDA contexts) and run LOAD_S; pinmon's collector
  # watches from before they start to after they end; the app is photographed while all run.
  part load
  t $((LOAD_S + 60)) python3 bench/multi_load.py "$out/load.json" --seconds $LOAD_S --start-in 8 > "$out/load.txt" 2>&1 & lp=$!
  t $((LOAD_S + 60)) python3 bench/multi_gpu.py watch "$out/watch.json" --seconds $((LOAD_S + 12)) > "$out/watch.txt" 2>&1 & wp=$!
  sleep 12
  t 90 python3 bench/tui_screenshots.py "$out/screens" --live 8 --no-probe --prefix live8 \
    --shot gpus=2 --shot detail=enter --shot last=g,g,g,g,g,g,g > "$out/screens.txt" 2>&1
  nvidia-smi --query-gpu=index,pci.bus_id,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,pcie.link.width.max \
    --format=csv > "$out/link_loaded.csv" 2>&1
  wait $lp; wait $wp
  cat "$out/load.txt" "$out/screens.txt"; tail -1 "$out/watch.txt"
  if command -v rsvg-convert >/dev/null; then bash bench/svg_to_png.sh "$out"/screens/*.svg; else echo "no rsvg-convert: PNGs to be made with bench/svg_to_png.sh"; fi;;
probe)
  part probe
  echo "python3 -m pinmon probe --gpu all --json" >> "$out/commands.txt"
  s0=$(date +%s.%N)
  timeout -k 5 240 python3 -m pinmon probe --gpu all --json > "$out/probe_all.json" 2> "$out/probe_all_stderr.txt"; rc=$?
  s1=$(date +%s.%N)
  python3 -c "import sys; print(f'wall {float(sys.argv[2]) - float(sys.argv[1]):.2f} s, exit {sys.argv[3]}')" "$s0" "$s1" "$rc" \
    | tee "$out/probe_all_time.txt";;
numa)
  # probe --numa for the first GPU of each node; then a process holding 1 GiB pinned on the node far
  # from its GPU while pinmon check runs: pinned-numa-remote should name it.
  part numa
  python3 bench/multi_gpu.py pick nodes "$out/box.json" > "$out/numa_pick.txt"
  python3 bench/multi_gpu.py pick remote "$out/box.json" >> "$out/numa_pick.txt"; cat "$out/numa_pick.txt"
  while read -r gpu node; do
    t 90 python3 -m pinmon probe --numa --gpu "$gpu" --json > "$out/numa_probe_gpu$gpu.json" 2> "$out/numa_probe_gpu$gpu.stderr.txt"
  done < <(python3 bench/multi_gpu.py pick nodes "$out/box.json")
  read -r gpu gnode far < <(python3 bench/multi_gpu.py pick remote "$out/box.json")
  if [ -n "${far:-}" ]; then
    rm -f "$out/numa_holder.json" "$out/numa_stop"
    t 90 python3 bench/numa_remote_pinned.py --gpu "$gpu" --node "$far" --ready "$out/numa_holder.json" \
      --stop "$out/numa_stop" --hold-s 60 > "$out/numa_holder.txt" 2>&1 & hp=$!
    for _ in $(seq 120); do [ -s "$out/numa_holder.json" ] && break; sleep 0.5; done
    cat "$out/numa_holder.json"; echo
    t 60 python3 -m pinmon check --json > "$out/numa_check.json" 2> "$out/numa_check_stderr.txt"
    echo "check exit $? (1: warning)"
    touch "$out/numa_stop"; wait $hp
  else
    echo "one NUMA node (or no GPU node known): no far-node test"
  fi;;
scale)
  part scale
  t 120 python3 bench/multi_gpu.py scale "$out/scale.json" --repeats 30
  t 60 python3 bench/overhead.py --out "$out/scale_fake" --parts scale | tail -2;;
overhead)
  part overhead
  t 180 python3 bench/overhead.py --out "$out/overhead_tui_first" --seconds 60 --parts tui,nvitop 2>&1 | tail -4
  t 180 python3 bench/overhead.py --out "$out/overhead_nvitop_first" --seconds 60 --parts nvitop,tui 2>&1 | tail -4;;
summary)
  part summary
  echo "python3 bench/multi_gpu_summary.py $out" >> "$out/commands.txt"
  python3 bench/multi_gpu_summary.py "$out";;
*) echo "unknown part $p";;
esac; done
