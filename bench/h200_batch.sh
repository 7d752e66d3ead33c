#!/usr/bin/env bash
# One evidence run on the H200 test machine; each part writes under OUTDIR and a failing part does
# not stop the others. Usage: bash bench/h200_batch.sh OUTDIR PART...   (parts: env gputests probe
# check tui screenshots overhead overhead2 firstframe frame kpins trace cupti cuptiknobs cuptitrace breakdown)
# .whl/ (bash bench/wheels.sh) is installed into /tmp/site first when the box lacks Textual.
# gputests: every test in tests/gpu, the tail of pytest's output under a line naming the command,
# commit and versions (bench/provenance.py --line);
# cuptiknobs: what CUPTI adds to a 1 MiB copy under each of its settings (~2 min);
# overhead: the app against nvitop (60 s each), the app's threads, one update headless (~4 min);
# overhead2: the app against nvitop at 160x48, three ABBA rounds of 45 s (~10 min); firstframe: time to first
# frame against nvitop at 80x24, ten runs each, alternating; frame: one update headless;
# kpins: the kernel's pinned count against known allocations (~1 min);
# cuptitrace: both engines' slowdown of a copy loop, 30 rounds each, and their coverage (~3 min);
# breakdown: the app's threads (CPU and wake-ups each), a snapshot's parts, and both threads' profiles (~3 min);
# trace: the tracer's slowdown of a copy loop, 20 rounds, and of each kind of copy (~2 min).
set -u
out=${1:?outdir}; shift; mkdir -p "$out"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -d /tmp/site/textual ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
part() { echo "== $1 ($(date +%T))"; }
for p in "$@"; do case $p in
env)
  part env
  { nvidia-smi -L; nvidia-smi --query-gpu=driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv;
    python3 -c "import cupy, platform; print('python', platform.python_version(), 'cupy', cupy.__version__)";
    nproc; free -g; } > "$out/env.txt" 2>&1; cat "$out/env.txt"
  python3 bench/provenance.py > "$out/provenance.json"; cat "$out/provenance.json";;
gputests)
  part gputests
  { echo "# python3 -m pytest -q -m gpu tests/gpu, $(python3 bench/provenance.py --line)"
    timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu 2>&1 | tail -15; } > "$out/gpu_tests.txt"
  cat "$out/gpu_tests.txt";;
probe)
  part probe
  python3 bench/probe_vs_torch.py "$out/probe_vs_torch_h200.json" 2>&1 | tail -12
  /usr/bin/time -f "wall %e s, max RSS %M KiB" python3 -m pinmon probe --sweep --modes --json \
    > "$out/probe_sweep_modes_h200.json" 2> "$out/probe_sweep_modes_time.txt"; echo "rc=$?"; cat "$out/probe_sweep_modes_time.txt"
  python3 -m pinmon probe --sweep --modes > "$out/probe_sweep_modes_h200.txt" 2>&1; echo "rc=$?"; head -30 "$out/probe_sweep_modes_h200.txt";;
check)
  part check
  for i in 1 2 3; do /usr/bin/time -f "%e" python3 -m pinmon check --probe --json > "$out/check_probe_$i.json" 2>> "$out/check_probe_wall.txt"; done
  echo "check --probe wall s:"; cat "$out/check_probe_wall.txt";;
tui)
  part tui
  python3 bench/tui_overhead.py --seconds 30 --only demo,live,live_no_probe,nvitop --out "$out/tui_overhead_h200.json" 2>&1 | tail -8;;
screenshots)
  part screenshots
  python3 bench/transfer_load.py 40 --json "$out/screenshot_load.json" > /dev/null 2>&1 & lp=$!
  sleep 3; python3 bench/tui_screenshots.py "$out" --live 12 2>&1 | tail -4; wait $lp;;
overhead)
  part overhead
  python3 bench/overhead.py --out "$out" --seconds 60 --parts tui,nvitop 2>&1 | tail -6
  python3 bench/cpu_breakdown.py "$out/cpu_breakdown_h200.json" --seconds 30 --parts threads,parts 2>&1 | tail -4
  python3 bench/tui_frame.py "$out/tui_frame_h200.json" 2>&1 | tail -2;;
overhead2)
  part overhead2
  python3 bench/tui_cpu_abba.py "$out/tui_cpu_abba_h200.json" --rounds 3 --seconds 45 --size 160x48 2>&1 | tail -4;;
firstframe)
  part firstframe
  python3 bench/tui_first_frame.py "$out/tui_first_frame_h200.json" --runs 10 --size 80x24 2>&1 | tail -4;;
frame)
  part frame
  python3 bench/tui_frame.py "$out/tui_frame_h200.json" 2>&1 | tail -2;;
kpins)
  part kpins
  timeout 200 python3 bench/kernel_pins_h200.py "$out/kernel_pins_h200.json" 2>&1 | tail -12;;
cuptitrace)
  part cuptitrace
  python3 bench/trace_overhead.py "$out/trace_overhead_cupti_h200.json" --engine cupti --rounds 30 2>&1 | tail -2
  python3 bench/trace_overhead.py "$out/trace_overhead_hooks_h200.json" --engine hooks --rounds 30 2>&1 | tail -2
  python3 bench/trace_coverage.py "$out/trace_coverage_h200.json" --seconds 8 2>&1 | tail -6;;
breakdown)
  part breakdown
  python3 bench/cpu_breakdown.py "$out/cpu_breakdown_h200.json" --seconds 30 --snapshots 100 \
    --parts threads,parts,snapprofile,profile 2>&1 | tail -6;;
trace)
  part trace
  python3 bench/trace_overhead.py "$out/trace_overhead_h200.json" --rounds 20 2>&1 | tail -8
  python3 bench/trace_per_op.py "$out/trace_per_op_h200.json" 2>&1 | tail -10;;
cupti)
  part cupti
  python3 bench/cupti_record_cost.py "$out/cupti_record_cost_h200.json" --copies 4000 2>&1 | tail -14
  python3 bench/trace_overhead.py "$out/trace_overhead_cupti_h200.json" --engine cupti --rounds 10 2>&1 | tail -2
  python3 bench/trace_overhead.py "$out/trace_overhead_hooks_h200.json" --engine hooks --rounds 10 2>&1 | tail -2
  python3 bench/trace_coverage.py "$out/trace_coverage_h200.json" --seconds 8 2>&1 | tail -8;;
cuptiknobs)
  part cuptiknobs
  python3 bench/cupti_record_cost.py "$out/cupti_knobs_h200.json" --copies 4000 --knobs 2>&1 | tail -30;;
*) echo "unknown part $p";;
esac; done
