#!/usr/bin/env bash
# One device call's worth of GPU work, in order of what matters most, each
# step under the time left (a step cut short costs itself, not the rest):
#
#   tools/gpu-session.sh [SECONDS]          (default 420)
#
# Run from the repository root on a GPU machine with .gpu/strata-gpu.tar.xz
# (tools/gpu-bundle.sh) carried. Writes under $OUT (default /tmp/strata-out):
#   env.txt           GPU, driver, CUDA, PyTorch, strata-run --probe-backend
#   cuda-results.md   tests/gpu/check_cuda.py's report (conformance first)
#   bench.md          bench/bench_gpt.py's table
#   prepare.log       the benchmark's exports and compiles (CPU, run beside
#                     the checks)
#   trace-SIZE.json, trace-summary-SIZE.txt  one step's strata-run --trace
#                     for each of TRACE_SIZES (default 124M)
#   session.log       everything printed
#
# What runs is chosen by variables: CHECKS (check_cuda.py --only; empty:
# none), BENCH_SIZES and BENCH_SYSTEMS (bench_gpt.py; empty: none; the
# default systems are strata, strata-unstaged (the same artifact without
# the products' aligned copies: what they gain), eager and compile),
# SANITIZER=1 (the compute-sanitizer check last, with the time left),
# TRACE=1, BENCH_STEPS / BENCH_WARMUP.
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
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm \
    --format=csv
  nvcc --version 2>/dev/null | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  strata-run --probe-backend
  nproc
} > "$out/env.txt" 2>&1
cat "$out/env.txt"

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
    > "$out/prepare.log" 2>&1 &
  prep_pid=$!
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
  grep -v Warning "$out/prepare.log" | grep -v '^ ' | tail -20
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
      > "$out/trace-summary-$size.txt" &&
    cat "$out/trace-summary-$size.txt"
done

if [[ "${SANITIZER:-1}" == 1 && $(left) -gt 40 ]]; then
  stage "compute-sanitizer"
  PYTHONUNBUFFERED=1 timeout "$(left)" python3 tests/gpu/check_cuda.py \
    --bin "$bin" --only sanitizer --timeout $(( $(left) / 3 - 5 )) \
    --report "$out/sanitizer.md"
fi
stage "done"
