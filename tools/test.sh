#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (GoogleTest + lit +
# the end-to-end checks) through ctest.
#
#   tools/test.sh            every test (CI: .ci/run)
#   tools/test.sh --quick    the fast tier: every test not labelled slow
#   tools/test.sh -R lit     any further arguments go to ctest
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/install-deps.sh"
"$root/tools/build.sh"
# The libFuzzer targets (clang-19; their own folder): ctest's fuzz.* tests
# run each for 15 s and fail, rather than skip, when they are not built.
"$root/tools/fuzz.sh" --build
export STRATA_FUZZ_REQUIRED=1
build="${STRATA_BUILD_DIR:-$root/build}"
cd "$build"
args=()
for arg in "$@"; do
  if [[ "$arg" == "--quick" ]]; then
    args+=(-LE slow)
  else
    args+=("$arg")
  fi
done
ctest --output-on-failure -j "$(nproc)" "${args[@]}"
