#!/usr/bin/env python3
"""Distributed training equals one rank: compiles a batch-dynamic model once
for one rank at the global batch and once for N ranks (K per node, partition
group P, accumulation A) at the per-rank micro-batch, runs the latter under
mpirun, and compares every step's loss (relative 1e-6). Also checks that the
ranks of each replication group end with bit-identical state (their
checkpoints' state.bin), and that the log carries per-link byte counters.

    check_distributed.py --bin BUILD/bin --model gpt_tiny --world 4 \\
        --ranks-per-node 2 --partition 2 --accum 2 [--steps 5]
    check_distributed.py --bin BUILD/bin --timeout-test
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe"]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def losses(path):
    return [json.loads(line) for line in open(path)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", default="gpt_tiny")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--ranks-per-node", type=int, default=2)
    ap.add_argument("--partition", type=int, default=4)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--timeout-test", action="store_true")
    args = ap.parse_args()
    compile_ = os.path.join(args.bin, "strata-compile")
    strata_run = os.path.join(args.bin, "strata-run")
    work = tempfile.mkdtemp(prefix="distributed-")
    onnx = os.path.join(ROOT, "models", args.model + "_dynamic_batch.onnx")

    if args.timeout_test:
        # Rank 1 stops participating at step 2: every rank must be gone
        # within the timeout (plus start-up), with the diagnostic.
        art = os.path.join(work, "stall.strata")
        run([compile_, onnx, "--batch", "2", "-o", art, "--steps", "5",
             "--world", "2"])
        start = time.time()
        proc = subprocess.run(MPIRUN + ["-np", "2", "-x",
                                        "STRATA_TEST_STALL_RANK=1", strata_run,
                                        art, "--quiet", "--timeout", "2"],
                              capture_output=True, text=True, timeout=120)
        took = time.time() - start
        message = "did not complete within 2 s"
        if proc.returncode == 0 or message not in proc.stderr:
            print("no timeout diagnostic; exit", proc.returncode, proc.stderr)
            return 1
        print(f"stalled rank: every rank exited ({proc.returncode}) after "
              f"{took:.1f} s with: {proc.stderr.splitlines()[0]}")
        return 0 if took < 60 else 1

    n, a = args.world, args.accum
    micro = args.global_batch // (n * a)
    if micro * n * a != args.global_batch:
        sys.exit("the global batch does not split over world x accum")
    ref = os.path.join(work, "ref.strata")
    run([compile_, onnx, "--batch", str(args.global_batch), "-o", ref,
         "--steps", str(args.steps)])
    run([strata_run, ref, "--quiet", "--log", os.path.join(work, "ref.jsonl")])
    dist = os.path.join(work, "dist.strata")
    run([compile_, onnx, "--batch", str(micro), "-o", dist, "--steps",
         str(args.steps), "--world", str(n), "--gpus-per-node",
         str(args.ranks_per_node), "--partition-group", str(args.partition),
         "--accum", str(a)])
    ckpt = os.path.join(work, "ckpt")
    run(MPIRUN + ["-np", str(n), strata_run, dist, "--quiet", "--log",
                  os.path.join(work, "dist.jsonl"), "--save-every",
                  str(args.steps), "--checkpoint-dir", ckpt])
    ref_steps = losses(os.path.join(work, "ref.jsonl"))
    dist_steps = losses(os.path.join(work, "dist.jsonl"))
    worst = 0.0
    for i, (d, r) in enumerate(zip(dist_steps, ref_steps)):
        err = abs(d["loss"] - r["loss"]) / abs(r["loss"])
        worst = max(worst, err)
        if err > 1e-6:
            print(f"step {i + 1}: loss {d['loss']} vs one rank {r['loss']}")
            return 1
    if len(dist_steps) != args.steps or "inter_node_bytes" not in dist_steps[0]:
        print("the distributed log lacks steps or byte counters")
        return 1
    # Replicas: rank j and j + P hold the same shards, bit for bit.
    name = "step-%08d" % args.steps
    for r in range(args.partition, n):
        a_state = open(os.path.join(ckpt, "rank-%05d" % (r % args.partition),
                                    name, "state.bin"), "rb").read()
        b_state = open(os.path.join(ckpt, "rank-%05d" % r, name, "state.bin"),
                       "rb").read()
        if a_state != b_state:
            print(f"rank {r} differs from its replica {r % args.partition}")
            return 1
    print(f"{args.model} N={n} K={args.ranks_per_node} P={args.partition} "
          f"A={a}: {args.steps} steps equal one rank (worst {worst:.3g}); "
          f"replicas identical; step 1 bytes intra "
          f"{dist_steps[0]['intra_node_bytes']} inter "
          f"{dist_steps[0]['inter_node_bytes']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
