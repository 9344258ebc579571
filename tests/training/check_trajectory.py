#!/usr/bin/env python3
"""Trains a committed model with strata-compile + strata-run as a golden file
in tests/golden/train/ describes, and compares every step's loss (and
gradient norm and learning rate) with PyTorch's (models/train_reference.py).

    check_trajectory.py --bin BUILD/bin --golden tests/golden/train/mlp/adamw.json
        [--accum 4]   the same run in 4 micro-steps of a quarter batch: its
                      losses must equal the full-batch reference within 1e-6
                      (relative), as the mean of the micro-batch losses.

Exit status 0 when every step matches, 1 with the first mismatch otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("--golden", required=True)
    parser.add_argument("--accum", type=int, default=1)
    parser.add_argument("--rtol", type=float, default=1e-5)
    args = parser.parse_args()
    with open(args.golden) as f:
        golden = json.load(f)
    work = tempfile.mkdtemp(prefix="trajectory-")
    artifact = os.path.join(work, "model.strata")
    compile_cmd = [os.path.join(args.bin, "strata-compile"),
                   os.path.join(ROOT, golden["onnx"]), "-o", artifact]
    compile_cmd += golden["compile_flags"]
    if args.accum > 1:
        # The model's batch-dynamic export (same weights), at a micro-batch
        # of batch / accum.
        onnx = golden["onnx"].replace(".onnx", "_dynamic_batch.onnx")
        manifest = json.load(open(os.path.join(ROOT, "models", "manifest.json")))
        batch = manifest["models"][os.path.basename(golden["onnx"])][
            "inputs"][0]["shape"][0]
        if batch % args.accum:
            sys.exit(f"batch {batch} does not split into {args.accum}")
        compile_cmd[1] = os.path.join(ROOT, onnx)
        compile_cmd += ["--batch", str(batch // args.accum),
                        "--accum", str(args.accum)]
    subprocess.run(compile_cmd, check=True)
    log = os.path.join(work, "log.jsonl")
    run_cmd = [os.path.join(args.bin, "strata-run"), artifact, "--quiet",
               "--steps", str(golden["steps"]), "--seed", str(golden["seed"]),
               "--log", log]
    if golden["data"] != "synthetic":
        run_cmd += ["--data", os.path.join(ROOT, golden["data"]),
                    "--data-dtype", golden["data_dtype"]]
    subprocess.run(run_cmd, check=True)
    steps = [json.loads(line) for line in open(log)]
    if len(steps) != golden["steps"]:
        sys.exit(f"strata-run logged {len(steps)} steps, expected "
                 f"{golden['steps']}")
    worst = 0.0
    for i, step in enumerate(steps):
        for key, ref, rtol in (("loss", golden["losses"][i], args.rtol),
                               ("grad_norm", golden["grad_norms"][i], 1e-3),
                               ("lr", golden["lrs"][i], 1e-8)):
            err = abs(step[key] - ref) / max(abs(ref), 1e-12)
            if key == "loss":
                worst = max(worst, err)
            if err > rtol:
                print(f"{args.golden}: step {i + 1} {key} {step[key]!r} vs "
                      f"PyTorch {ref!r} (relative error {err:.3g} > {rtol})")
                return 1
    print(f"{os.path.relpath(args.golden, ROOT)} (accum {args.accum}): "
          f"{len(steps)} steps match PyTorch, worst loss relative error "
          f"{worst:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
