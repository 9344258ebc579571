#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job: compile the bundled
# GPT into a training artifact, train it on the bundled English text
# (models/data/python-docs.txt, byte-level tokens) on the CPU, then sample
# text from the trained model through the runtime.
#
#   tools/demo.sh [--steps N]      (800 by default: about two minutes)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
steps=800
if [[ "${1:-}" == "--steps" && -n "${2:-}" ]]; then steps="$2"; fi
"$root/tools/install-deps.sh"
"$root/tools/build.sh" strata-compile strata-run
build="${STRATA_BUILD_DIR:-$root/build}"
work="$(mktemp -d)"
model="$root/models/gpt_tiny_dynamic_batch.onnx"
text="$root/models/data/python-docs.txt"

echo "== strata-compile $(basename "$model") --emit=summary --batch 32"
"$build/bin/strata-compile" "$model" --batch 32 --emit=summary | head -n 12
echo
echo "== strata-compile -> $work/gpt.strata (AdamW, cosine schedule, clipping)"
"$build/bin/strata-compile" "$model" --batch 32 -o "$work/gpt.strata" \
  --optimizer adamw --lr 1e-2 --lr-schedule cosine --warmup-steps 30 \
  --clip-norm 1.0 --steps "$steps"
echo "== strata-run: $steps steps on $(basename "$text") ($(wc -c < "$text") bytes)"
"$build/bin/strata-run" "$work/gpt.strata" --data "$text" --data-dtype uint8 \
  --print-every 50 --log "$work/train.jsonl" \
  --sample 300 --prompt "The list " --top-k 3
echo "(step log: $work/train.jsonl)"
