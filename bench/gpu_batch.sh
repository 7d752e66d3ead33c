#!/usr/bin/env bash
# Evidence runs on the lent GPU box (H100 or H200); each part writes under OUTDIR as NAME_<card>.json,
# <card> read from nvidia-smi (h100, h200), and a failing part does not stop the others.
# Usage, as root from the repository root: bash bench/gpu_batch.sh OUTDIR PART...
# Parts:
#   env       the card, driver, kernel, Python and library versions (env_<card>.txt)
#   attach    pinmon attach's cost (attach/detach time, CPU at 10k events/s, per-call cost, the slowdown of
#             1 MiB pinned copy loops, synchronous and asynchronous), its accuracy against paced traffic of
#             six libraries, and beside pinmon trace --engine cupti on one workload (~6 min)
#   attachacc, attachcost, vscupti   the attach part's three runs one at a time (ACC_S: accuracy window,
#             COST_ROUNDS: rounds of the cost parts)
#   gpusel    the GPU tests of attach (CLI and app) and of registered memory under each tracer engine,
#             CUPTI 12 included where .whl12 holds the CUDA 12 wheels
#   oom       a job-shaped cgroup OOM-killed by its pinned memory, reported after the cgroup is gone (~1 min)
#   gputests  the tests marked gpu (pytest -m gpu tests/gpu), tail of the output (~2 min)
#   checkprobe  `pinmon check --probe --json`, three timed runs (goal: 3 s)
#   firstframe  time to the first frame on an 80x24 pty, pinmon --no-probe against nvitop, ten runs each,
#             alternating (goal: at most 1.5x nvitop's median)
#   abba      the app's CPU at 1 Hz, 160x48, against nvitop's, three ABBA rounds of ABBA_S seconds a leg
#             (default 30; goal: at most nvitop's in every round)
#   nvitop comes from .whl (bash bench/wheels.sh pyelftools nvitop==1.7.2) where the box lacks it.
# .whl/ (bash bench/wheels.sh pyelftools) is installed into /tmp/site first when the box lacks Textual.
set -u
out=${1:?outdir}; shift; mkdir -p "$out"
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1 && [ ! -d /tmp/site/textual ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiE 'h100|h200|a100|l40s' | tr A-Z a-z)
card=${card:-gpu}
part() { echo "== $1 ($(date +%T))"; }
for p in "$@"; do case $p in
env)
  part env
  { nvidia-smi -L; nvidia-smi --query-gpu=driver_version,pcie.link.gen.max,pcie.link.width.max --format=csv;
    uname -r; python3 -c "import cupy, platform; print('python', platform.python_version(), 'cupy', cupy.__version__)";
    command -v gcc; findmnt -no FSTYPE,TARGET "$(python3 -c 'import ctypes.util;print(ctypes.util.find_library("cuda") or "")')" 2>/dev/null;
    ldconfig -p | grep -m2 libcuda.so.1; nproc; free -g; } 2>&1 \
    | python3 -c "import sys; sys.path.insert(0, 'bench'); from provenance import portable_text; sys.stdout.write(portable_text(sys.stdin.read()))" \
    > "$out/env_$card.txt"; cat "$out/env_$card.txt";;
attach)
  part attach
  drv=bench/attach/paced_driver
  [ -x "$drv" ] || gcc -O2 -o "$drv" bench/attach/paced_driver.c -ldl 2>&1 | tail -2
  timeout 330 python3 bench/attach_cost.py "$out/attach_cost_$card.json" --real 2>&1 | tail -12
  timeout 200 python3 bench/attach_cost.py "$out/attach_cost_driver_$card.json" --real --workload driver --driver "$drv" 2>&1 | tail -6
  timeout 300 python3 bench/attach_accuracy.py "$out/attach_accuracy_$card.json" --window 10 --driver "$drv" 2>&1 | tail -24
  timeout 200 python3 bench/attach_accuracy.py "$out/attach_vs_cupti_$card.json" --vs-cupti torch --window 12 2>&1 | tail -6;;
attachacc)
  part attachacc
  drv=bench/attach/paced_driver
  [ -x "$drv" ] || gcc -O2 -o "$drv" bench/attach/paced_driver.c -ldl 2>&1 | tail -2
  timeout 300 python3 bench/attach_accuracy.py "$out/attach_accuracy_$card.json" --window "${ACC_S:-10}" --driver "$drv" 2>&1 | tail -12;;
attachcost)
  part attachcost
  timeout 330 python3 bench/attach_cost.py "$out/attach_cost_$card.json" --real --rounds "${COST_ROUNDS:-5}" \
    --parts attach_detach,per_call,loop_1mib,loop_1mib_async 2>&1 | tail -8;;
vscupti)
  part vscupti
  timeout 200 python3 bench/attach_accuracy.py "$out/attach_vs_cupti_$card.json" --vs-cupti torch --window 10 2>&1 | tail -6;;
gpusel)
  part gpusel
  # The CUDA 12 wheels (.whl12, bench/README.md) let the registered-memory test run under CUPTI 12 too.
  w12=""; ls .whl12/*.whl >/dev/null 2>&1 && w12="PINMON_CUPTI12_WHEELS=.whl12 "
  sel="tests/gpu/test_attach_gpu.py tests/gpu/test_attach_app_gpu.py tests/gpu/test_trace_register_gpu.py"
  { echo "# ${w12}python3 -m pytest -q -m gpu $sel, $(python3 bench/provenance.py --line)"
    env ${w12:+PINMON_CUPTI12_WHEELS=$PWD/.whl12} timeout 400 python3 -m pytest -q -rs -p no:cacheprovider -m gpu $sel 2>&1 | tail -25; } > "$out/gpu_tests_attach_register_$card.txt"
  cat "$out/gpu_tests_attach_register_$card.txt";;
oom)
  part oom
  timeout 240 python3 bench/oom_after_the_fact.py "$out/oom_after_the_fact_$card.json" 2>&1 | tail -12;;
gputests)
  part gputests
  { echo "# python3 -m pytest -q -m gpu tests/gpu, $(python3 bench/provenance.py --line)"
    timeout 400 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu 2>&1 | tail -25; } > "$out/gpu_tests_$card.txt"
  cat "$out/gpu_tests_$card.txt";;
checkprobe)
  part checkprobe
  : > "$out/check_probe_wall_$card.txt"
  for i in 1 2 3; do /usr/bin/time -f "%e" python3 -m pinmon check --probe --json > "$out/check_probe_${card}_$i.json" 2>> "$out/check_probe_wall_$card.txt"; done
  echo "check --probe wall s:"; cat "$out/check_probe_wall_$card.txt";;
firstframe)
  part firstframe
  timeout 300 python3 bench/tui_first_frame.py "$out/tui_first_frame_$card.json" --runs "${FF_RUNS:-10}" --size 80x24 2>&1 | tail -6;;
abba)
  part abba
  timeout 590 python3 bench/tui_cpu_abba.py "$out/tui_cpu_abba_$card.json" --rounds 3 --seconds "${ABBA_S:-30}" \
    --size 160x48 2>&1 | tail -8;;
*) echo "unknown part $p";;
esac; done
