#!/usr/bin/env bash
# Installs what is missing, builds, and runs the main job: the bundled GPT
# trained on the bundled English text (models/data/python-docs.txt,
# byte-level tokens) under mpirun on 4 CPU ranks laid out as 2 simulated
# nodes of 2 (K = 2), its states sharded MiCS-style over a partition group
# of all 4 ranks with the hierarchical all-gather. It prints the bytes a
# step moved per link class next to what plain ZeRO-3 (the same sharding,
# flat all-gathers) moves, then consolidates the sharded checkpoint, exports
# the trained model to ONNX and samples text from it. Last, the 8-layer GPT
# cut into 4 pipeline stages (zero-bubble schedule) trains on the same text
# under mpirun -np 4, beside the same run on one rank.
#
#   tools/demo.sh [--steps N]      (1200 by default: about 3 minutes)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
steps=1200
if [[ "${1:-}" == "--steps" && -n "${2:-}" ]]; then steps="$2"; fi
"$root/tools/install-deps.sh"
"$root/tools/build.sh" strata-compile strata-run
build="${STRATA_BUILD_DIR:-$root/build}"
work="$(mktemp -d)"
model="$root/models/gpt_tiny_dynamic_batch.onnx"
text="$root/models/data/python-docs.txt"
mpirun=(mpirun --allow-run-as-root --oversubscribe -np 4)
# 4 ranks x micro-batch 8 = the global batch of 32 sequences of 64 bytes.
topology=(--batch 8 --world 4 --gpus-per-node 2 --partition-group 4)
training=(--optimizer adamw --lr 1e-2 --lr-schedule cosine --warmup-steps 30
          --clip-norm 1.0 --steps "$steps")

echo "== strata-compile $(basename "$model") --emit=summary --batch 8"
"$build/bin/strata-compile" "$model" --batch 8 --emit=summary > "$work/summary.txt"
head -n 8 "$work/summary.txt"
echo
echo "== strata-compile --emit=distributed: the first hierarchical all-gather"
"$build/bin/strata-compile" "$model" "${topology[@]}" --hierarchical on \
  --emit=distributed > "$work/distributed.mlir"
grep -m 4 -E 'sched\.|graph\.(split|concat)' "$work/distributed.mlir" |
  cut -c 1-150
echo
echo "== strata-compile -> $work/gpt.strata (N=4, K=2, P=4, hierarchical)"
"$build/bin/strata-compile" "$model" "${topology[@]}" --hierarchical on \
  "${training[@]}" -o "$work/gpt.strata"
echo "== mpirun -np 4 strata-run: $steps steps on $(basename "$text") ($(wc -c < "$text") bytes)"
"${mpirun[@]}" "$build/bin/strata-run" "$work/gpt.strata" --data "$text" \
  --data-dtype uint8 --print-every 50 --log "$work/train.jsonl" \
  --save-every "$steps" --checkpoint-dir "$work/checkpoints"

echo
echo "== the same step as plain ZeRO-3 (flat all-gathers over the 4 ranks), 3 steps"
"$build/bin/strata-compile" "$model" "${topology[@]}" --hierarchical off \
  "${training[@]}" -o "$work/zero3.strata"
"${mpirun[@]}" "$build/bin/strata-run" "$work/zero3.strata" --data "$text" \
  --data-dtype uint8 --steps 3 --quiet --log "$work/zero3.jsonl"
python3 - "$work/train.jsonl" "$work/zero3.jsonl" <<'EOF'
import json, sys
mics, zero3 = (json.loads(open(path).readline()) for path in sys.argv[1:3])
print("bytes per step, summed over the 4 ranks   intra-node   inter-node")
for name, step in (("MiCS, hierarchical all-gather", mics),
                   ("ZeRO-3, flat all-gather", zero3)):
    for kind in ("all_gather", "reduce_scatter", "all_reduce"):
        intra, inter = step["bytes"][kind]
        print(f"  {name:31s} {kind:15s} {intra:10.0f}   {inter:10.0f}")
ratio = mics["bytes"]["all_gather"][1] / zero3["bytes"]["all_gather"][1]
print(f"inter-node all-gather bytes: {ratio:.3f} of ZeRO-3's "
      f"((P-K)/(P-1) = 2/3 with P = 4, K = 2); the losses are the same: "
      f"{mics['loss']:.6f} vs {zero3['loss']:.6f}")
EOF

echo
echo "== strata-run --consolidate: whole weights from the 4 shards, and ONNX"
"$build/bin/strata-run" "$work/gpt.strata" --checkpoint-dir "$work/checkpoints" \
  --consolidate "$work/weights" --export-onnx "$work/trained.onnx"
echo "== the exported model on one rank: sampling"
"$build/bin/strata-compile" "$work/trained.onnx" --batch 1 -o "$work/sample.strata"
"$build/bin/strata-run" "$work/sample.strata" --steps 0 --quiet \
  --sample 300 --prompt "The list " --top-k 3
echo "(step log: $work/train.jsonl)"

echo
deep="$root/models/gpt_deep.onnx"
pipeline=(--pipeline-stages 4 --pipeline-schedule zb --accum 4 --steps 60
          --lr 3e-3 --clip-norm 1.0)
echo "== pipeline stages: $(basename "$deep") cut into 4 (strata-compile --emit=pipeline)"
"$build/bin/strata-compile" "$deep" "${pipeline[@]}" --emit=pipeline
"$build/bin/strata-compile" "$deep" "${pipeline[@]}" -o "$work/pipeline.strata"
"$build/bin/strata-compile" "$deep" --accum 4 --steps 60 --lr 3e-3 --clip-norm 1.0 \
  -o "$work/deep.strata"
echo "== mpirun -np 4 strata-run: 60 steps, one rank per stage, and the same on one rank"
"${mpirun[@]}" "$build/bin/strata-run" "$work/pipeline.strata" --data "$text" \
  --data-dtype uint8 --quiet --log "$work/pipeline.jsonl"
"$build/bin/strata-run" "$work/deep.strata" --data "$text" --data-dtype uint8 \
  --quiet --log "$work/deep.jsonl"
python3 - "$work/pipeline.jsonl" "$work/deep.jsonl" <<'EOF'
import json, sys
piped, one = ([json.loads(l) for l in open(path)] for path in sys.argv[1:3])
worst = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(piped, one))
last = piped[-1]
print(f"loss {piped[0]['loss']:.4f} -> {last['loss']:.4f} on 4 stages, "
      f"{one[-1]['loss']:.4f} on one rank (worst relative difference {worst:.1e});")
print("time each stage waited for another, over its step (last step): "
      + ", ".join(f"{b:.2f}" for b in last["bubble"]))
EOF
