#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job: import the bundled
# GPT model and print a summary of its graph, then the graph itself.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/tools/install-deps.sh"
"$root/tools/build.sh" strata-compile strata-opt
build="${STRATA_BUILD_DIR:-$root/build}"
model="$root/models/gpt_tiny.onnx"
echo "== strata-compile $model --emit=summary"
"$build/bin/strata-compile" "$model" --emit=summary
echo
echo "== strata-compile $model --emit=graph (first block)"
"$build/bin/strata-compile" "$model" --emit=graph | cut -c1-160 | sed -n '3,30p'
