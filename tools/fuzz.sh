#!/usr/bin/env bash
# Builds the libFuzzer targets (clang-19, ASan + UBSan; build-fuzz/) when
# needed and runs them (docs/fuzzing.md).
#
#   tools/fuzz.sh [TARGET|all] [SECONDS]   each target SECONDS (default 60)
#   tools/fuzz.sh --runs N [TARGET|all]    each target N executions instead
#   tools/fuzz.sh --build                  only build
#   tools/fuzz.sh --no-build ...           never build (ctest's fuzz tests):
#                                          without the fuzz build, exit 77
#                                          (ctest: skipped), or 1 under
#                                          STRATA_FUZZ_REQUIRED=1 (CI)
#   tools/fuzz.sh --fresh ...              empty the scratch corpus first
#   tools/fuzz.sh --merge [TARGET|all]     fold the inputs the last runs kept
#                                          that add edges into the committed
#                                          corpus (-set_cover_merge=1)
#
# TARGET: onnx-import, external-data, plan-load, checkpoint-load (or the
# full fuzz-* name). Seeds: tests/fuzz/corpus/TARGET and the crash
# reproducers in tests/fuzz/regressions/TARGET; new inputs go to
# $STRATA_FUZZ_WORK/TARGET (default build-fuzz/work), crashes to
# $STRATA_FUZZ_WORK/TARGET-crashes/. -max_len is the largest seed's size,
# at least 4096. Exit status: 0 when every target ended without a crash,
# leak, timeout or sanitizer report. STRATA_FUZZ_BUILD_DIR overrides
# build-fuzz/; further libFuzzer flags go in STRATA_FUZZ_FLAGS.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${STRATA_FUZZ_BUILD_DIR:-$root/build-fuzz}"
work="${STRATA_FUZZ_WORK:-$build/work}"
all=(onnx-import external-data plan-load checkpoint-load)

mode=run build_ok=1 runs="" fresh=0
while [[ $# -gt 0 && "$1" == --* ]]; do
  case "$1" in
    --build) mode=build ;;
    --no-build) build_ok=0 ;;
    --merge) mode=merge ;;
    --fresh) fresh=1 ;;
    --runs) runs="$2"; shift ;;
    *) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
which="${1:-all}"
seconds="${2:-60}"
targets=()
if [[ "$which" == all ]]; then
  targets=("${all[@]}")
else
  targets=("${which#fuzz-}")
fi

build_fuzzers() {
  if [[ ! -f "$build/build.ninja" ]]; then
    cmake -G Ninja -S "$root" -B "$build" -DSTRATA_FUZZ=ON \
      -DCMAKE_C_COMPILER=clang-19 -DCMAKE_CXX_COMPILER=clang++-19 \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
      -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" >/dev/null
  fi
  ninja -C "$build" -j "${STRATA_FUZZ_JOBS:-$(nproc)}" strata-fuzzers
}

if [[ "$mode" == build ]]; then
  build_fuzzers
  exit 0
fi
if [[ $build_ok -eq 1 ]]; then
  build_fuzzers
fi

status=0
for t in "${targets[@]}"; do
  bin="$build/bin/fuzz-$t"
  corpus="$root/tests/fuzz/corpus/$t"
  regressions="$root/tests/fuzz/regressions/$t"
  if [[ ! -x "$bin" ]]; then
    echo "fuzz.sh: $bin is not built (tools/fuzz.sh --build)" >&2
    [[ $build_ok -eq 0 && "${STRATA_FUZZ_REQUIRED:-0}" != 1 ]] && exit 77
    exit 1
  fi
  seeds=("$corpus")
  [[ -d "$regressions" ]] && seeds+=("$regressions")
  largest=$(find "${seeds[@]}" -type f ! -name '*.md' -printf '%s\n' | sort -n | tail -1)
  max_len=$(( ${largest:-0} > 4096 ? ${largest:-0} : 4096 ))
  # The scratch corpus first: libFuzzer writes new inputs to the first folder.
  scratch="$work/$t"
  crashes="$work/$t-crashes"
  [[ $fresh -eq 1 ]] && rm -rf "$scratch"
  mkdir -p "$scratch" "$crashes"
  if [[ "$mode" == merge ]]; then
    # The committed corpus keeps its inputs; of the scratch inputs up to
    # STRATA_FUZZ_MERGE_MAX bytes (4096) only a small set that covers the
    # edges they add is copied in (set cover, edges only: hit counts would
    # keep many near-duplicates).
    candidates="$work/$t-merge"
    rm -rf "$candidates"
    mkdir -p "$candidates"
    find "$scratch" -type f -size -"$(( ${STRATA_FUZZ_MERGE_MAX:-4096} + 1 ))"c \
      -exec cp -t "$candidates" {} +
    "$bin" -set_cover_merge=1 -use_counters=0 -max_len="$max_len" \
      "$corpus" "$candidates" 2>&1 | grep -E 'MERGE-OUTER: [0-9]+ new files' || true
    rm -rf "$candidates"
    echo "fuzz-$t: $(find "$corpus" -type f ! -name '*.md' | wc -l) inputs, $(find "$corpus" -type f ! -name '*.md' -printf '%s\n' | awk '{s += $1} END {print s}') bytes in $corpus"
    continue
  fi
  budget=(-max_total_time="$seconds")
  [[ -n "$runs" ]] && budget=(-runs="$runs")
  log="$work/$t.log"
  start=$(date +%s)
  rc=0
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
  # -rss_limit_mb: the importer builds constants of the sizes a model names.
  # shellcheck disable=SC2086
  "$bin" "${budget[@]}" -max_len="$max_len" -timeout=25 -rss_limit_mb=2560 \
    -artifact_prefix="$crashes/" -print_final_stats=1 ${STRATA_FUZZ_FLAGS:-} \
    "$scratch" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  elapsed=$(( $(date +%s) - start ))
  execs=$(grep -Eo 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo "?")
  speed=$(grep -Eo 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -Eo '[0-9]+$' || echo "?")
  units=$(find "$scratch" -type f | wc -l)
  if [[ $rc -eq 0 ]]; then
    echo "fuzz-$t: ok, $execs executions in ${elapsed} s ($speed/s), max_len $max_len, $units new inputs in $scratch"
  else
    status=1
    echo "fuzz-$t: FAILED (exit $rc) after $execs executions in ${elapsed} s; the log's end ($log):"
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written|fuzz-' "$log" | head -20 || tail -20 "$log"
  fi
done
exit $status
