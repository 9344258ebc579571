#!/usr/bin/env bash
# Trains the digits CNN (models/digits_cnn.onnx) on scikit-learn's digits and
# scores it on the held-out split: the example of docs/data.md.
#
#   models/train_digits.sh [WORK_DIR]     (from the repository root, built)
#
# Writes WORK_DIR/train and WORK_DIR/test (models/digits.py), the artifact
# WORK_DIR/cnn.strata and the log WORK_DIR/run.jsonl, whose last line is the
# --eval record. STRATA_BIN overrides the tools' folder (build/bin).
set -euo pipefail

work="${1:-/tmp/strata-digits}"
bin="${STRATA_BIN:-build/bin}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$work"

/usr/bin/python3 "$here/digits.py" --data-dir "$work"
"$bin/strata-compile" "$here/digits_cnn.onnx" -o "$work/cnn.strata" \
  --steps 300 --lr 0.003
"$bin/strata-run" "$work/cnn.strata" --data "$work/train" \
  --eval "$work/test" --print-every 50 --log "$work/run.jsonl"
