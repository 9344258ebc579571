#!/usr/bin/env bash
# One device call's worth of GPU work, in order of what matters most, each
# step under the time left (a step cut short costs itself, not the rest):
#
#   tools/gpu-session.sh [SECONDS]          (default 420)
#
# Run from the repository root on a GPU machine with .gpu/strata-gpu.tar.xz
# (tools/gpu-bundle.sh) carried. Writes under $OUT (default /tmp/strata-out;
# a device call brings back at most 8 files):
#   session.log       everything printed: the GPU, driver, CUDA, PyTorch and
#                     strata-run --probe-backend first, the benchmark's
#                     compiles, each trace's summary per op kind
#   cuda-results.md   tests/gpu/check_cuda.py's report (conformance first)
#   sanitizer.md      its compute-sanitizer check, run last
#   bench.md          bench/bench_gpt.py's table
#   dynamo.md         tests/frontend/check_dynamo_export.py: the models
#                     exported by this PyTorch's dynamo exporter against the
#                     committed ones (CPU work, beside the checks)
#   trace-SIZE.json   one step's strata-run --trace for each of TRACE_SIZES
#                     (default 124M)
#   cuda-calibrated.json  strata-sim --calibrate --backend cuda's file (its
#                     predictions against the measured steps: session.log)
#
# What runs is chosen by variables: CHECKS (check_cuda.py --only; empty:
# none), BENCH_SIZES and BENCH_SYSTEMS (bench_gpt.py; empty: none; the
# default systems are strata, strata-unstaged (the same artifact without
# the products' aligned copies: what they gain), eager and compile),
# SANITIZER=1 (the compute-sanitizer check last, with the time left),
# TRACE=1, DYNAMO=1, CALIBRATE=1, BENCH_STEPS / BENCH_WARMUP.
set -u
budget="${1:-420}"
start=$(date +%s)
out="${OUT:-/tmp/strata-out}"
mkdir -p "$out"
exec > >(tee -a "$out/session.log") 2>&1
left() { echo $((budget - ($(date +%s) - start))); }
stage() { echo "== $* [t=$(($(date +%s) - start)) s]"; }

tar -C /tmp -xJf .gpu/strata-gpu.tar.xz && . /tmp/strata-gpu/env.sh || exit 1
bin=/tmp/strata-gpu/bin
date -u
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
  --format=csv
nvcc --version 2>/dev/null | tail -2
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
strata-run --probe-backend
nproc

checks="${CHECKS-conformance,device,fp32,forward,offload,graph,bf16}"
sizes="${BENCH_SIZES-124M}"
systems="${BENCH_SYSTEMS-strata,strata-unstaged,eager,compile}"
steps="${BENCH_STEPS:-20}"
warmup="${BENCH_WARMUP:-5}"
work=/tmp/strata-bench
bench_flags=(--bin "$bin" --work "$work" --steps "$steps" --warmup "$warmup")

# The benchmark's exports and compiles are CPU work: beside the checks.
prep_pid=""
if [[ -n "$sizes" ]]; then
  stage "prepare $sizes in the background"
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 bench/bench_gpt.py \
    "${bench_flags[@]}" --sizes "$sizes" --systems "$systems" --prepare \
    > /tmp/strata-prepare.log 2>&1 &
  prep_pid=$!
fi
# Dynamo exports: CPU work too.
dynamo_pid=""
if [[ "${DYNAMO:-1}" == 1 ]]; then
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 \
    tests/frontend/check_dynamo_export.py --bin "$bin" \
    --report "$out/dynamo.md" > /tmp/strata-dynamo.log 2>&1 &
  dynamo_pid=$!
fi

if [[ -n "$checks" ]]; then
  stage "check_cuda.py --only $checks"
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 tests/gpu/check_cuda.py \
    --bin "$bin" --only "$checks" --timeout 150 --report "$out/cuda-results.md"
fi

if [[ -n "$sizes" ]]; then
  stage "bench $sizes: $systems"
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 bench/bench_gpt.py \
    "${bench_flags[@]}" --sizes "$sizes" --systems "$systems" \
    --out "$out/bench.md"
  [[ -n "$prep_pid" ]] && kill "$prep_pid" 2>/dev/null
  grep -v Warning /tmp/strata-prepare.log | grep -v '^ ' | tail -20
fi

# One step's trace of each of TRACE_SIZES (default 124M) the benchmark
# compiled, and its summary per op kind.
for size in ${TRACE_SIZES-124M}; do
  [[ "${TRACE:-1}" == 1 && -d "$work/gpt-$size.strata" && $(left) -gt 30 ]] ||
    continue
  stage "trace of one $size step"
  timeout "$(left)" strata-run "$work/gpt-$size.strata" --backend cuda \
    --quiet --steps 3 --trace "$out/trace-$size.json" --seed 0 &&
    python3 bench/trace_summary.py "$out/trace-$size.json" --top 25 \
      > /tmp/strata-trace-summary.txt &&
    cat /tmp/strata-trace-summary.txt
done

# strata-sim --calibrate --backend cuda (the GPU's own kernels measured
# into a cluster file), and its predictions of gpt_tiny's steps and of the
# benchmark's compiled ones against strata-run's (issue 20), each also
# traced and compared per op kind. The file comes back as
# cuda-calibrated.json; the tables are in session.log.
if [[ "${CALIBRATE:-1}" == 1 && $(left) -gt 60 ]]; then
  stage "calibrate the GPU, predict the measured steps"
  arts=()
  for size in ${sizes//,/ }; do
    [[ -d "$work/gpt-$size.strata" ]] && arts+=("$work/gpt-$size.strata")
  done
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 \
    tests/sim/check_cuda_calibration.py --bin "$bin" --work /tmp/strata-cal \
    --seconds 0.05 --rounds 1 --steps 12 --compare --artifact "${arts[@]}"
  cp /tmp/strata-cal/cuda-calibrated.json "$out/" 2>/dev/null
fi

if [[ -n "$dynamo_pid" ]]; then
  stage "dynamo exports"
  wait "$dynamo_pid"
  grep -v Warning /tmp/strata-dynamo.log | grep -v '^ ' | tail -12
fi

if [[ "${SANITIZER:-1}" == 1 && $(left) -gt 40 ]]; then
  stage "compute-sanitizer"
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 tests/gpu/check_cuda.py \
    --bin "$bin" --only sanitizer --timeout $(( $(left) / 3 - 5 )) \
    --report "$out/sanitizer.md"
fi
stage "done"
